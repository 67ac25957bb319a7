// mesh-host's node-exporter textfile (metrics.h, decision record 94, docs/metrics.md).
#include "metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <spdlog/spdlog.h>

#include <sstream>

#include "mesh/common/clock.h"
#include "mesh/common/fs.h"

namespace mesh::host {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;

struct HostMetrics::Families {
  explicit Families(prometheus::Registry& r)
      : applies(BuildCounter()
                    .Name("mesh_host_applies_total")
                    .Help("Applies of a declared revision that ended, by outcome (applied, failed, superseded, refused)")
                    .Register(r)),
        drift_scans(BuildCounter().Name("mesh_host_drift_scans_total").Help("Drift scans run").Register(r).Add({})),
        drift_found(BuildCounter()
                        .Name("mesh_host_drift_found_total")
                        .Help("Resources found drifted by drift scans (one per resource per scan)")
                        .Register(r)
                        .Add({})),
        drift_repaired(BuildCounter()
                           .Name("mesh_host_drift_repaired_total")
                           .Help("Drifted resources repaired by drift scans")
                           .Register(r)
                           .Add({})),
        drift_repair_failed(BuildCounter()
                                .Name("mesh_host_drift_repair_failed_total")
                                .Help("Drifted resources whose repair failed")
                                .Register(r)
                                .Add({})),
        last_reconcile(BuildGauge()
                           .Name("mesh_host_last_reconcile_timestamp_seconds")
                           .Help("When the last apply or drift scan ended, Unix time in seconds (0: none yet since "
                                 "the host started)")
                           .Register(r)
                           .Add({})),
        heartbeats_sent(BuildCounter()
                            .Name("mesh_host_heartbeats_sent_total")
                            .Help("Heartbeats published to the broker")
                            .Register(r)
                            .Add({})),
        heartbeats_failed(BuildCounter()
                              .Name("mesh_host_heartbeats_failed_total")
                              .Help("Heartbeats due but not published (no broker link, or the publish failed)")
                              .Register(r)
                              .Add({})),
        owned(BuildGauge()
                  .Name("mesh_host_resources_owned")
                  .Help("Resources this host owns (its recovery copy)")
                  .Register(r)
                  .Add({})),
        applied_revision(BuildGauge()
                             .Name("mesh_host_applied_revision")
                             .Help("The revision this host last applied (0: none)")
                             .Register(r)
                             .Add({})) {
    for (const char* o : {"applied", "failed", "superseded", "refused"}) applies.Add({{"outcome", o}});
  }
  Family<Counter>& applies;
  Counter& drift_scans;
  Counter& drift_found;
  Counter& drift_repaired;
  Counter& drift_repair_failed;
  Gauge& last_reconcile;
  Counter& heartbeats_sent;
  Counter& heartbeats_failed;
  Gauge& owned;
  Gauge& applied_revision;
};

HostMetrics::HostMetrics(std::string textfile)
    : textfile_(std::move(textfile)),
      registry_(std::make_shared<prometheus::Registry>()),
      f_(std::make_unique<Families>(*registry_)) {}

HostMetrics::~HostMetrics() = default;

void HostMetrics::apply_done(std::string_view outcome, std::uint64_t revision, std::size_t owned) noexcept {
  if (!enabled()) return;
  try {
    f_->applies.Add({{"outcome", std::string(outcome)}}).Increment();
    f_->owned.Set(static_cast<double>(owned));
    if (outcome == "applied") f_->applied_revision.Set(static_cast<double>(revision));
    // A refused declaration message was never applied: no reconcile happened.
    if (outcome != "refused") f_->last_reconcile.Set(static_cast<double>(common::now_ms()) / 1000.0);
  } catch (...) {
  }
  write();
}

void HostMetrics::drift_scanned(const std::vector<engine::DriftItem>& items) noexcept {
  if (!enabled()) return;
  f_->drift_scans.Increment();
  for (const auto& i : items) {
    f_->drift_found.Increment();
    if (i.action == "repaired")
      f_->drift_repaired.Increment();
    else if (i.action.rfind("repair failed", 0) == 0)
      f_->drift_repair_failed.Increment();
  }
  f_->last_reconcile.Set(static_cast<double>(common::now_ms()) / 1000.0);
  write();
}

void HostMetrics::heartbeat(bool sent) noexcept {
  if (!enabled()) return;
  (sent ? f_->heartbeats_sent : f_->heartbeats_failed).Increment();
  write();
}

void HostMetrics::started(std::uint64_t applied_revision, std::size_t owned) noexcept {
  if (!enabled()) return;
  f_->applied_revision.Set(static_cast<double>(applied_revision));
  f_->owned.Set(static_cast<double>(owned));
  write();
}

std::string HostMetrics::text() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

void HostMetrics::write() noexcept {
  try {
    // One writer at a time, so that the last write holds the newest figures.
    std::lock_guard lock(write_mu_);
    if (auto ok = common::write_file_atomic(textfile_, text(), 0644); !ok)
      if (std::uint64_t hidden = 0; log_.take(&hidden))
        common::logger()->warn("metrics textfile not written (metrics.textfile): {}{}", ok.error().describe(),
                               common::LogBudget::suffix(hidden));
  } catch (const std::exception& e) {
    common::logger()->warn("metrics textfile not written (metrics.textfile): {}", e.what());
  }
}

}  // namespace mesh::host
