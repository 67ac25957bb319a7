// Request/reply: one request, waiting for its reply on the connection's shared inbox (nats.c) or,
// with per_request_inbox, on an inbox of its own.
#include "nats_connection.h"
#include "nats_message.h"

#include <algorithm>
#include <vector>

namespace mesh::transports::nats {

using namespace detail;

namespace {

/// The inbox of a new request: "<inbox_base>.<n>".
std::string next_inbox(Core& c) {
  return c.inbox_base + "." + std::to_string(c.inbox_count.fetch_add(1) + 1);
}

/// Unsubscribes `sub` and keeps it until it is safe to destroy (Core::spent).
void retire(Core& c, natsSubscription* sub) {
  natsSubscription_Unsubscribe(sub);  // a no-op when a disconnect or close removed it already
  std::lock_guard lk(c.req_mu);
  c.spent.emplace_back(c.requests_begun.load(), sub);
}

/// A request on an inbox of its own (per_request_inbox, decision 161): a synchronous
/// subscription to "<inbox_base>.<n>", the request published with it as reply subject, the
/// reply taken by this thread (natsSubscription_NextMsg), then the subscription unsubscribed:
/// no delivery thread, and one hand-off less than nats.c's shared reply subscription. The
/// subscription is made in advance, after the previous request's reply (Core::ready), when it
/// can be. Returns NATS_OK with `*reply`, NATS_TIMEOUT, NATS_NO_RESPONDERS, NATS_ILLEGAL_STATE
/// when a disconnect failed it (fail_requests), NATS_INVALID_ARG when the message cannot be
/// built, or another nats.c status. Called with the connection's shared lock held (close()
/// waits for it); thread-safe.
natsStatus request_on_own_inbox(Core& c, natsConnection* nc, const sdk::Message& msg,
                                std::chrono::milliseconds timeout, natsMsg** reply) {
  // The inbox subscribed after the previous reply, when it is on this connection and nothing
  // arrived on it meanwhile; else a new one (its SUB written now, before the request).
  natsSubscription* sub = nullptr;
  natsSubscription* unusable = nullptr;
  std::string inbox;
  {
    std::lock_guard lk(c.req_mu);
    if (c.ready) {
      int queued = 0;
      if (c.ready_on == nc && natsSubscription_GetPending(c.ready, &queued, nullptr) == NATS_OK && queued == 0) {
        sub = c.ready;
        inbox = std::move(c.ready_inbox);
      } else {
        unusable = c.ready;
      }
      c.ready = nullptr;
      c.ready_on = nullptr;
    }
  }
  if (unusable) retire(c, unusable);
  sdk::Message req = msg;
  req.reply = sub ? inbox : next_inbox(c);
  auto m = make_message(nc, req);
  if (!m) {
    if (sub) retire(c, sub);
    return NATS_INVALID_ARG;
  }
  natsStatus s = NATS_OK;
  if (!sub && (s = natsConnection_SubscribeSync(&sub, nc, req.reply.c_str())) != NATS_OK) return s;
  // No natsSubscription_AutoUnsubscribe(sub, 1): that is one more write before the request's
  // (an UNSUB line); the subscription is unsubscribed after the reply instead, and a second
  // message to the inbox before that is dropped with it.
  std::uint64_t begun = 0;
  {
    std::lock_guard lk(c.req_mu);
    c.in_flight.emplace(sub, false);
    begun = c.requests_begun.fetch_add(1);
  }
  s = natsConnection_PublishMsg(nc, m->get());
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
  // Out of the connection's table (a no-op when a disconnect removed it already), then kept
  // until it is safe to destroy (Core::spent).
  natsSubscription_Unsubscribe(sub);
  // The next request's inbox, while the link is known to be up (after the reply: not on the
  // way of this request).
  natsSubscription* next = nullptr;
  std::string next_name;
  if (s == NATS_OK) {
    next_name = next_inbox(c);
    if (natsConnection_SubscribeSync(&next, nc, next_name.c_str()) != NATS_OK) next = nullptr;
  }
  std::vector<natsSubscription*> doomed;
  {
    std::lock_guard lk(c.req_mu);
    if (next && !c.ready) {
      c.ready = std::exchange(next, nullptr);
      c.ready_on = nc;
      c.ready_inbox = std::move(next_name);
    }
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
  if (next) retire(c, next);  // another request's was there first
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
