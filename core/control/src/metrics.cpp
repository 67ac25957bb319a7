// The control plane's metrics (metrics.h, decision record 93, docs/metrics.md).
#include "metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <spdlog/spdlog.h>

#include <array>
#include <mutex>

#include "mesh/common/clock.h"
#include "mesh/common/logging.h"
#include "mesh/common/trust.h"
#include "node_facts.h"

namespace mesh::control::detail {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// Store latency buckets, in seconds: 50 µs to 10 s (an SQLite read is tens of µs; a write with
// fsync a few ms; a replicated JetStream write tens of ms).
const Histogram::BucketBoundaries& store_buckets() {
  static const Histogram::BucketBoundaries b{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                             0.01,    0.025,  0.05,    0.1,    0.25,   0.5,    1,
                                             2.5,     5,      10};
  return b;
}

// Last-contact age buckets (label `age`): upper bounds in seconds, then "over_1d" and "never".
struct AgeBucket {
  const char* name;
  std::int64_t below_s;
};
constexpr std::array<AgeBucket, 4> kAgeBuckets{{{"under_1m", 60}, {"1m_to_5m", 300}, {"5m_to_1h", 3600},
                                                {"1h_to_1d", 86400}}};
constexpr const char* kAgeOver = "over_1d";
constexpr const char* kAgeNever = "never";

// Delivery states of a node's newest revision (label `state`).
constexpr std::array<const char*, 6> kDeliveryStates{"none", "applied", "failed", "refused", "superseded",
                                                     "outstanding"};

// The fleet figures, read from the store at each scrape into gauges of a registry of its own.
class FleetCollector final : public prometheus::Collectable {
 public:
  explicit FleetCollector(std::shared_ptr<sdk::Store> store)
      : store_(std::move(store)),
        registry_(std::make_shared<prometheus::Registry>()),
        nodes_(BuildGauge()
                   .Name("mesh_control_nodes")
                   .Help("Enrolled nodes by the age of their last contact (heartbeat, report or briefing) "
                         "at the scrape, by the control plane's clock")
                   .Register(*registry_)),
        deliveries_(BuildGauge()
                        .Name("mesh_control_deliveries")
                        .Help("Enrolled nodes by the state of the delivery of their newest declared revision "
                              "(none: nothing declared; outstanding: no report yet)")
                        .Register(*registry_)),
        read_ok_(BuildGauge()
                     .Name("mesh_control_fleet_read_ok")
                     .Help("1 when the store answered the scrape's reads of the fleet, 0 when it failed (the "
                           "node and delivery gauges then keep the previous scrape's values)")
                     .Register(*registry_)
                     .Add({})) {
    for (const auto& b : kAgeBuckets) age_[b.name] = &nodes_.Add({{"age", b.name}});
    age_[kAgeOver] = &nodes_.Add({{"age", kAgeOver}});
    age_[kAgeNever] = &nodes_.Add({{"age", kAgeNever}});
    for (const char* s : kDeliveryStates) state_[s] = &deliveries_.Add({{"state", s}});
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::lock_guard lock(mu_);
    read_ok_.Set(refresh() ? 1 : 0);
    return registry_->Collect();
  }

 private:
  // One Store::nodes(), and one Store::apply_report() per node whose newest revision is not
  // applied (to tell failed from outstanding). False when the store failed.
  bool refresh() const {
    auto nodes = store_->nodes();
    if (!nodes) {
      if (std::uint64_t hidden = 0; log_.take(&hidden))
        common::logger()->warn("metrics: nodes not read: {}{}", nodes.error().describe(),
                               common::LogBudget::suffix(hidden));
      return false;
    }
    std::map<std::string, double> ages, states;
    const std::int64_t now = common::now_ms();
    for (const auto& n : *nodes) {
      const auto contact = last_contact_ms(n);
      const char* age = kAgeNever;
      if (contact) {
        const std::int64_t s = (now - *contact) / 1000;
        age = kAgeOver;
        for (const auto& b : kAgeBuckets)
          if (s < b.below_s) {
            age = b.name;
            break;
          }
      }
      ++ages[age];
      std::string state = "none";
      if (n.declared_revision > 0 && n.applied_revision >= n.declared_revision) {
        state = "applied";
      } else if (n.declared_revision > 0) {
        auto r = store_->apply_report(n.name, n.declared_revision);
        if (!r) {
          if (std::uint64_t hidden = 0; log_.take(&hidden))
            common::logger()->warn("metrics: report not read node={} revision={}: {}{}", n.name, n.declared_revision,
                                   r.error().describe(), common::LogBudget::suffix(hidden));
          return false;
        }
        state = *r ? (*r)->outcome : "outstanding";
        if (!state_.count(state)) state = "outstanding";  // an outcome the store may add later
      }
      ++states[state];
    }
    for (auto& [name, g] : age_) g->Set(ages[name]);
    for (auto& [name, g] : state_) g->Set(states[name]);
    return true;
  }

  std::shared_ptr<sdk::Store> store_;
  std::shared_ptr<prometheus::Registry> registry_;
  Family<Gauge>& nodes_;
  Family<Gauge>& deliveries_;
  Gauge& read_ok_;
  std::map<std::string, Gauge*> age_, state_;
  mutable std::mutex mu_;  // one scrape at a time (the Exposer may run two)
  mutable common::LogBudget log_{1};
};

}  // namespace

std::string_view metric_kind(std::string_view s) noexcept {
  if (starts_with(s, "mesh.heartbeat.")) return "heartbeat";
  if (starts_with(s, "mesh.report.")) return "report";
  if (starts_with(s, "mesh.drift.")) return "drift";
  if (s == "mesh.enrol") return "enrol";
  if (starts_with(s, "mesh.api.")) return "api";
  if (starts_with(s, "mesh.latest.") || starts_with(s, "mesh.recovery.") || starts_with(s, "mesh.briefing."))
    return "node_request";
  return "other";
}

std::string_view refusal_reason(const sdk::Error& e) noexcept {
  if (e.code == sdk::ErrorCode::PermissionDenied && e.path == trust::kHeaderTimestamp) return "stale";
  if (e.code == sdk::ErrorCode::Transient && e.message.find("busy") != std::string::npos) return "busy";
  return sdk::to_string(e.code);
}

struct ControlMetrics::Families {
  explicit Families(prometheus::Registry& r)
      : hb_ingested(BuildCounter()
                        .Name("mesh_control_heartbeats_ingested_total")
                        .Help("Heartbeats verified and taken as contact (MAC, freshness, fields)")
                        .Register(r)
                        .Add({})),
        hb_refused(BuildCounter()
                       .Name("mesh_control_heartbeats_refused_total")
                       .Help("Heartbeats not taken, by reason (stale: outside the clock tolerance or replayed; "
                             "permission_denied: not enrolled or a bad MAC; busy; rate_limited; ...)")
                       .Register(r)),
        reports_ingested(BuildCounter()
                             .Name("mesh_control_reports_ingested_total")
                             .Help("Apply (kind=report) and drift (kind=drift) reports acknowledged; "
                                   "recorded=false: a re-send that changed nothing")
                             .Register(r)),
        reports_refused(BuildCounter()
                            .Name("mesh_control_reports_refused_total")
                            .Help("Apply and drift reports refused, by kind and reason")
                            .Register(r)),
        messages_refused(BuildCounter()
                             .Name("mesh_control_messages_refused_total")
                             .Help("Other messages refused (enrolment, API, node requests), by kind and reason")
                             .Register(r)),
        pushes_in_flight(BuildGauge()
                             .Name("mesh_control_pushes_in_flight")
                             .Help("Declaration pushes being signed and published right now")
                             .Register(r)
                             .Add({})),
        pushes(BuildCounter()
                   .Name("mesh_control_pushes_total")
                   .Help("Declaration pushes by outcome (failed: the node fetches it when it reconnects)")
                   .Register(r)),
        pushed(pushes.Add({{"outcome", "published"}})),
        push_failed(pushes.Add({{"outcome", "failed"}})),
        store_seconds(BuildHistogram()
                          .Name("mesh_control_store_duration_seconds")
                          .Help("Time taken by store calls, by store operation, in seconds")
                          .Register(r)),
        store_errors(BuildCounter()
                         .Name("mesh_control_store_errors_total")
                         .Help("Store calls that returned an error, by store operation")
                         .Register(r)) {
    // Series that exist from the first scrape (a rate over them is defined at once).
    for (const char* reason : {"stale", "permission_denied", "invalid_argument", "busy", "rate_limited"})
      hb_refused.Add({{"reason", reason}});
    for (const char* kind : {"report", "drift"}) {
      reports_ingested.Add({{"kind", kind}, {"recorded", "true"}});
      reports_ingested.Add({{"kind", kind}, {"recorded", "false"}});
      for (const char* reason : {"permission_denied", "invalid_argument", "unavailable"})
        reports_refused.Add({{"kind", kind}, {"reason", reason}});
    }
  }

  Counter& hb_ingested;
  Family<Counter>& hb_refused;
  Family<Counter>& reports_ingested;
  Family<Counter>& reports_refused;
  Family<Counter>& messages_refused;
  Gauge& pushes_in_flight;
  Family<Counter>& pushes;
  Counter& pushed;
  Counter& push_failed;
  Family<Histogram>& store_seconds;
  Family<Counter>& store_errors;
  // Family::Add is thread-safe and returns the existing series for known labels; this cache
  // spares a lookup by label map on every store call.
  std::mutex store_mu;
  std::map<std::string_view, std::pair<Histogram*, Counter*>> store_series;
};

ControlMetrics::ControlMetrics()
    : registry_(std::make_shared<prometheus::Registry>()), f_(std::make_unique<Families>(*registry_)) {}

ControlMetrics::~ControlMetrics() { stop(); }

void ControlMetrics::refused(std::string_view subject, const sdk::Error& error) noexcept {
  count_refusal(subject, refusal_reason(error));
}

void ControlMetrics::rate_limited(std::string_view subject) noexcept { count_refusal(subject, "rate_limited"); }

void ControlMetrics::count_refusal(std::string_view subject, std::string_view why) noexcept {
  try {
    const std::string kind(metric_kind(subject));
    const std::string reason(why);
    if (kind == "heartbeat")
      f_->hb_refused.Add({{"reason", reason}}).Increment();
    else if (kind == "report" || kind == "drift")
      f_->reports_refused.Add({{"kind", kind}, {"reason", reason}}).Increment();
    else
      f_->messages_refused.Add({{"kind", kind}, {"reason", reason}}).Increment();
  } catch (...) {
  }
}

void ControlMetrics::heartbeat_ingested() noexcept { f_->hb_ingested.Increment(); }

void ControlMetrics::report_ingested(std::string_view subject, bool recorded) noexcept {
  try {
    f_->reports_ingested.Add({{"kind", std::string(metric_kind(subject))}, {"recorded", recorded ? "true" : "false"}})
        .Increment();
  } catch (...) {
  }
}

ControlMetrics::Push::Push(ControlMetrics* metrics) noexcept : metrics_(metrics) {
  if (metrics_) metrics_->f_->pushes_in_flight.Increment();
}

ControlMetrics::Push::~Push() {
  if (!metrics_) return;
  if (!counted_) metrics_->f_->push_failed.Increment();
  metrics_->f_->pushes_in_flight.Decrement();
}

void ControlMetrics::Push::done(bool published) noexcept {
  if (!metrics_ || counted_) return;
  counted_ = true;
  (published ? metrics_->f_->pushed : metrics_->f_->push_failed).Increment();
}

void ControlMetrics::store_call(const char* operation, std::chrono::steady_clock::duration took, bool ok) noexcept {
  try {
    std::pair<Histogram*, Counter*> series;
    {
      std::lock_guard lock(f_->store_mu);
      auto& slot = f_->store_series[operation];
      if (!slot.first)
        slot = {&f_->store_seconds.Add({{"operation", operation}}, store_buckets()),
                &f_->store_errors.Add({{"operation", operation}})};
      series = slot;
    }
    series.first->Observe(std::chrono::duration<double>(took).count());
    if (!ok) series.second->Increment();
  } catch (...) {
  }
}

sdk::Result<void> ControlMetrics::serve(const std::string& listen, std::shared_ptr<sdk::Store> store) {
  try {
    // One thread for each of two concurrent scrapes: Prometheus scrapes one at a time.
    exposer_ = std::make_unique<prometheus::Exposer>(listen, 2);
  } catch (const std::exception& e) {
    // CivetWeb says only "null context when constructing CivetServer" when it cannot bind.
    const std::string why = std::string(e.what()).find("null context") != std::string::npos
                                ? "the address is in use (another mesh-control?) or cannot be bound here"
                                : e.what();
    return sdk::fail(sdk::ErrorCode::Unavailable, "cannot listen on " + listen + ": " + why, "metrics.listen");
  }
  fleet_ = fleet_collector(std::move(store));
  exposer_->RegisterCollectable(registry_);
  exposer_->RegisterCollectable(fleet_);
  return {};
}

int ControlMetrics::port() const noexcept {
  if (!exposer_) return 0;
  auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

void ControlMetrics::stop() noexcept {
  exposer_.reset();
  fleet_.reset();  // lets the store go
}

std::shared_ptr<prometheus::Registry> ControlMetrics::registry() const noexcept { return registry_; }

std::shared_ptr<prometheus::Collectable> ControlMetrics::fleet_collector(std::shared_ptr<sdk::Store> store) {
  return std::make_shared<FleetCollector>(std::move(store));
}

}  // namespace mesh::control::detail
