// Nox Mesh NATS transport — one subscription's state and its nats.c callbacks. Private.
#pragma once

#include <nats/nats.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mesh/sdk/transport.h"
#include "nats_callbacks.h"

namespace mesh::transports::nats::detail {

/// nats.c 3.4.1's reader thread looks a subscription up under the connection's subscription
/// lock, releases that lock, and only then locks the subscription, without holding a reference
/// (natsConn_processMsg; fixed upstream in 3.6.0). A subscription unsubscribed and destroyed
/// between those two steps is freed under the reader's feet (a crash in natsMutex_Lock). So a
/// subscription is destroyed only when no lookup made before its removal can still be running:
/// after its connection was closed (nats.c joins the reader thread in natsConnection_Close), or
/// after a flush round trip completed once it was removed (the reader handles the PONG after
/// any message it was processing). Until then it waits here.
struct Retired {
  std::mutex mu;
  std::vector<natsSubscription*> subs;  // guarded by mu: unsubscribed, not yet destroyed

  void add(natsSubscription* s) {
    std::lock_guard lk(mu);
    subs.push_back(s);
  }
  /// Destroys every retired subscription. Call only at one of the safe points above.
  void destroy_all() noexcept {
    std::vector<natsSubscription*> doomed;
    {
      std::lock_guard lk(mu);
      doomed.swap(subs);
    }
    for (natsSubscription* s : doomed) natsSubscription_Destroy(s);
  }
};

/// One subscription's state, shared between the Subscription object, the transport (so close()
/// can shut it) and nats.c's delivery thread (through its token).
struct SubCore final : Gate {
  SubCore(sdk::Logger& logger_, std::string subject_, std::string queue_group_,
          sdk::MessageHandler handler_, std::shared_ptr<Retired> retired_)
      : logger(logger_),
        subject(std::move(subject_)),
        queue_group(std::move(queue_group_)),
        handler(std::move(handler_)),
        retired(std::move(retired_)) {}

  /// Stops delivery: once it returns the handler is never called again (unless it is running on
  /// this thread). The nats.c subscription is left alone. Used by close() before it closes the
  /// connection.
  void stop_delivery() noexcept {
    {
      std::lock_guard lk(mu);
      if (state != State::Live) return;
    }
    shut_and_wait();
  }

  /// Stops delivery and releases the nats.c subscription. Idempotent; a concurrent second call
  /// waits for the first (unless it comes from this subscription's own handler).
  /// `connection_closed`: the caller closed the subscription's connection (close()), so nats.c's
  /// reader thread is gone and the subscription may be destroyed at once; otherwise it is
  /// destroyed after a flush round trip, or retired until one of the safe points of Retired.
  void shutdown(bool connection_closed = false) noexcept;

  enum class State { Live, Stopping, Stopped };
  sdk::Logger& logger;
  const std::string subject;
  const std::string queue_group;
  sdk::MessageHandler handler;
  const std::shared_ptr<Retired> retired;
  void* token = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  natsSubscription* sub = nullptr;  // guarded by mu; null while no connection exists (redial)
  natsConnection* on = nullptr;     // guarded by mu: the connection `sub` belongs to
  sdk::SubscribeOptions limits;     // set before the first subscribe, then read-only
  bool has_complete_cb = false;
  bool complete = false;            // guarded by mu
  State state = State::Live;        // guarded by mu
};

/// Applies a subscription's pending limits (0 keeps nats.c's default for that limit).
natsStatus apply_limits(natsSubscription* s, const sdk::SubscribeOptions& o);

/// nats.c's message handler of every subscription (closure: the SubCore's token).
void on_message(natsConnection*, natsSubscription*, natsMsg* msg, void* token) noexcept;

/// nats.c's completion callback of a subscription (closure: the SubCore's token).
void on_sub_complete(void* token) noexcept;

class NatsSubscription final : public sdk::Subscription {
 public:
  explicit NatsSubscription(std::shared_ptr<SubCore> core) : core_(std::move(core)) {}
  ~NatsSubscription() override { core_->shutdown(); }

 private:
  std::shared_ptr<SubCore> core_;
};

}  // namespace mesh::transports::nats::detail
