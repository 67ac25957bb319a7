// The control plane's message handling: subscriptions, a work queue drained by worker threads
// (store writes never run on the transport's callback thread), batched heartbeats, and the
// handlers of docs/protocol.md (host messages, enrolment, the operator API).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "mesh/control/trust.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/store.h"
#include "mesh/sdk/transport.h"

namespace mesh::control {

struct ControlOptions {
  /// Revisions kept per node (Store::declare's `retain`).
  std::uint32_t retain = 50;
  /// Heartbeats are written to the store in one batch at least this often.
  std::chrono::milliseconds heartbeat_flush{250};
  /// Largest accepted body in bytes, on top of the broker's max_payload; 0: no extra limit.
  std::size_t max_message = 0;
  /// Worker threads draining the message queue.
  std::size_t workers = 4;
  /// Messages waiting beyond this are refused ("busy") instead of queued.
  std::size_t queue_limit = 10000;
  /// The signing key and heartbeat master (control.key). Without them (empty keys) every host
  /// message and enrolment is refused: the control plane trusts nothing it cannot verify.
  ControlKeys keys;
  /// The operators allowed to use the API; null: every API request is refused.
  std::shared_ptr<OperatorRegistry> operators;
  /// How far a signed request's timestamp may be from this clock, either way.
  std::chrono::milliseconds clock_tolerance{60'000};
  /// Nonces remembered at most (operator and node requests within 2 × clock_tolerance); when
  /// full, signed requests are refused as busy rather than accepted unchecked.
  std::size_t replay_capacity = 100'000;
  /// When true, an enrolment reply also carries the node's broker nkey seed (sealed to the node's
  /// key; see broker.h), and `nodes_changed` is called after each enrolment so that the broker's
  /// authorization file is rewritten and reloaded.
  bool broker_credentials = false;
  std::function<void()> nodes_changed;
};

class ControlPlane {
 public:
  /// Neither pointer may be null. The transport must be configured; it may be connected later.
  ControlPlane(std::shared_ptr<sdk::Store> store, std::shared_ptr<sdk::Transport> transport,
               ControlOptions options);
  /// Calls stop().
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  /// Starts the worker and heartbeat-flusher threads. Call once, before subscribe().
  void start();
  /// Subscribes (queue group `mesh-control`) to every subject the control plane serves and waits
  /// for the broker to confirm. Idempotent once it succeeded; call again after an error (the
  /// broker may be down: the transport keeps reconnecting). Errors: Unavailable, PermissionDenied.
  sdk::Result<void> subscribe();
  bool subscribed() const noexcept;
  /// Unsubscribes, lets the workers finish what is queued (bounded to a few hundred ms), writes
  /// pending heartbeats. Does not close the transport or the store. Idempotent.
  void stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mesh::control
