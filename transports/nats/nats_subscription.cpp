// Subscriptions: subscribe (with pending limits), delivery to the handler, and the order in which
// a subscription is stopped and its nats.c object released (see Retired).
#include "nats_subscription.h"

#include <algorithm>
#include <utility>

#include "nats_connection.h"
#include "nats_message.h"
#include "nats_transport.h"
#include "nats_util.h"

namespace mesh::transports::nats::detail {

namespace {

constexpr auto kSubCompleteWait = std::chrono::seconds(2);
constexpr std::int64_t kSubscribeCheckMs = 1000;
constexpr std::int64_t kRetireFlushMs = 2000;

}  // namespace

void SubCore::shutdown(bool connection_closed) noexcept {
  natsSubscription* s = nullptr;
  natsConnection* conn = nullptr;
  {
    std::unique_lock lk(mu);
    if (state == State::Stopped) return;
    if (state == State::Stopping) {
      if (!in_callback_of(this)) cv.wait(lk, [&] { return state == State::Stopped; });
      return;
    }
    state = State::Stopping;
    s = std::exchange(sub, nullptr);
    conn = on;
  }
  shut_and_wait();
  if (s) {
    natsSubscription_Unsubscribe(s);  // fails harmlessly when the connection is closed
    // nats.c calls the completion callback once its delivery thread is done with the
    // subscription. Not waited for from inside a callback (the thread we would wait for may
    // be this one); the gate already guarantees the handler is not running.
    if (has_complete_cb && !in_any_callback() && !connection_closed) {
      std::unique_lock lk(mu);
      cv.wait_for(lk, kSubCompleteWait, [&] { return complete; });
    }
    // The subscription is out of the connection's table now; a reader-thread lookup made
    // before that may still hold its pointer (see Retired).
    if (connection_closed) {
      natsSubscription_Destroy(s);
    } else if (conn && natsConnection_Status(conn) == NATS_CONN_STATUS_CONNECTED &&
               natsConnection_FlushTimeout(conn, kRetireFlushMs) == NATS_OK) {
      natsSubscription_Destroy(s);
      if (retired) retired->destroy_all();  // removed before this round trip too
    } else if (retired) {
      retired->add(s);
    }
  }
  CallbackTargets::instance().remove(token);
  const bool own_handler_running = in_callback_of(this);
  {
    std::lock_guard lk(mu);
    state = State::Stopped;
    // Release what the handler captured now, unless it is the code running on this thread.
    if (!own_handler_running) handler = nullptr;
  }
  cv.notify_all();
}

natsStatus apply_limits(natsSubscription* s, const sdk::SubscribeOptions& o) {
  if (o.pending_messages == 0 && o.pending_bytes == 0) return NATS_OK;
  int msgs = 0, bytes = 0;
  if (natsStatus st = natsSubscription_GetPendingLimits(s, &msgs, &bytes); st != NATS_OK) return st;
  return natsSubscription_SetPendingLimits(s, o.pending_messages ? o.pending_messages : msgs,
                                           o.pending_bytes ? o.pending_bytes : bytes);
}

void on_message(natsConnection*, natsSubscription*, natsMsg* msg, void* token) noexcept {
  MsgPtr owned(msg);
  CallbackScope<SubCore> sub(token);
  if (!sub) return;
  try {
    std::string header_error;
    sdk::Message m = to_message(msg, &header_error);
    if (std::uint64_t hidden = 0; !header_error.empty() && traffic_log_budget().take(&hidden))
      sub->logger.warn("transport=nats event=bad_headers subject=" + m.subject.substr(0, 256) + " error=\"" +
                       header_error + "\"" + common::LogBudget::suffix(hidden));
    sub->handler(std::move(m));
  } catch (const std::exception& e) {
    sub->logger.error("transport=nats event=handler_error subject=" + sub->subject +
                      " error=\"" + e.what() + "\"");
  } catch (...) {
    sub->logger.error("transport=nats event=handler_error subject=" + sub->subject +
                      " error=\"unknown exception\"");
  }
}

void on_sub_complete(void* token) noexcept {
  // Not gated: it runs after the gate was shut, and only flips a flag.
  auto sub = CallbackTargets::instance().find<SubCore>(token);
  if (!sub) return;
  {
    std::lock_guard lk(sub->mu);
    sub->complete = true;
  }
  sub->cv.notify_all();
}

}  // namespace mesh::transports::nats::detail

namespace mesh::transports::nats {

using namespace detail;

Result<std::unique_ptr<sdk::Subscription>> NatsTransport::do_subscribe(
    const std::string& subject, const std::string& queue_group, sdk::MessageHandler handler) {
  return do_subscribe_limited(subject, queue_group, std::move(handler), sdk::SubscribeOptions{});
}

Result<std::unique_ptr<sdk::Subscription>> NatsTransport::do_subscribe_limited(
    const std::string& subject, const std::string& queue_group, sdk::MessageHandler handler,
    const sdk::SubscribeOptions& options) {
  if (options.pending_messages < 0 || options.pending_bytes < 0)
    return fail(ErrorCode::InvalidArgument, "pending limits must not be negative", "options");
  if (!valid_subject(subject, true))
    return fail(ErrorCode::InvalidArgument, "invalid subject '" + subject + "'", "subject");
  if (!queue_group.empty() && !valid_subject(queue_group, false))
    return fail(ErrorCode::InvalidArgument, "invalid queue group '" + queue_group + "'",
                "queue_group");
  if (!handler) return fail(ErrorCode::InvalidArgument, "handler is empty", "handler");

  std::shared_lock lk(core_->conn_mu);
  natsConnection* nc = core_->nc;
  if (core_->closing) return fail(ErrorCode::Unavailable, "transport is closed");
  if (!nc && !core_->retry) return fail(ErrorCode::Unavailable, "not connected");

  auto sub_core =
      std::make_shared<SubCore>(log(), subject, queue_group, std::move(handler), core_->retired);
  sub_core->limits = options;
  sub_core->token = CallbackTargets::instance().add(sub_core);
  if (!nc) {
    // No connection object while the redial waits for the broker to accept the credentials:
    // kept, and subscribed on the connection the redial makes (as nats.c does for
    // subscriptions made while reconnecting).
    std::lock_guard slk(core_->subs_mu);
    core_->subs.push_back(sub_core);
    return std::unique_ptr<sdk::Subscription>(std::make_unique<NatsSubscription>(sub_core));
  }
  const std::string error_before = last_error_text(nc);
  natsSubscription* sub = nullptr;
  const natsStatus s =
      queue_group.empty()
          ? natsConnection_Subscribe(&sub, nc, subject.c_str(), on_message, sub_core->token)
          : natsConnection_QueueSubscribe(&sub, nc, subject.c_str(), queue_group.c_str(),
                                          on_message, sub_core->token);
  if (s != NATS_OK) {
    CallbackTargets::instance().remove(sub_core->token);
    return fail(op_error_code(s), describe(s, "subscribe to " + subject));
  }
  if (const natsStatus ls = apply_limits(sub, options); ls != NATS_OK)
    log().warn("transport=nats event=pending_limits_not_set subject=" + subject + " error=\"" +
               describe(ls, "set pending limits") + "\"");
  {
    std::lock_guard slk(sub_core->mu);
    sub_core->sub = sub;
    sub_core->on = nc;
    sub_core->has_complete_cb =
        natsSubscription_SetOnCompleteCB(sub, on_sub_complete, sub_core->token) == NATS_OK;
  }
  auto result = std::make_unique<NatsSubscription>(sub_core);

  // The broker answers a refused SUB with an asynchronous -ERR before the PONG of a flush, so a
  // round trip tells whether it was accepted. Skipped while disconnected (nats.c re-sends the
  // subscription on reconnect; a refusal is then only logged by the error handler).
  if (natsConnection_Status(nc) == NATS_CONN_STATUS_CONNECTED &&
      natsConnection_FlushTimeout(nc, kSubscribeCheckMs) == NATS_OK) {
    const std::string error_after = last_error_text(nc);
    if (error_after != error_before &&
        error_after.find("Subscription to \"" + subject + "\"") != std::string::npos) {
      result.reset();
      return fail(ErrorCode::PermissionDenied, "subscribe to " + subject + ": " + error_after);
    }
  }

  {
    // close() sets `closing` before it collects the subscriptions under subs_mu, so a
    // subscription is either collected and shut by close() or refused here.
    std::lock_guard slk(core_->subs_mu);
    if (!core_->closing) {
      auto& subs = core_->subs;
      subs.erase(
          std::remove_if(subs.begin(), subs.end(), [](const auto& w) { return w.expired(); }),
          subs.end());
      subs.push_back(sub_core);
      return std::unique_ptr<sdk::Subscription>(std::move(result));
    }
  }
  result.reset();
  return fail(ErrorCode::Unavailable, "transport is closed");
}

}  // namespace mesh::transports::nats
