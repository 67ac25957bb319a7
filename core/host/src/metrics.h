// mesh-host's metrics for node-exporter's textfile collector (decision record 94,
// docs/metrics.md): a prometheus-cpp registry of counters and gauges, serialised with
// prometheus-cpp's TextSerializer into `[metrics] textfile` after each change, atomically (a temp
// file in the same directory, then rename: node-exporter never reads half a file). Internal to
// mesh-host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/common/logging.h"
#include "mesh/engine/engine.h"
#include "mesh/sdk/result.h"

namespace prometheus {
class Registry;
}

namespace mesh::host {

class HostMetrics {
 public:
  /// `textfile`: the file to write (absolute, ending in .prom; checked by the config); "" turns
  /// every method into a no-op. Nothing is written until the first figure. Throws std::bad_alloc
  /// only.
  explicit HostMetrics(std::string textfile);
  ~HostMetrics();
  HostMetrics(const HostMetrics&) = delete;
  HostMetrics& operator=(const HostMetrics&) = delete;

  bool enabled() const noexcept { return !textfile_.empty(); }

  /// An apply ended with `outcome` ("applied", "failed", "superseded", "refused"): counted in
  /// mesh_host_applies_total{outcome}; `owned` (resources the host now owns) sets
  /// mesh_host_resources_owned; `revision`, when applied, mesh_host_applied_revision; the time
  /// sets mesh_host_last_reconcile_timestamp_seconds (not for "refused": nothing was applied).
  /// Then writes the file. Thread-safe.
  void apply_done(std::string_view outcome, std::uint64_t revision, std::size_t owned) noexcept;
  /// A drift scan ended with `items`: mesh_host_drift_scans_total, mesh_host_drift_found_total
  /// (one per drifted resource), mesh_host_drift_repaired_total / mesh_host_drift_repair_failed_total
  /// (by each item's action), the reconcile time; then writes the file. Thread-safe.
  void drift_scanned(const std::vector<engine::DriftItem>& items) noexcept;
  /// A heartbeat published (`sent`) or not (no link, or the publish failed):
  /// mesh_host_heartbeats_sent_total / mesh_host_heartbeats_failed_total; then writes the file.
  /// Thread-safe.
  void heartbeat(bool sent) noexcept;
  /// Sets mesh_host_resources_owned and mesh_host_applied_revision as the state directory holds
  /// them at start, and writes the file. Thread-safe.
  void started(std::uint64_t applied_revision, std::size_t owned) noexcept;

  /// The registry as prometheus-cpp's TextSerializer renders it (what the file holds).
  std::string text() const;

 private:
  void write() noexcept;

  std::string textfile_;
  std::shared_ptr<prometheus::Registry> registry_;
  struct Families;
  std::unique_ptr<Families> f_;
  std::mutex write_mu_;
  common::LogBudget log_{1};
};

}  // namespace mesh::host
