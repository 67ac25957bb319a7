// Publishing and flushing.
#include "nats_connection.h"
#include "nats_message.h"

namespace mesh::transports::nats {

using namespace detail;

Result<void> NatsTransport::do_publish(const sdk::Message& msg) {
  std::shared_lock lk(core_->conn_mu);
  natsConnection* nc = core_->nc;
  if (!nc || core_->closing)
    return fail(ErrorCode::Unavailable, core_->closing ? "transport is closed" : "not connected");
  auto m = make_message(nc, msg);
  if (!m) return fail(m.error());
  const natsStatus s = natsConnection_PublishMsg(nc, m->get());
  if (s != NATS_OK) return fail(op_error_code(s), describe(s, "publish to " + msg.subject));
  return {};
}

Result<void> NatsTransport::do_flush(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0)
    return fail(ErrorCode::InvalidArgument, "flush timeout must be positive");
  std::shared_lock lk(core_->conn_mu);
  natsConnection* nc = core_->nc;
  if (!nc || core_->closing)
    return fail(ErrorCode::Unavailable, core_->closing ? "transport is closed" : "not connected");
  if (natsConnection_Status(nc) != NATS_CONN_STATUS_CONNECTED)
    return fail(ErrorCode::Unavailable, "not connected (reconnecting)");
  const natsStatus s = natsConnection_FlushTimeout(nc, timeout.count());
  if (s == NATS_OK) return {};
  if (s == NATS_TIMEOUT)
    return fail(ErrorCode::Timeout,
                "flush not acknowledged within " + std::to_string(timeout.count()) + " ms");
  return fail(ErrorCode::Unavailable, describe(s, "flush"));
}

}  // namespace mesh::transports::nats
