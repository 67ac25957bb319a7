// Request/reply: one request, waiting for its reply on the connection's inbox.
#include "nats_connection.h"
#include "nats_message.h"

#include <algorithm>
#include <vector>

namespace mesh::transports::nats {

using namespace detail;

namespace {

/// A request on an inbox of its own (per_request_inbox, decision 161): a synchronous
/// subscription to "<inbox_base>.<n>" limited to one message, the request published with it as
/// reply subject, and the reply taken by this thread (natsSubscription_NextMsg) — no delivery
/// thread, and one hand-off less than nats.c's shared reply subscription. Returns NATS_OK with
/// `*reply`, NATS_TIMEOUT, NATS_NO_RESPONDERS, NATS_ILLEGAL_STATE when a disconnect failed it
/// (fail_requests), NATS_INVALID_ARG when the message cannot be built, or another nats.c status.
/// Called with the connection's shared lock held (close() waits for it).
natsStatus request_on_own_inbox(Core& c, natsConnection* nc, const sdk::Message& msg,
                                std::chrono::milliseconds timeout, natsMsg** reply) {
  sdk::Message req = msg;
  req.reply = c.inbox_base + "." + std::to_string(c.inbox_count.fetch_add(1) + 1);
  auto m = make_message(nc, req);
  if (!m) return NATS_INVALID_ARG;
  natsSubscription* sub = nullptr;
  natsStatus s = natsConnection_SubscribeSync(&sub, nc, req.reply.c_str());
  if (s != NATS_OK) return s;
  // The reader thread stops delivering to it after one message.
  s = natsSubscription_AutoUnsubscribe(sub, 1);
  std::uint64_t begun = 0;
  if (s == NATS_OK) {
    std::lock_guard lk(c.req_mu);
    c.in_flight.emplace(sub, false);
    begun = c.requests_begun.fetch_add(1);
  }
  if (s == NATS_OK) s = natsConnection_PublishMsg(nc, m->get());
  // Dropped between the check in do_request and the registration above: the disconnected
  // callback may have run already, and the publish went to nats.c's reconnect buffer.
  if (s == NATS_OK && natsConnection_Status(nc) != NATS_CONN_STATUS_CONNECTED) s = NATS_ILLEGAL_STATE;
  if (s == NATS_OK) s = natsSubscription_NextMsg(reply, sub, timeout.count());
  bool failed = false;
  {
    std::lock_guard lk(c.req_mu);
    if (auto it = c.in_flight.find(sub); it != c.in_flight.end()) {
      failed = it->second;
      c.in_flight.erase(it);
    }
  }
  if (failed && s != NATS_OK) s = NATS_ILLEGAL_STATE;
  // Out of the connection's table (a no-op when the reply or the disconnect removed it already),
  // then kept until it is safe to destroy (Core::spent).
  natsSubscription_Unsubscribe(sub);
  std::vector<natsSubscription*> doomed;
  {
    std::lock_guard lk(c.req_mu);
    if (s == NATS_OK) {
      // The reader thread has handled every message sent before this reply, so also every
      // message for a subscription unsubscribed before this request was published.
      auto keep = std::partition(c.spent.begin(), c.spent.end(),
                                 [&](const auto& e) { return e.first > begun; });
      for (auto it = keep; it != c.spent.end(); ++it) doomed.push_back(it->second);
      c.spent.erase(keep, c.spent.end());
    }
    c.spent.emplace_back(c.requests_begun.load(), sub);
  }
  for (natsSubscription* d : doomed) natsSubscription_Destroy(d);
  return s;
}

}  // namespace

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
  natsMsg* reply = nullptr;
  natsStatus s = NATS_OK;
  if (settings_.per_request_inbox) {
    s = request_on_own_inbox(*core_, nc, msg, timeout, &reply);
    if (s == NATS_ILLEGAL_STATE)  // the connection dropped while the request waited
      return fail(ErrorCode::Unavailable, "disconnected; no reply on " + msg.subject);
  } else {
    auto m = make_message(nc, msg);
    if (!m) return fail(m.error());
    s = natsConnection_RequestMsg(&reply, nc, m->get(), timeout.count());
  }
  if (s == NATS_INVALID_ARG) {  // request_on_own_inbox: the message itself (checked again here)
    auto m = make_message(nc, msg);
    if (!m) return fail(m.error());
  }
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
