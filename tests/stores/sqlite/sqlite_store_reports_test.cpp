// The sqlite store: apply reports, recovery copies, drift reports and heartbeats.
#include "store_fixture.h"

namespace mesh::stores::sqlite::testing {
namespace {

using sdk::ErrorCode;

// --- apply reports -----------------------------------------------------------------------------

using SqliteStoreApplyTest = SqliteStoreReportsFixture;

TEST_F(SqliteStoreApplyTest, AppliedReportUpdatesNodeAndRecoveryCopy) {
  auto r = store_->record_apply(report("web-01", 1, "applied", 5000, {"pkg:nginx", "file:/b"}));
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_TRUE(*r);
  const auto n = node();
  EXPECT_EQ(n.applied_revision, 1u);
  EXPECT_EQ(n.last_outcome, "applied");
  EXPECT_EQ(n.last_contact_ms, 5000);
  EXPECT_EQ(owned(), (std::vector<std::string>{"file:/b", "pkg:nginx"}));  // sorted
}

// read_many: one read transaction — a snapshot that a write by another connection during the
// reads does not change — in which a write through the view is refused and nothing is written.
TEST_F(SqliteStoreApplyTest, ReadManyReadsOneSnapshotAndRefusesAWriteThroughItsView) {
  auto other = opened();  // a second store on the same file: another control plane
  ASSERT_TRUE(other);
  auto many = store_->read_many([&](sdk::Store& view) -> sdk::Result<void> {
    auto before = view.apply_report("web-01", 1);
    EXPECT_TRUE(before && !*before);
    // The other instance records a report meanwhile: not seen inside this snapshot.
    auto r = other->record_apply(report("web-01", 1, "applied", 5000, {"file:/a"}));
    EXPECT_TRUE(r && *r) << (r ? "" : r.error().describe());
    auto again = view.apply_report("web-01", 1);
    EXPECT_TRUE(again && !*again) << "the snapshot of read_many";
    EXPECT_EQ(view.node("web-01")->applied_revision, 0u);
    // A write through the view: refused, nothing written.
    auto w = view.record_apply(report("web-01", 2, "applied", 5100));
    EXPECT_FALSE(w);
    if (!w) {
      EXPECT_EQ(w.error().code, ErrorCode::FailedPrecondition) << w.error().describe();
    }
    // read_many inside read_many joins it.
    EXPECT_TRUE(view.read_many([&](sdk::Store& inner) -> sdk::Result<void> {
      auto n = inner.apply_report("web-01", 1);
      EXPECT_TRUE(n && !*n);
      return {};
    }));
    return {};
  });
  ASSERT_TRUE(many) << many.error().describe();
  // After it: the other instance's report is seen, the refused write is not there.
  auto seen = store_->apply_report("web-01", 1);
  ASSERT_TRUE(seen && *seen);
  EXPECT_EQ((*seen)->outcome, "applied");
  auto none = store_->apply_report("web-01", 2);
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  // And the store writes again.
  auto r = store_->record_apply(report("web-01", 2, "applied", 5200));
  ASSERT_TRUE(r && *r) << (r ? "" : r.error().describe());
}

TEST_F(SqliteStoreApplyTest, RecordingTheSamePairTwiceKeepsTheFirst) {
  ASSERT_TRUE(store_->record_apply(report("web-01", 2, "applied", 5000, {"file:/a"})));
  auto again = store_->record_apply(report("web-01", 2, "failed", 9000, {"file:/z"}));
  ASSERT_TRUE(again) << again.error().describe();
  EXPECT_FALSE(*again);
  const auto n = node();
  EXPECT_EQ(n.last_outcome, "applied");
  EXPECT_EQ(n.applied_revision, 2u);
  EXPECT_EQ(n.last_contact_ms, 5000);  // the duplicate changed nothing, not even contact
  EXPECT_EQ(owned(), std::vector<std::string>{"file:/a"});
  auto stored = store_->apply_report("web-01", 2);
  ASSERT_TRUE(stored && *stored);
  EXPECT_EQ((*stored)->outcome, "applied");
  EXPECT_EQ((*stored)->at_ms, 5000);
  EXPECT_EQ((*stored)->owned, std::vector<std::string>{"file:/a"});
}

TEST_F(SqliteStoreApplyTest, LateOlderReportDoesNotOverwriteNewerOutcome) {
  ASSERT_TRUE(store_->record_apply(report("web-01", 3, "failed", 7000)));
  // Revision 2's report, re-sent after a broker outage, arrives last.
  auto late = store_->record_apply(report("web-01", 2, "applied", 6000, {"file:/a"}));
  ASSERT_TRUE(late);
  EXPECT_TRUE(*late);
  const auto n = node();
  EXPECT_EQ(n.last_outcome, "failed");
  EXPECT_EQ(n.applied_revision, 2u);
  EXPECT_EQ(n.last_contact_ms, 7000);  // contact only moves forward
  // Revision 2 is the newest applied one: its list is the recovery copy.
  EXPECT_EQ(owned(), std::vector<std::string>{"file:/a"});
}

TEST_F(SqliteStoreApplyTest, AppliedRevisionOnlyMovesUpAndOlderListIsNotTheRecoveryCopy) {
  ASSERT_TRUE(store_->record_apply(report("web-01", 3, "applied", 7000, {"file:/new"})));
  ASSERT_TRUE(store_->record_apply(report("web-01", 2, "applied", 6000, {"file:/old"})));
  const auto n = node();
  EXPECT_EQ(n.applied_revision, 3u);
  EXPECT_EQ(n.last_outcome, "applied");
  EXPECT_EQ(owned(), std::vector<std::string>{"file:/new"});
}

TEST_F(SqliteStoreApplyTest, FailedAndRefusedReportsKeepRecoveryCopy) {
  ASSERT_TRUE(store_->record_apply(report("web-01", 1, "applied", 5000, {"file:/a"})));
  ASSERT_TRUE(store_->record_apply(report("web-01", 2, "failed", 6000, {"file:/b"})));
  EXPECT_EQ(node().last_outcome, "failed");
  ASSERT_TRUE(store_->record_apply(report("web-01", 3, "refused", 7000)));
  const auto n = node();
  EXPECT_EQ(n.last_outcome, "refused");
  EXPECT_EQ(n.applied_revision, 1u);
  EXPECT_EQ(owned(), std::vector<std::string>{"file:/a"});
}

TEST_F(SqliteStoreApplyTest, ARefusalGivesWayToTheAppliedReportOfTheSameRevision) {
  // Someone on the broker sent the genuine body without its signature: the host refused that
  // copy (recorded first), then received the signed original and applied it.
  ASSERT_TRUE(store_->record_apply(report("web-01", 1, "applied", 5000, {"file:/a"})));
  ASSERT_TRUE(store_->record_apply(report("web-01", 2, "refused", 6000)));
  EXPECT_EQ(node().last_outcome, "refused");
  auto again = store_->record_apply(report("web-01", 2, "refused", 6001));
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again) << "a second refusal of the same revision changes nothing";
  auto applied = store_->record_apply(report("web-01", 2, "applied", 6500, {"file:/a", "file:/b"}));
  ASSERT_TRUE(applied) << applied.error().describe();
  EXPECT_TRUE(*applied);
  const auto n = node();
  EXPECT_EQ(n.last_outcome, "applied");
  EXPECT_EQ(n.applied_revision, 2u);
  EXPECT_EQ(owned(), (std::vector<std::string>{"file:/a", "file:/b"}));
  auto one = store_->apply_report("web-01", 2);
  ASSERT_TRUE(one && *one);
  EXPECT_EQ((*one)->outcome, "applied");
  EXPECT_EQ((*one)->owned, (std::vector<std::string>{"file:/a", "file:/b"}));
  // And an applied record never gives way to anything.
  auto late = store_->record_apply(report("web-01", 2, "refused", 7000));
  ASSERT_TRUE(late);
  EXPECT_FALSE(*late);
  auto failed = store_->record_apply(report("web-01", 2, "failed", 7000));
  ASSERT_TRUE(failed);
  EXPECT_FALSE(*failed);
  EXPECT_EQ(node().last_outcome, "applied");
}

TEST_F(SqliteStoreApplyTest, AppliedWithNothingOwnedEmptiesRecoveryCopy) {
  ASSERT_TRUE(store_->record_apply(report("web-01", 1, "applied", 5000, {"file:/a"})));
  ASSERT_TRUE(store_->record_apply(report("web-01", 2, "applied", 6000, {})));
  EXPECT_TRUE(owned().empty());
}

TEST_F(SqliteStoreApplyTest, ReportsRoundTripNewestFirst) {
  auto failed = report("web-01", 2, "failed", 6000, {"file:/z", "file:/a", "file:/z"});
  ASSERT_TRUE(store_->record_apply(report("web-01", 1, "applied", 5000, {"file:/a"})));
  ASSERT_TRUE(store_->record_apply(failed));
  ASSERT_TRUE(store_->record_apply(report("web-01", 3, "applied", 7000)));
  auto one = store_->apply_report("web-01", 2);
  ASSERT_TRUE(one && *one);
  EXPECT_EQ((*one)->node, "web-01");
  EXPECT_EQ((*one)->revision, 2u);
  EXPECT_EQ((*one)->outcome, "failed");
  EXPECT_EQ((*one)->resource, "file:/etc/motd");
  EXPECT_EQ((*one)->reason, "permission denied");
  EXPECT_EQ((*one)->owned, failed.owned);  // as reported, order kept
  auto none = store_->apply_report("web-01", 9);
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  auto list = store_->apply_reports("web-01", 2);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].revision, 3u);
  EXPECT_EQ((*list)[1].revision, 2u);
  EXPECT_EQ((*list)[1].owned, failed.owned);
}

// #12.4: the failure's ErrorCode name is stored with the report and read back.
TEST_F(SqliteStoreApplyTest, AReportKeepsItsErrorCode) {
  auto failed = report("web-01", 2, "failed", 6000);
  failed.code = "permission_denied";
  ASSERT_TRUE(store_->record_apply(failed));
  ASSERT_TRUE(store_->record_apply(report("web-01", 3, "applied", 7000)));
  auto one = store_->apply_report("web-01", 2);
  ASSERT_TRUE(one && *one);
  EXPECT_EQ((*one)->code, "permission_denied");
  auto list = store_->apply_reports("web-01", 2);
  ASSERT_TRUE(list && list->size() == 2u);
  EXPECT_EQ((*list)[0].code, "");  // applied: none
  EXPECT_EQ((*list)[1].code, "permission_denied");
  auto long_code = report("web-01", 1, "failed", 5000);
  long_code.code = std::string(65, 'x');
  auto refused = store_->record_apply(long_code);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(refused.error().message.find("code"), std::string::npos) << refused.error().message;
}

TEST_F(SqliteStoreApplyTest, UnknownNodeIsNotFoundAndBadReportsAreInvalid) {
  auto r = store_->record_apply(report("ghost", 1, "applied", 1));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::NotFound);
  EXPECT_NE(r.error().message.find("ghost"), std::string::npos);
  EXPECT_NE(r.error().message.find("revision 1"), std::string::npos);
  auto bad = store_->record_apply(report("web-01", 1, "sort of", 1));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::InvalidArgument);
  auto zero = store_->record_apply(report("web-01", 0, "applied", 1));
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().code, ErrorCode::InvalidArgument);
  auto lookup = store_->apply_report("ghost", 1);
  ASSERT_FALSE(lookup);
  EXPECT_EQ(lookup.error().code, ErrorCode::NotFound);
  auto o = store_->owned("ghost");
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error().code, ErrorCode::NotFound);
}

// --- heartbeats ----------------------------------------------------------------------------------

using SqliteStoreTouchTest = SqliteStoreReportsFixture;

TEST_F(SqliteStoreTouchTest, ContactMovesForwardOnlyAndUnknownNodesAreSkipped) {
  enrol(*store_, "web-02");
  auto r = store_->touch({{"web-01", 5000, 99, "0.2.0", "applying"},
                          {"ghost", 6000, 0, "x", "idle"},
                          {"web-02", 4000, 0, "0.1.0", "idle"}});
  ASSERT_TRUE(r) << r.error().describe();
  auto n = node();
  EXPECT_EQ(n.last_contact_ms, 5000);
  EXPECT_EQ(n.host_version, "0.2.0");
  EXPECT_EQ(n.host_state, "applying");
  EXPECT_EQ(n.applied_revision, 0u);  // heartbeats do not set applied_revision
  auto ghost = store_->node("ghost");
  ASSERT_FALSE(ghost);
  EXPECT_EQ(ghost.error().code, ErrorCode::NotFound);

  // An older heartbeat (delivered late) changes nothing.
  ASSERT_TRUE(store_->touch({{"web-01", 4500, 0, "0.1.0", "failed"}}));
  n = node();
  EXPECT_EQ(n.last_contact_ms, 5000);
  EXPECT_EQ(n.host_version, "0.2.0");
  EXPECT_EQ(n.host_state, "applying");

  // A newer one in a batch with an older one for the same node: the newer wins.
  ASSERT_TRUE(store_->touch(
      {{"web-01", 8000, 0, "0.3.0", "idle"}, {"web-01", 7000, 0, "0.2.5", "failed"}}));
  n = node();
  EXPECT_EQ(n.last_contact_ms, 8000);
  EXPECT_EQ(n.host_version, "0.3.0");
  EXPECT_EQ(n.host_state, "idle");
  ASSERT_TRUE(store_->touch({}));
}

TEST_F(SqliteStoreTouchTest, ReportContactDoesNotHideANewerHeartbeatState) {
  ASSERT_TRUE(store_->record_apply(report("web-01", 1, "applied", 9000)));
  ASSERT_TRUE(store_->touch({{"web-01", 8000, 0, "0.2.0", "idle"}}));
  const auto n = node();
  EXPECT_EQ(n.last_contact_ms, 9000);
  EXPECT_EQ(n.host_version, "0.2.0");  // the first heartbeat still sets the host fields
  EXPECT_EQ(n.host_state, "idle");
}

TEST_F(SqliteStoreTouchTest, LargeBatchIsOneTransaction) {
  std::vector<sdk::ContactUpdate> batch;
  for (int i = 0; i < 1000; ++i) batch.push_back({"web-01", 10'000 + i, 0, "0.1.0", "idle"});
  ASSERT_TRUE(store_->touch(batch));
  EXPECT_EQ(node().last_contact_ms, 10'999);
}

// --- drift
// -----------------------------------------------------------------------------------------

using SqliteStoreDriftTest = SqliteStoreReportsFixture;

TEST_F(SqliteStoreDriftTest, RecordsIdempotentlyAndFindsNewest) {
  sdk::DriftReport with{"web-01",
                        "scan-1",
                        3,
                        5000,
                        {{"file:/etc/motd", "properties.content differs", "repaired"},
                         {"service:nginx", "not running", "repair failed: unit exited"}},
                        5000};
  sdk::DriftReport clean{"web-01", "scan-2", 3, 6000, {}, 6000};
  auto r = store_->record_drift(with);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_TRUE(*r);
  ASSERT_TRUE(store_->record_drift(clean));
  EXPECT_EQ(node().last_contact_ms, 6000);

  auto dup = store_->record_drift(sdk::DriftReport{"web-01", "scan-1", 3, 9000, {}, 9000});
  ASSERT_TRUE(dup);
  EXPECT_FALSE(*dup);
  EXPECT_EQ(node().last_contact_ms, 6000);

  auto any = store_->last_drift("web-01", false);
  ASSERT_TRUE(any && *any);
  EXPECT_EQ((*any)->scan_id, "scan-2");
  EXPECT_TRUE((*any)->items.empty());
  auto items = store_->last_drift("web-01", true);
  ASSERT_TRUE(items && *items);
  EXPECT_EQ((*items)->scan_id, "scan-1");
  EXPECT_EQ((*items)->node, "web-01");
  EXPECT_EQ((*items)->revision, 3u);
  EXPECT_EQ((*items)->at_ms, 5000);
  ASSERT_EQ((*items)->items.size(), 2u);
  EXPECT_EQ((*items)->items[0].resource, "file:/etc/motd");
  EXPECT_EQ((*items)->items[0].found, "properties.content differs");
  EXPECT_EQ((*items)->items[0].action, "repaired");
  EXPECT_EQ((*items)->items[1].action, "repair failed: unit exited");

  // A late, older scan is not "newest".
  ASSERT_TRUE(store_->record_drift(
      sdk::DriftReport{"web-01", "scan-0", 2, 4000, {{"file:/x", "missing", "repaired"}}}));
  any = store_->last_drift("web-01", false);
  ASSERT_TRUE(any && *any);
  EXPECT_EQ((*any)->scan_id, "scan-2");
  items = store_->last_drift("web-01", true);
  ASSERT_TRUE(items && *items);
  EXPECT_EQ((*items)->scan_id, "scan-1");
}

TEST_F(SqliteStoreDriftTest, KeepsTheNewestReportsAndTheNewestThatFoundDrift) {
  // A store that keeps 3 drift reports per node.
  sdk::Value cfg = config(db_path());
  cfg.set("drift_reports_kept", std::int64_t{3});
  store_.reset();
  auto store = std::make_unique<SqliteStore>(host_);
  ASSERT_TRUE(store->configure(cfg));
  ASSERT_TRUE(store->open());
  store_ = std::move(store);

  ASSERT_TRUE(store_->record_drift(
      sdk::DriftReport{"web-01", "scan-drifted", 3, 1000, {{"file:/x", "missing", "repaired"}}}));
  for (int i = 1; i <= 10; ++i)
    ASSERT_TRUE(store_->record_drift(sdk::DriftReport{"web-01", "clean-" + std::to_string(i), 3, 1000 + i * 100, {}}));
  RawDb raw(db_path());
  // The 3 newest clean scans and the newest that found drift; its items are still there.
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM drift_reports WHERE node = 'web-01'"), "4");
  EXPECT_EQ(raw.scalar("SELECT group_concat(scan_id) FROM (SELECT scan_id FROM drift_reports "
                       "ORDER BY at_ms)"),
            "scan-drifted,clean-8,clean-9,clean-10");
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM drift_items"), "1");
  auto items = store_->last_drift("web-01", true);
  ASSERT_TRUE(items && *items);
  EXPECT_EQ((*items)->scan_id, "scan-drifted");

  // A newer scan that found drift replaces the old one as "last drift"; the old one then goes.
  ASSERT_TRUE(store_->record_drift(
      sdk::DriftReport{"web-01", "scan-drifted-2", 3, 5000, {{"file:/y", "mode 0600", "repaired"}}}));
  EXPECT_EQ(raw.scalar("SELECT group_concat(scan_id) FROM (SELECT scan_id FROM drift_reports "
                       "ORDER BY at_ms)"),
            "clean-9,clean-10,scan-drifted-2");
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM drift_items"), "1");

  // A late re-send of a pruned, older report is acknowledged but not kept.
  auto late = store_->record_drift(sdk::DriftReport{"web-01", "clean-1", 3, 1100, {}});
  ASSERT_TRUE(late) << late.error().describe();
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM drift_reports WHERE node = 'web-01'"), "3");
}

TEST_F(SqliteStoreDriftTest, DriftReportsKeptIsChecked) {
  for (std::int64_t bad : {0, -1, 1'000'001}) {
    sdk::Value cfg = config(db_path());
    cfg.set("drift_reports_kept", bad);
    SqliteStore store{host_};
    auto r = store.configure(cfg);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().path, "drift_reports_kept");
  }
}

TEST_F(SqliteStoreDriftTest, NoneYetAndUnknownNode) {
  auto none = store_->last_drift("web-01", false);
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  ASSERT_TRUE(store_->record_drift(sdk::DriftReport{"web-01", "s", 1, 1, {}}));
  auto no_items = store_->last_drift("web-01", true);
  ASSERT_TRUE(no_items);
  EXPECT_FALSE(*no_items);
  auto r = store_->record_drift(sdk::DriftReport{"ghost", "s", 1, 1, {}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::NotFound);
  EXPECT_NE(r.error().message.find("ghost"), std::string::npos);
  auto l = store_->last_drift("ghost", false);
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().code, ErrorCode::NotFound);
  auto empty = store_->record_drift(sdk::DriftReport{"web-01", "", 1, 1, {}});
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, ErrorCode::InvalidArgument);
}

}  // namespace
}  // namespace mesh::stores::sqlite::testing
