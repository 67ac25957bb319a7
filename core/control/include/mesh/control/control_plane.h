// The control plane's message handling: subscriptions, a work queue drained by worker threads
// (store writes never run on the transport's callback thread), batched heartbeats, and the
// handlers of docs/protocol.md (host messages, enrolment, the operator API).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "mesh/control/config.h"
#include "mesh/control/trust.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/store.h"
#include "mesh/sdk/transport.h"

namespace mesh::control {

class StageRegistry;  // mesh/control/stages.h
namespace detail {
class ControlMetrics;  // src/metrics.h (internal)
}

struct ControlOptions {
  /// Revisions kept per node (Store::declare's `retain`).
  std::uint32_t retain = 50;
  /// Heartbeats are written to the store in one batch at least this often.
  std::chrono::milliseconds heartbeat_flush{250};
  /// Largest accepted body in bytes, on top of the broker's max_payload; 0: no extra limit.
  std::size_t max_message = 0;
  /// Largest whole message accepted in parts (docs/protocol.md "Messages in parts"), in bytes.
  std::size_t max_assembled = 64u << 20;
  /// Worker threads draining the message queue.
  std::size_t workers = 4;
  /// Messages waiting beyond this, per traffic class (API, enrolment, a node's requests, reports,
  /// heartbeats: each has its own queue, served in turn), are refused ("busy") instead of queued.
  std::size_t queue_limit = 10000;
  /// Subscriptions to `mesh.heartbeat.*`, all in the queue group (decision record 122): the
  /// broker spreads heartbeats over them and each has a delivery thread of its own, on which a
  /// heartbeat of a node whose identity is cached is checked and taken at once (no queue, no
  /// worker); the others go through the heartbeat queue to the workers. 0 counts as 1.
  std::size_t heartbeat_subscriptions = 2;
  /// What one node may send (heartbeats, reports, latest/recovery requests together): `node_rate`
  /// messages per second on average, `node_burst` at once; the excess is dropped with a
  /// rate-limited warning naming the node. Buckets are kept for at most `node_rate_keys` nodes at
  /// once (idle ones are dropped; beyond that the others share one bucket).
  double node_rate = 20;
  double node_burst = 200;
  std::size_t node_rate_keys = 100'000;
  /// What one node's verified apply reports, drift reports and briefings may make the store write
  /// (decision record 186): their bodies' bytes, `node_store_rate` per second on average and
  /// `node_store_burst` at once. A message that arrives while the node's budget is spent is
  /// refused as `transient` (a host keeps a report and sends it again later), saying when the
  /// budget allows again; one larger than the burst passes when the budget is not spent and is
  /// paid for by the wait after it. Per instance: N instances take N times as much. Buckets: as
  /// node_rate_keys.
  double node_store_rate = 16 * 1024;
  double node_store_burst = 1024 * 1024;
  /// The signing key and heartbeat master (control.key). Without them (empty keys) every host
  /// message and enrolment is refused: the control plane trusts nothing it cannot verify.
  ControlKeys keys;
  /// The operators allowed to use the API; null: every API request is refused.
  std::shared_ptr<OperatorRegistry> operators;
  /// How far a signed request's timestamp may be from this clock, either way.
  std::chrono::milliseconds clock_tolerance{60'000};
  /// Nonces remembered in memory per signer (an operator or a node, within 2 × clock_tolerance);
  /// when a signer's are full, its signed requests are refused as busy rather than accepted
  /// unchecked — only its own (decision record 29). Every nonce is also kept in the store for the
  /// same window (Store::remember_request), so that a restart forgets none.
  std::size_t replay_capacity = 10'000;
  /// When true, an enrolment reply also carries the node's broker nkey seed (sealed to the node's
  /// key; see broker.h), and `nodes_changed` is called after each enrolment so that the broker's
  /// authorization file is rewritten and reloaded.
  bool broker_credentials = false;
  std::function<void()> nodes_changed;
  /// The SDK ABI minor the store plugin was built with (loader::LoadedPlugin::abi_minor): store
  /// methods added after it are not called (node removal needs 1).
  std::uint32_t store_abi_minor = MESH_SDK_ABI_MINOR;
  /// This instance's id (`<state_dir>/instance.id`, decision record 90; 32 lower-case hex): it
  /// holds the lease on background work in the store under this name, names this instance in its
  /// answers to parts and to `publish.part`, and makes its own subject `mesh.instance.<id>.>`,
  /// subscribed outside the queue group, where the rest of such a whole or upload comes (decision
  /// record 170). "": a random one for this process.
  std::string instance_id;
  /// How long the lease on background work lasts unrenewed ([control] lease; decision record
  /// 91): while several instances share a store, re-pushing declarations another instance may
  /// have stranded and moving staged deploys on is done by the holder only, and another takes
  /// it over this long after the holder died. Renewed every third of it.
  std::chrono::milliseconds lease{15'000};
  /// The loaded stage plugins (mesh/control/stages.h, StageRegistry::load); null: none.
  std::shared_ptr<StageRegistry> stages;
  /// Parent of the stages' work directories (`<state_dir>/work`); "": stages cannot be run.
  std::string work_dir;
  /// The keys_dir `keys` came from, when set: every lease round compares the signing key in force
  /// with the store's record of the mesh's newest (decision record 194), records a newer one, and
  /// logs an error while this instance's is older. "": not checked.
  std::string keys_dir;
  /// The content directory (ControlConfig::content_dir, decision record 111); "": content.put and
  /// mesh.content.* are refused as unsupported.
  std::string content_dir;
  /// The [repository] table: its dir is what `repository.key` reads the public key from.
  RepositorySettings repository;
  /// The [pipelines] table: pipeline files and the build user (pipeline.run).
  PipelineSettings pipelines;
  /// Where refusals, reports and heartbeats taken, and declaration pushes are counted
  /// (src/metrics.h, docs/metrics.md); null: not counted.
  std::shared_ptr<detail::ControlMetrics> metrics;
};

/// What the control plane has done since it was constructed: counters for benchmarks
/// (bench/heartbeat_bench) and monitoring. A heartbeat goes received → rate-limited (dropped, its
/// node sent too many) or busy (dropped, the heartbeat queue was full: only heartbeats whose
/// node's identity is not cached are queued) or handled (on the delivery thread, or by a worker)
/// → verified (counted as contact) or refused → stored (its contact is in a committed
/// Store::touch batch). Several heartbeats of one node within one flush interval share
/// one row (the newest wins), so `heartbeats_stored` ≥ `contacts_written`. Messages still queued
/// when stop() gives up draining are in `received` and nowhere else.
struct ControlStats {
  std::uint64_t received = 0;             ///< messages the transport handed over, every subject
  std::uint64_t busy = 0;                 ///< of those, refused because the queue was full
  std::uint64_t heartbeats_received = 0;  ///< heartbeat messages handed over
  std::uint64_t heartbeats_busy = 0;      ///< heartbeats dropped because the queue was full
  std::uint64_t heartbeats_handled = 0;   ///< heartbeats taken from the queue and checked
  std::uint64_t heartbeats_verified = 0;  ///< of those, counted as contact (MAC, freshness, fields)
  std::uint64_t heartbeats_refused = 0;   ///< handled − verified: failed a check, dropped, logged
  std::uint64_t heartbeats_stored = 0;    ///< verified heartbeats whose contact a committed touch holds
  std::uint64_t contacts_written = 0;     ///< rows in committed Store::touch batches
  std::uint64_t flushes = 0;              ///< committed Store::touch batches (non-empty)
  std::uint64_t flush_failures = 0;       ///< failed Store::touch calls (their contacts are retried)
  std::uint64_t rate_limited = 0;         ///< node messages dropped by the node's rate limit (not in busy)
  std::uint64_t heartbeats_rate_limited = 0;  ///< of those, heartbeats (not handled)
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

  /// Starts the worker, heartbeat-flusher, staging and lease threads. Call once, before
  /// subscribe().
  void start();
  /// Subscribes (queue group `mesh-control`: of several instances each request reaches one) to
  /// every subject the control plane serves, and outside the queue group to this instance's own
  /// subject `mesh.instance.<ControlOptions::instance_id>.>` (a message there is handled as on the
  /// subject after that prefix; decision record 170), and waits for the broker to confirm; then a first
  /// round of the lease on background work runs (its holder re-pushes pending declarations). Idempotent once it succeeded; call again after an error (the
  /// broker may be down: the transport keeps reconnecting). Errors: Unavailable, PermissionDenied.
  sdk::Result<void> subscribe();
  bool subscribed() const noexcept;
  /// Unsubscribes, lets the workers finish what is queued (bounded to a few hundred ms), writes
  /// pending heartbeats, gives the lease up (another instance takes over at its next round).
  /// Does not close the transport or the store. Idempotent.
  void stop();

  /// The counters so far. Thread-safe, lock-free and cheap (relaxed atomic loads): any thread, at
  /// any time, also after stop(). Each field is read on its own, so while messages flow the
  /// fields may be a few messages apart from each other; once idle they add up.
  ControlStats stats() const noexcept;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mesh::control
