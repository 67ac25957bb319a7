// Metrics, in one process (decision records 93 and 94): the labels of refusals, the counters and
// the in-flight gauge, the store decorator over the real sqlite store plugin, the fleet figures
// read from it, and the host's textfile written atomically. Serialised with prometheus-cpp's
// TextSerializer, as /metrics and the textfile are.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "mesh/common/clock.h"
#include "mesh/common/trust.h"
#include "mesh/testing/plugins.h"
#include "mesh/testing/temp_dir.h"
#include "metrics.h"  // core/control/src
#include "../../core/host/src/metrics.h"

namespace mesh {
namespace {

namespace fs = std::filesystem;
using control::detail::ControlMetrics;
using sdk::ErrorCode;

std::string serialised(const std::vector<prometheus::MetricFamily>& families) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

bool has(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

TEST(MetricsLabelsTest, KindsAndReasonsAreABoundedSet) {
  using control::detail::metric_kind;
  using control::detail::refusal_reason;
  EXPECT_EQ(metric_kind("mesh.heartbeat.web-1"), "heartbeat");
  EXPECT_EQ(metric_kind("mesh.report.web-1"), "report");
  EXPECT_EQ(metric_kind("mesh.drift.web-1"), "drift");
  EXPECT_EQ(metric_kind("mesh.enrol"), "enrol");
  EXPECT_EQ(metric_kind("mesh.api.nodes"), "api");
  EXPECT_EQ(metric_kind("mesh.latest.web-1"), "node_request");
  EXPECT_EQ(metric_kind("anything.else"), "other");
  EXPECT_EQ(refusal_reason({ErrorCode::PermissionDenied, "heartbeat replayed", trust::kHeaderTimestamp}), "stale");
  EXPECT_EQ(refusal_reason({ErrorCode::PermissionDenied, "MAC does not verify", {}}), "permission_denied");
  EXPECT_EQ(refusal_reason({ErrorCode::Transient, "the control plane is busy (heartbeat queue full)", {}}), "busy");
  EXPECT_EQ(refusal_reason({ErrorCode::Transient, "try again", {}}), "transient");
  EXPECT_EQ(refusal_reason({ErrorCode::InvalidArgument, "node web-9 is a name from the body", "node"}),
            "invalid_argument");
}

TEST(ControlMetricsTest, RefusalsIntakeAndPushesAreCounted) {
  ControlMetrics m;
  m.refused("mesh.heartbeat.a", {ErrorCode::PermissionDenied, "expired", trust::kHeaderTimestamp});
  m.refused("mesh.heartbeat.a", {ErrorCode::PermissionDenied, "expired", trust::kHeaderTimestamp});
  m.rate_limited("mesh.heartbeat.b");
  m.refused("mesh.drift.a", {ErrorCode::InvalidArgument, "bad", "items"});
  m.refused("mesh.api.deploy", {ErrorCode::NotFound, "no module", "module"});
  m.heartbeat_ingested();
  m.report_ingested("mesh.report.a", true);
  m.report_ingested("mesh.report.a", false);
  std::string text;
  {
    ControlMetrics::Push published(&m);
    ControlMetrics::Push lost(&m);
    text = serialised(m.registry()->Collect());
    EXPECT_TRUE(has(text, "mesh_control_pushes_in_flight 2")) << text;
    published.done(true);
  }
  ControlMetrics::Push off(nullptr);  // no metrics: nothing to count, nothing to crash
  off.done(true);
  text = serialised(m.registry()->Collect());
  EXPECT_TRUE(has(text, "mesh_control_heartbeats_refused_total{reason=\"stale\"} 2")) << text;
  EXPECT_TRUE(has(text, "mesh_control_heartbeats_refused_total{reason=\"rate_limited\"} 1")) << text;
  EXPECT_TRUE(has(text, "mesh_control_heartbeats_refused_total{reason=\"busy\"} 0")) << text;
  EXPECT_TRUE(has(text, "mesh_control_reports_refused_total{kind=\"drift\",reason=\"invalid_argument\"} 1")) << text;
  EXPECT_TRUE(has(text, "mesh_control_messages_refused_total{kind=\"api\",reason=\"not_found\"} 1")) << text;
  EXPECT_TRUE(has(text, "mesh_control_heartbeats_ingested_total 1")) << text;
  EXPECT_TRUE(has(text, "mesh_control_reports_ingested_total{kind=\"report\",recorded=\"true\"} 1")) << text;
  EXPECT_TRUE(has(text, "mesh_control_reports_ingested_total{kind=\"report\",recorded=\"false\"} 1")) << text;
  EXPECT_TRUE(has(text, "mesh_control_pushes_in_flight 0")) << text;
  EXPECT_TRUE(has(text, "mesh_control_pushes_total{outcome=\"published\"} 1")) << text;
  EXPECT_TRUE(has(text, "mesh_control_pushes_total{outcome=\"failed\"} 1")) << text;  // destroyed without done()
}

class MeasuredStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = testing::load_plugin("store", "sqlite");
    ASSERT_TRUE(p) << p.error().message;
    plugin_ = std::move(*p);
    inner_ = plugin_.as<sdk::Store>();
    ASSERT_TRUE(inner_);
    sdk::Value cfg = sdk::Value::object();
    cfg.set("path", (tmp_.path() / "mesh.db").string());
    ASSERT_TRUE(inner_->configure(sdk::apply_defaults(inner_->config_schema(), cfg)));
    ASSERT_TRUE(inner_->open());
    metrics_ = std::make_shared<ControlMetrics>();
    store_ = control::detail::measured_store(inner_, metrics_);
  }
  void TearDown() override {
    store_.reset();
    inner_.reset();
  }

  // Enrols `node` through the decorated store.
  void enrol(const std::string& node) {
    sdk::TokenRecord t;
    t.id = "id-" + node;
    t.node = node;
    t.hash = "hash-" + node;
    t.created_at_ms = common::now_ms();
    t.expires_at_ms = t.created_at_ms + 3'600'000;
    ASSERT_TRUE(store_->add_token(t));
    auto e = store_->enrol(t.hash, node, std::string(64, 'a'), common::now_ms());
    ASSERT_TRUE(e) << e.error().message;
  }

  std::string fleet_text() { return serialised(ControlMetrics::fleet_collector(inner_)->Collect()); }

  testing::TempDir tmp_;
  loader::LoadedPlugin plugin_;
  std::shared_ptr<sdk::Store> inner_;
  std::shared_ptr<ControlMetrics> metrics_;
  std::shared_ptr<sdk::Store> store_;
};

TEST_F(MeasuredStoreTest, EveryCallIsForwardedAndTimedAndErrorsCounted) {
  enrol("web-1");
  auto nodes = store_->nodes();
  ASSERT_TRUE(nodes);
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ(nodes->front().name, "web-1");
  auto missing = store_->node("web-9");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::NotFound);  // the inner store's answer, unchanged
  auto seq = store_->next_sequence("deploy");           // a method with a default in sdk::Store
  ASSERT_TRUE(seq) << seq.error().message;
  EXPECT_EQ(*seq, 1u);
  const std::string text = serialised(metrics_->registry()->Collect());
  EXPECT_TRUE(has(text, "mesh_control_store_duration_seconds_count{operation=\"nodes\"} 1")) << text;
  EXPECT_TRUE(has(text, "mesh_control_store_duration_seconds_count{operation=\"enrol\"} 1")) << text;
  EXPECT_TRUE(has(text, "mesh_control_store_duration_seconds_count{operation=\"next_sequence\"} 1")) << text;
  EXPECT_TRUE(has(text, "mesh_control_store_errors_total{operation=\"node\"} 1")) << text;
  EXPECT_TRUE(has(text, "mesh_control_store_errors_total{operation=\"nodes\"} 0")) << text;
  EXPECT_TRUE(has(text, "mesh_control_store_duration_seconds_bucket{operation=\"nodes\",le=\"+Inf\"} 1")) << text;
}

TEST_F(MeasuredStoreTest, FleetFiguresFollowContactAndDeliveries) {
  enrol("web-1");
  enrol("web-2");
  std::string text = fleet_text();
  EXPECT_TRUE(has(text, "mesh_control_nodes{age=\"never\"} 2")) << text;
  EXPECT_TRUE(has(text, "mesh_control_deliveries{state=\"none\"} 2")) << text;
  EXPECT_TRUE(has(text, "mesh_control_fleet_read_ok 1")) << text;

  // web-1 heard from now, web-2 two hours ago; a revision declared to web-1, none reported.
  const std::int64_t now = common::now_ms();
  sdk::ContactUpdate a;
  a.node = "web-1";
  a.at_ms = now;
  sdk::ContactUpdate b;
  b.node = "web-2";
  b.at_ms = now - 2 * 3'600'000;
  ASSERT_TRUE(store_->touch({a, b}));
  sdk::DeclarationWrite w;
  w.node = "web-1";
  w.render = [](std::uint64_t revision) { return "{\"revision\":" + std::to_string(revision) + ",\"resources\":[]}"; };
  auto d = store_->declare({w}, now, 50);
  ASSERT_TRUE(d) << d.error().message;
  text = fleet_text();
  EXPECT_TRUE(has(text, "mesh_control_nodes{age=\"under_1m\"} 1")) << text;
  EXPECT_TRUE(has(text, "mesh_control_nodes{age=\"1h_to_1d\"} 1")) << text;
  EXPECT_TRUE(has(text, "mesh_control_nodes{age=\"never\"} 0")) << text;
  EXPECT_TRUE(has(text, "mesh_control_deliveries{state=\"outstanding\"} 1")) << text;
  EXPECT_TRUE(has(text, "mesh_control_deliveries{state=\"none\"} 1")) << text;

  // Its report says failed: the node moves from outstanding to failed.
  sdk::ApplyReport r;
  r.node = "web-1";
  r.revision = 1;
  r.outcome = "failed";
  r.at_ms = now;
  r.received_at_ms = now;
  auto recorded = store_->record_apply(r);
  ASSERT_TRUE(recorded) << recorded.error().message;
  text = fleet_text();
  EXPECT_TRUE(has(text, "mesh_control_deliveries{state=\"failed\"} 1")) << text;
  EXPECT_TRUE(has(text, "mesh_control_deliveries{state=\"outstanding\"} 0")) << text;
}

TEST(HostMetricsTest, TheTextfileIsWrittenWholeAndAtomically) {
  testing::TempDir tmp;
  const fs::path file = tmp.path() / "mesh.prom";
  host::HostMetrics m(file.string());
  ASSERT_TRUE(m.enabled());
  m.started(0, 0);
  m.apply_done("applied", 3, 2);
  m.apply_done("failed", 4, 2);
  m.drift_scanned({{"file:/etc/a", "missing", "repaired"}, {"file:/etc/b", "mode differs", "repair failed: EPERM"}});
  m.heartbeat(true);
  m.heartbeat(false);
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, m.text());
  EXPECT_TRUE(has(text, "mesh_host_applies_total{outcome=\"applied\"} 1")) << text;
  EXPECT_TRUE(has(text, "mesh_host_applies_total{outcome=\"failed\"} 1")) << text;
  EXPECT_TRUE(has(text, "mesh_host_applies_total{outcome=\"refused\"} 0")) << text;
  EXPECT_TRUE(has(text, "mesh_host_applied_revision 3")) << text;  // a failed revision is not applied
  EXPECT_TRUE(has(text, "mesh_host_resources_owned 2")) << text;
  EXPECT_TRUE(has(text, "mesh_host_drift_scans_total 1")) << text;
  EXPECT_TRUE(has(text, "mesh_host_drift_found_total 2")) << text;
  EXPECT_TRUE(has(text, "mesh_host_drift_repaired_total 1")) << text;
  EXPECT_TRUE(has(text, "mesh_host_drift_repair_failed_total 1")) << text;
  EXPECT_TRUE(has(text, "mesh_host_heartbeats_sent_total 1")) << text;
  EXPECT_TRUE(has(text, "mesh_host_heartbeats_failed_total 1")) << text;
  EXPECT_EQ(text.find("mesh_host_last_reconcile_timestamp_seconds 0\n"), std::string::npos) << text;
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.path())) ++entries;
  EXPECT_EQ(entries, 1u) << "a temp file left beside the textfile";
}

TEST(HostMetricsTest, AFailedWriteNeverStopsTheHostAndNoPathMeansNothingWritten) {
  testing::TempDir tmp;
  host::HostMetrics gone((tmp.path() / "removed" / "mesh.prom").string());
  gone.heartbeat(true);  // logged, not thrown
  EXPECT_FALSE(fs::exists(tmp.path() / "removed"));
  host::HostMetrics off("");
  EXPECT_FALSE(off.enabled());
  off.apply_done("applied", 1, 1);
  off.heartbeat(true);
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.path())) ++entries;
  EXPECT_EQ(entries, 0u);
}

}  // namespace
}  // namespace mesh
