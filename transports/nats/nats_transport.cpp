// NatsTransport's lifetime and state queries. The rest of the class is split by concern:
//   nats_config.cpp        schema and configure()
//   nats_options.cpp       nats.c options: reconnect policy, authentication, TLS, inbox prefix
//   nats_connection.cpp    link callbacks and connect()
//   nats_redial.cpp        a new connection after refused credentials, resubscribing
//   nats_subscription.cpp  subscribe, delivery, releasing nats.c subscriptions safely
//   nats_publish.cpp       publish and flush
//   nats_request.cpp       request/reply
//   nats_message.cpp       sdk::Message <-> natsMsg, subject and header checks
//   nats_teardown.cpp      close()
//   nats_callbacks.cpp     gates and tokens through which nats.c callbacks reach these objects
//   nats_util.cpp          error texts and codes, the traffic log budget
#include "nats_transport.h"

#include "nats_connection.h"

namespace mesh::transports::nats {

using namespace detail;

NatsTransport::NatsTransport(const sdk::HostContext& host)
    : sdk::Transport(host), core_(std::make_shared<Core>(log())) {
  core_->token = CallbackTargets::instance().add(core_);
}

NatsTransport::~NatsTransport() {
  close();
  CallbackTargets::instance().remove(core_->token);
}

void NatsTransport::on_link_event(sdk::LinkHandler handler) noexcept {
  core_->link_handler = std::move(handler);
}

bool NatsTransport::connected() const noexcept {
  std::shared_lock lk(core_->conn_mu);
  return core_->nc && natsConnection_Status(core_->nc) == NATS_CONN_STATUS_CONNECTED;
}

std::size_t NatsTransport::max_payload_bytes() const noexcept {
  std::shared_lock lk(core_->conn_mu);
  if (core_->nc) {
    const std::int64_t max = natsConnection_GetMaxPayload(core_->nc);
    if (max > 0) core_->max_payload.store(static_cast<std::size_t>(max));
  }
  return core_->max_payload.load();
}

}  // namespace mesh::transports::nats
