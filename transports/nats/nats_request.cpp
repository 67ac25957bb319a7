// Request/reply: one request, waiting for its reply on the connection's inbox.
#include "nats_connection.h"
#include "nats_message.h"

namespace mesh::transports::nats {

using namespace detail;

Result<sdk::Message> NatsTransport::do_request(const sdk::Message& msg,
                                               std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0)
    return fail(ErrorCode::InvalidArgument, "request timeout must be positive");
  std::shared_lock lk(core_->conn_mu);
  natsConnection* nc = core_->nc;
  if (!nc || core_->closing)
    return fail(ErrorCode::Unavailable, core_->closing ? "transport is closed" : "not connected");
  if (natsConnection_Status(nc) != NATS_CONN_STATUS_CONNECTED)
    return fail(ErrorCode::Unavailable, "not connected (reconnecting); request to " +
                                            msg.subject + " not sent");
  auto m = make_message(nc, msg);
  if (!m) return fail(m.error());
  natsMsg* reply = nullptr;
  const natsStatus s = natsConnection_RequestMsg(&reply, nc, m->get(), timeout.count());
  MsgPtr reply_owner(reply);
  switch (s) {
    case NATS_OK: {
      std::string header_error;
      sdk::Message m = to_message(reply, &header_error);
      if (std::uint64_t hidden = 0; !header_error.empty() && traffic_log_budget().take(&hidden))
        log().warn("transport=nats event=bad_headers subject=" + msg.subject + " error=\"" +
                   header_error + "\"" + common::LogBudget::suffix(hidden));
      return m;
    }
    case NATS_TIMEOUT:
      return fail(ErrorCode::Timeout, "no reply on " + msg.subject + " within " +
                                          std::to_string(timeout.count()) + " ms");
    case NATS_NO_RESPONDERS:
      return fail(ErrorCode::Unavailable, "no responders on " + msg.subject);
    default:
      return fail(op_error_code(s), describe(s, "request to " + msg.subject));
  }
}

}  // namespace mesh::transports::nats
