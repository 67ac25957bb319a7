// The control plane's Prometheus metrics (decision record 93, docs/metrics.md): a prometheus-cpp
// registry of counters, gauges and histograms, served by prometheus-cpp's pull Exposer at
// /metrics on `[metrics] listen`. Internal to mesh-control.
//
// Three kinds of figures:
//   - counted where they happen, through the few hooks below (refusals, reports and heartbeats
//     taken, declaration pushes): ControlMetrics::refused, ::ingested, ::push;
//   - timed around every store call by a decorator of the store (measured_store);
//   - read from the store when Prometheus scrapes (nodes by last-contact age, nodes by the state
//     of their newest revision's delivery): FleetCollector, one Store::nodes() per scrape.
// Every text on the wire is prometheus-cpp's (its TextSerializer behind the Exposer).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "mesh/sdk/result.h"
#include "mesh/sdk/store.h"
#include "mesh/sdk/transport.h"

namespace prometheus {
class Registry;
class Exposer;
class Collectable;
}  // namespace prometheus

namespace mesh::control::detail {

/// The kind of a message a refusal or an intake is counted under (label `kind`): "heartbeat",
/// "report" (mesh.report.*), "drift" (mesh.drift.*), "enrol", "api" (mesh.api.*), "node_request"
/// (mesh.latest.*, mesh.recovery.*, mesh.briefing.*), "other". Pure; thread-safe.
std::string_view metric_kind(std::string_view subject) noexcept;

/// The reason label of a refusal: the error code's stable name (sdk::to_string(ErrorCode),
/// e.g. "permission_denied"), except "stale" for a timestamp outside the clock tolerance or not
/// newer than the last one (PermissionDenied on the Mesh-Timestamp header) and "busy" for a
/// queue that was full (Transient whose message says so). Bounded: never a node name or a
/// message text. Pure; thread-safe.
std::string_view refusal_reason(const sdk::Error& error) noexcept;

class ControlMetrics {
 public:
  /// A registry with every family of docs/metrics.md created (the labelled series of counters
  /// start at zero for every kind and reason named there, so that a rate is defined from the
  /// first scrape). Nothing is served until serve(). Throws std::bad_alloc only.
  ControlMetrics();
  ~ControlMetrics();
  ControlMetrics(const ControlMetrics&) = delete;
  ControlMetrics& operator=(const ControlMetrics&) = delete;

  /// Counts a message refused (answered with an error, or dropped with a log line) by the
  /// control plane: `subject` gives the kind (metric_kind), `error` the reason (refusal_reason).
  /// Series: mesh_control_heartbeats_refused_total{reason}, mesh_control_reports_refused_total
  /// {kind,reason} (kind report or drift), mesh_control_messages_refused_total{kind,reason} (the
  /// others). Thread-safe, lock-free after the series exists (a mutex guards its first use).
  void refused(std::string_view subject, const sdk::Error& error) noexcept;
  /// A node's message dropped by its rate limit (never answered): reason "rate_limited".
  /// Thread-safe.
  void rate_limited(std::string_view subject) noexcept;
  /// Counts a heartbeat taken as contact (mesh_control_heartbeats_ingested_total) or a report
  /// acknowledged (mesh_control_reports_ingested_total{kind}; `recorded` false: a re-send that
  /// changed nothing, counted too, label recorded="false"). Thread-safe.
  void heartbeat_ingested() noexcept;
  void report_ingested(std::string_view subject, bool recorded) noexcept;

  /// Declaration pushes (Service::push_declaration): a Push lives while one is signed and
  /// published (mesh_control_pushes_in_flight); done() counts its outcome in
  /// mesh_control_pushes_total{outcome="published"|"failed"} (a Push destroyed without done()
  /// counts as failed). Thread-safe.
  class Push {
   public:
    explicit Push(ControlMetrics* metrics) noexcept;
    ~Push();
    Push(const Push&) = delete;
    Push& operator=(const Push&) = delete;
    void done(bool published) noexcept;

   private:
    ControlMetrics* metrics_;
    bool counted_ = false;
  };

  /// Times one store call: mesh_control_store_duration_seconds{operation} (histogram, seconds)
  /// and, when it failed, mesh_control_store_errors_total{operation}. `operation` is one of the
  /// Store method names (a bounded set: the decorator names them). Thread-safe.
  void store_call(const char* operation, std::chrono::steady_clock::duration took, bool ok) noexcept;

  /// Starts serving /metrics on `listen` ("host:port", checked by load_metrics_settings) with
  /// prometheus-cpp's Exposer: this registry plus the fleet figures read from `store` at each
  /// scrape (kept by shared ownership until stop). Errors: Unavailable naming the address when it
  /// cannot be bound (in use, no permission). Call once, from the main thread.
  sdk::Result<void> serve(const std::string& listen, std::shared_ptr<sdk::Store> store);
  /// The port bound by serve() (0 before it).
  int port() const noexcept;
  /// Stops serving (joins the Exposer's threads); idempotent. The destructor calls it.
  void stop() noexcept;

  /// The registry itself (tests serialise it with prometheus::TextSerializer).
  std::shared_ptr<prometheus::Registry> registry() const noexcept;
  /// The collectable of the fleet figures read from `store` at each Collect() (tests).
  static std::shared_ptr<prometheus::Collectable> fleet_collector(std::shared_ptr<sdk::Store> store);

  struct Families;  // metrics.cpp

 private:
  void count_refusal(std::string_view subject, std::string_view reason) noexcept;

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> f_;
  std::shared_ptr<prometheus::Collectable> fleet_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

/// `store` with every call timed into `metrics` (ControlMetrics::store_call), forwarding each
/// method of sdk::Store unchanged (results, errors, the defaults of methods `store` predates).
/// `store` must be configured and open; ownership is shared. Thread-safe as `store` is.
std::shared_ptr<sdk::Store> measured_store(std::shared_ptr<sdk::Store> store, std::shared_ptr<ControlMetrics> metrics);

}  // namespace mesh::control::detail
