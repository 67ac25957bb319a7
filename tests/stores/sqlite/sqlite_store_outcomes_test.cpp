// The sqlite store: the delivery outcome state machine (docs/protocol.md, "Delivery outcomes"),
// reports only for declared revisions and from the current identity, receipt-time contact, and
// the recovery copy's digests.
#include "store_fixture.h"

namespace mesh::stores::sqlite::testing {
namespace {

using sdk::ErrorCode;

class SqliteStoreOutcomeTest : public SqliteStoreReportsFixture {
 protected:
  /// The stored outcome of (web-01, revision), "" when none counts.
  std::string outcome(std::uint64_t revision) {
    auto r = store_->apply_report("web-01", revision);
    EXPECT_TRUE(r) << r.error().describe();
    return r && *r ? (*r)->outcome : std::string();
  }
  /// Records and returns whether it was recorded; fails the test on error.
  bool record(const sdk::ApplyReport& r) {
    auto ok = store_->record_apply(r);
    EXPECT_TRUE(ok) << ok.error().describe();
    return ok && *ok;
  }
  void reenrol(const std::string& key = "bb") {
    ASSERT_TRUE(store_->add_token(token("tok-again", "web-01", "again", 1000, 1'000'000, true)));
    auto e = store_->enrol(hash_of("again"), "web-01", key, 3000);
    ASSERT_TRUE(e) << e.error().describe();
  }
};

// --- every transition of one (node, revision) -----------------------------------------------------

TEST_F(SqliteStoreOutcomeTest, NoneToEachOutcome) {
  EXPECT_TRUE(record(report("web-01", 1, "applied", 5000)));
  EXPECT_TRUE(record(report("web-01", 2, "failed", 5001)));
  EXPECT_TRUE(record(report("web-01", 3, "superseded", 5002)));
  EXPECT_EQ(outcome(1), "applied");
  EXPECT_EQ(outcome(2), "failed");
  EXPECT_EQ(outcome(3), "superseded");
  EXPECT_EQ(node().last_outcome, "superseded");
}

TEST_F(SqliteStoreOutcomeTest, FailedGivesWayToARetriedAppliedAndItsOwnedListIsTheRecoveryCopy) {
  ASSERT_TRUE(record(report("web-01", 1, "applied", 5000, {"file:/a"})));
  ASSERT_TRUE(record(report("web-01", 2, "failed", 6000, {"file:/a"})));
  EXPECT_EQ(node().applied_revision, 1u);
  EXPECT_TRUE(record(report("web-01", 2, "applied", 7000, {"file:/a", "file:/b"})));
  EXPECT_EQ(outcome(2), "applied");
  const auto n = node();
  EXPECT_EQ(n.applied_revision, 2u);
  EXPECT_EQ(n.last_outcome, "applied");
  EXPECT_EQ(n.last_contact_ms, 7000);
  EXPECT_EQ(owned(), (std::vector<std::string>{"file:/a", "file:/b"}));
}

TEST_F(SqliteStoreOutcomeTest, FailedNeverReplacesAppliedAndAppliedIsFinal) {
  ASSERT_TRUE(record(report("web-01", 2, "applied", 5000, {"file:/a"})));
  for (const char* later : {"failed", "refused", "superseded", "applied"})
    EXPECT_FALSE(record(report("web-01", 2, later, 6000, {"file:/z"}))) << later;
  EXPECT_EQ(outcome(2), "applied");
  EXPECT_EQ(owned(), std::vector<std::string>{"file:/a"});
  EXPECT_EQ(node().last_contact_ms, 5000);
}

TEST_F(SqliteStoreOutcomeTest, FailedKeepsTheFirstFailureAndIgnoresRefusedOrSuperseded) {
  ASSERT_TRUE(record(report("web-01", 2, "failed", 5000)));
  EXPECT_FALSE(record(report("web-01", 2, "failed", 6000)));
  EXPECT_FALSE(record(report("web-01", 2, "refused", 6000)));
  EXPECT_FALSE(record(report("web-01", 2, "superseded", 6000)));
  auto r = store_->apply_report("web-01", 2);
  ASSERT_TRUE(r && *r);
  EXPECT_EQ((*r)->outcome, "failed");
  EXPECT_EQ((*r)->at_ms, 5000);
}

TEST_F(SqliteStoreOutcomeTest, SupersededGivesWayToTheLateTruthOfTheSameRevision) {
  ASSERT_TRUE(record(report("web-01", 2, "superseded", 5000)));
  EXPECT_FALSE(record(report("web-01", 2, "superseded", 5500)));
  EXPECT_FALSE(record(report("web-01", 2, "refused", 5500)));
  EXPECT_TRUE(record(report("web-01", 2, "failed", 6000)));
  EXPECT_EQ(outcome(2), "failed");
  ASSERT_TRUE(record(report("web-01", 3, "superseded", 6100)));
  EXPECT_TRUE(record(report("web-01", 3, "applied", 6200, {"file:/c"})));
  EXPECT_EQ(outcome(3), "applied");
  EXPECT_EQ(node().applied_revision, 3u);
  EXPECT_EQ(owned(), std::vector<std::string>{"file:/c"});
}

TEST_F(SqliteStoreOutcomeTest, RefusedGivesWayToAppliedOrFailed) {
  ASSERT_TRUE(record(report("web-01", 2, "refused", 5000)));
  EXPECT_FALSE(record(report("web-01", 2, "superseded", 5100)));
  EXPECT_TRUE(record(report("web-01", 2, "failed", 5200)));
  EXPECT_EQ(outcome(2), "failed");
  ASSERT_TRUE(record(report("web-01", 3, "refused", 5300)));
  EXPECT_TRUE(record(report("web-01", 3, "applied", 5400)));
  EXPECT_EQ(outcome(3), "applied");
}

// --- only what was declared, only from the current identity ---------------------------------------

TEST_F(SqliteStoreOutcomeTest, AReportForARevisionNeverDeclaredIsRefusedAndChangesNothing) {
  ASSERT_TRUE(record(report("web-01", 3, "applied", 5000, {"file:/mine"})));
  for (std::uint64_t rev : {4ULL, 9'000'000'000'000'000'000ULL}) {
    auto r = store_->record_apply(report("web-01", rev, "applied", 9000, {"file:/etc/shadow"}));
    ASSERT_FALSE(r) << rev;
    EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
    EXPECT_EQ(r.error().path, "revision");
    EXPECT_NE(r.error().message.find("never declared"), std::string::npos) << r.error().message;
  }
  const auto n = node();
  EXPECT_EQ(n.applied_revision, 3u);
  EXPECT_EQ(n.last_contact_ms, 5000);
  EXPECT_EQ(owned(), std::vector<std::string>{"file:/mine"});
  // Declared later, revision 4 is then an answer like any other.
  ASSERT_TRUE(store_->declare({write("web-01")}, 200, 0));
  EXPECT_TRUE(record(report("web-01", 4, "failed", 9500)));
  EXPECT_EQ(outcome(4), "failed");
}

TEST_F(SqliteStoreOutcomeTest, AReportForARevisionPrunedFromHistoryIsNotRecorded) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store_->declare({write("web-01")}, 300 + i, 2));  // 4..6, keeps 5, 6
  // Acknowledged but not recorded (it answers a revision that was declared, but retention has
  // dropped it with its revision; see SqliteStoreBoundsTest.ApplyReportsArePrunedWithTheirRevisions).
  auto r = store_->record_apply(report("web-01", 2, "applied", 5000));
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_FALSE(*r);
  EXPECT_FALSE(store_->apply_report("web-01", 2).value());
  EXPECT_TRUE(record(report("web-01", 5, "applied", 5000)));
}

TEST_F(SqliteStoreOutcomeTest, AReportOfARevokedGenerationIsRefused) {
  auto gen1 = report("web-01", 1, "applied", 5000, {"file:/a"});
  gen1.generation = 1;
  ASSERT_TRUE(record(gen1));
  reenrol();
  EXPECT_EQ(node().generation, 2u);
  auto late = report("web-01", 2, "applied", 6000, {"file:/etc/shadow"});
  late.generation = 1;  // verified with the old key just before the re-enrolment
  auto r = store_->record_apply(late);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::PermissionDenied);
  EXPECT_NE(r.error().message.find("revoked"), std::string::npos) << r.error().message;
  EXPECT_EQ(outcome(2), "");
}

TEST_F(SqliteStoreOutcomeTest, ReEnrolmentClearsWhatTheRevokedIdentityReported) {
  auto poisoned = report("web-01", 3, "applied", 5000, {"file:/mine", "file:/etc/shadow"});
  poisoned.owned_digests = {std::string(64, 'a'), std::string(64, 'b')};
  ASSERT_TRUE(record(poisoned));
  ASSERT_TRUE(record(report("web-01", 2, "failed", 5000)));
  reenrol();
  const auto n = node();
  EXPECT_EQ(n.applied_revision, 0u);
  EXPECT_EQ(n.last_outcome, "");
  EXPECT_EQ(n.last_contact_ms, 5000) << "contact was received, it stays";
  EXPECT_TRUE(owned().empty());
  auto copy = store_->recovery_copy("web-01");
  ASSERT_TRUE(copy);
  EXPECT_TRUE(copy->empty());
  EXPECT_EQ(outcome(3), "") << "a revoked identity's report does not count";
  EXPECT_EQ(outcome(2), "");
  auto list = store_->apply_reports("web-01", 10);
  ASSERT_TRUE(list);
  EXPECT_TRUE(list->empty());
  // The new identity's report of the same revision replaces the old one (even "failed" over
  // the old "applied": the old one does not count).
  EXPECT_TRUE(record(report("web-01", 3, "failed", 7000)));
  EXPECT_EQ(outcome(3), "failed");
  EXPECT_TRUE(record(report("web-01", 3, "applied", 7100, {"file:/mine"})));
  EXPECT_EQ(owned(), std::vector<std::string>{"file:/mine"});
  EXPECT_EQ(node().applied_revision, 3u);
}

// --- contact is the control plane's receipt time ------------------------------------------------

TEST_F(SqliteStoreOutcomeTest, ContactIsTheReceiptTimeNeverTheClaimedTime) {
  auto r = report("web-01", 1, "applied", 4'102'444'800'000);  // "at": 2100-01-01
  r.received_at_ms = 5000;
  ASSERT_TRUE(record(r));
  EXPECT_EQ(node().last_contact_ms, 5000);
  auto stored = store_->apply_report("web-01", 1);
  ASSERT_TRUE(stored && *stored);
  EXPECT_EQ((*stored)->at_ms, 4'102'444'800'000) << "the claim is kept, as a claim";
  EXPECT_EQ((*stored)->received_at_ms, 5000);
  auto no_contact = report("web-01", 2, "applied", 9'000'000);
  no_contact.received_at_ms = 0;
  ASSERT_TRUE(record(no_contact));
  EXPECT_EQ(node().last_contact_ms, 5000);
  // Heartbeats then move it on.
  ASSERT_TRUE(store_->touch({sdk::ContactUpdate{"web-01", 6000, 0, "0.1.0", "idle"}}));
  EXPECT_EQ(node().last_contact_ms, 6000);
  EXPECT_EQ(node().heartbeat_at_ms, 6000);
  EXPECT_EQ(node().host_state, "idle");
}

TEST_F(SqliteStoreOutcomeTest, DriftContactIsTheReceiptTime) {
  sdk::DriftReport d;
  d.node = "web-01";
  d.scan_id = "s1";
  d.at_ms = 4'102'444'800'000;
  d.received_at_ms = 5000;
  ASSERT_TRUE(store_->record_drift(d));
  EXPECT_EQ(node().last_contact_ms, 5000);
}

// --- recovery copy digests, successors, pending revision -------------------------------------------

TEST_F(SqliteStoreOutcomeTest, RecoveryCopyCarriesDigests) {
  auto r = report("web-01", 1, "applied", 5000, {"file:/b", "file:/a"});
  r.owned_digests = {std::string(64, 'b'), ""};
  ASSERT_TRUE(record(r));
  auto copy = store_->recovery_copy("web-01");
  ASSERT_TRUE(copy) << copy.error().describe();
  ASSERT_EQ(copy->size(), 2u);
  EXPECT_EQ((*copy)[0].resource, "file:/a");
  EXPECT_EQ((*copy)[0].digest, "");
  EXPECT_EQ((*copy)[1].resource, "file:/b");
  EXPECT_EQ((*copy)[1].digest, std::string(64, 'b'));
  auto stored = store_->apply_report("web-01", 1);
  ASSERT_TRUE(stored && *stored);
  EXPECT_EQ((*stored)->owned_digests, r.owned_digests);
  auto bad = report("web-01", 2, "applied", 5000, {"file:/a"});
  bad.owned_digests = {"x", "y"};
  auto refused = store_->record_apply(bad);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::InvalidArgument);
}

TEST_F(SqliteStoreOutcomeTest, NextRevisionAndDeclaredRevision) {
  EXPECT_EQ(node().declared_revision, 3u);
  auto next = store_->next_revision("web-01", 1);
  ASSERT_TRUE(next && *next);
  EXPECT_EQ((*next)->revision, 2u);
  EXPECT_EQ((*next)->delivery, 2u);
  auto none = store_->next_revision("web-01", 3);
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store_->declare({write("web-01")}, 300 + i, 1));  // 4..6, keeps 6
  auto pruned = store_->next_revision("web-01", 3);
  ASSERT_TRUE(pruned && *pruned);
  EXPECT_EQ((*pruned)->revision, 4u) << "found although its body was pruned";
  EXPECT_EQ(node().declared_revision, 6u);
}

// --- schema version 1 → 2 ----------------------------------------------------------------------

// The version 1 schema exactly as released, for the upgrade test.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE nodes (
  name                 TEXT PRIMARY KEY NOT NULL,
  enrolled_at_ms       INTEGER NOT NULL,
  generation           INTEGER NOT NULL,
  public_key           TEXT NOT NULL,
  last_revision        INTEGER NOT NULL DEFAULT 0,
  applied_revision     INTEGER NOT NULL DEFAULT 0,
  last_outcome         TEXT NOT NULL DEFAULT '',
  last_report_revision INTEGER NOT NULL DEFAULT 0,
  last_contact_ms      INTEGER,
  heartbeat_at_ms      INTEGER,
  host_version         TEXT NOT NULL DEFAULT '',
  host_state           TEXT NOT NULL DEFAULT '',
  eligible             INTEGER NOT NULL DEFAULT 1,
  owned_revision       INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE node_briefings (
  node     TEXT PRIMARY KEY NOT NULL REFERENCES nodes(name) ON DELETE CASCADE,
  briefing TEXT NOT NULL
);

CREATE TABLE tokens (
  id            TEXT PRIMARY KEY NOT NULL,
  node          TEXT NOT NULL,
  hash          TEXT NOT NULL UNIQUE,
  created_at_ms INTEGER NOT NULL,
  expires_at_ms INTEGER NOT NULL,
  reenrol       INTEGER NOT NULL,
  used_at_ms    INTEGER,
  revoked       INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE deliveries (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  created_at_ms INTEGER NOT NULL
);

CREATE TABLE delivery_targets (
  delivery INTEGER NOT NULL REFERENCES deliveries(id) ON DELETE CASCADE,
  node     TEXT NOT NULL REFERENCES nodes(name) ON DELETE CASCADE,
  revision INTEGER NOT NULL,
  PRIMARY KEY (delivery, node)
) WITHOUT ROWID;

CREATE TABLE revisions (
  node          TEXT NOT NULL REFERENCES nodes(name) ON DELETE CASCADE,
  revision      INTEGER NOT NULL,
  created_at_ms INTEGER NOT NULL,
  delivery      INTEGER NOT NULL REFERENCES deliveries(id),
  body          TEXT NOT NULL,
  digest        TEXT NOT NULL,
  PRIMARY KEY (node, revision)
);

CREATE TABLE apply_reports (
  node     TEXT NOT NULL REFERENCES nodes(name) ON DELETE CASCADE,
  revision INTEGER NOT NULL,
  at_ms    INTEGER NOT NULL,
  outcome  TEXT NOT NULL CHECK (outcome IN ('applied', 'failed', 'refused')),
  resource TEXT NOT NULL,
  reason   TEXT NOT NULL,
  PRIMARY KEY (node, revision)
);

CREATE TABLE apply_report_owned (
  node     TEXT NOT NULL,
  revision INTEGER NOT NULL,
  position INTEGER NOT NULL,
  resource TEXT NOT NULL,
  PRIMARY KEY (node, revision, position),
  FOREIGN KEY (node, revision) REFERENCES apply_reports(node, revision) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE TABLE owned (
  node     TEXT NOT NULL REFERENCES nodes(name) ON DELETE CASCADE,
  resource TEXT NOT NULL,
  PRIMARY KEY (node, resource)
) WITHOUT ROWID;

CREATE TABLE drift_reports (
  id         INTEGER PRIMARY KEY,
  node       TEXT NOT NULL REFERENCES nodes(name) ON DELETE CASCADE,
  scan_id    TEXT NOT NULL,
  revision   INTEGER NOT NULL,
  at_ms      INTEGER NOT NULL,
  item_count INTEGER NOT NULL,
  UNIQUE (node, scan_id)
);
CREATE INDEX drift_reports_newest ON drift_reports (node, at_ms, id);
CREATE INDEX drift_reports_newest_with_items ON drift_reports (node, at_ms, id)
  WHERE item_count > 0;

CREATE TABLE drift_items (
  report   INTEGER NOT NULL REFERENCES drift_reports(id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  resource TEXT NOT NULL,
  found    TEXT NOT NULL,
  action   TEXT NOT NULL,
  PRIMARY KEY (report, position)
) WITHOUT ROWID;
)sql";

TEST(SqliteStoreMigrationTest, Version1IsUpgradedAndAStolenKeysUndeclaredReportsAreDropped) {
  TempDir dir;
  const std::string path = (dir.path() / "mesh.db").string();
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr), SQLITE_OK);
    const std::string sql = std::string(kSchemaV1) + R"sql(
CREATE TABLE schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL,
                             migrated_at_ms INTEGER NOT NULL);
INSERT INTO schema_version VALUES (1, 1, 0);
INSERT INTO nodes (name, enrolled_at_ms, generation, public_key, last_revision, applied_revision,
                   last_outcome, last_report_revision, last_contact_ms, owned_revision)
  VALUES ('web-01', 1, 1, 'aa', 2, 9000000000000000000, 'applied', 9000000000000000000,
          4102444800000, 9000000000000000000);
INSERT INTO deliveries (id, created_at_ms) VALUES (1, 10), (2, 20);
INSERT INTO delivery_targets VALUES (1, 'web-01', 1), (2, 'web-01', 2);
INSERT INTO revisions VALUES ('web-01', 1, 10, 1, 'b1', 'd1'), ('web-01', 2, 20, 2, 'b2', 'd2');
INSERT INTO apply_reports VALUES ('web-01', 1, 100, 'applied', '', ''),
                                 ('web-01', 9000000000000000000, 4102444800000, 'applied', '', '');
INSERT INTO apply_report_owned VALUES ('web-01', 1, 0, 'file:/mine'),
                                      ('web-01', 9000000000000000000, 0, 'file:/etc/shadow');
INSERT INTO owned VALUES ('web-01', 'file:/etc/shadow');
)sql";
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_close_v2(db);
  }
  sdk::NullLogger logger;
  sdk::HostContext host;
  host.logger = &logger;
  host.role = "tool";
  SqliteStore store(host);
  sdk::Value cfg = sdk::Value::object();
  cfg.set("path", path);
  ASSERT_TRUE(store.configure(cfg));
  auto opened = store.open();
  ASSERT_TRUE(opened) << opened.error().describe();
  auto n = store.node("web-01");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->applied_revision, 1u);
  EXPECT_EQ(n->last_outcome, "applied");
  EXPECT_FALSE(n->last_contact_ms) << "a last contact in the future was a claimed time";
  EXPECT_EQ(n->declared_revision, 2u);
  auto owned = store.owned("web-01");
  ASSERT_TRUE(owned);
  EXPECT_TRUE(owned->empty()) << "the copy taken from an undeclared revision is dropped";
  auto one = store.apply_report("web-01", 1);
  ASSERT_TRUE(one && *one);
  EXPECT_EQ((*one)->owned, std::vector<std::string>{"file:/mine"});
  EXPECT_EQ((*one)->code, "") << "a report stored before codes has none";
  auto fake = store.apply_report("web-01", 9'000'000'000'000'000'000ULL);
  ASSERT_TRUE(fake);
  EXPECT_FALSE(*fake);
  // The rebuilt tables work: a genuine report of revision 2 is recorded with its digests.
  sdk::ApplyReport r;
  r.node = "web-01";
  r.revision = 2;
  r.outcome = "applied";
  r.received_at_ms = 5000;
  r.owned = {"file:/mine"};
  r.owned_digests = {std::string(64, 'c')};
  r.outcome = "failed";
  ASSERT_TRUE(store.record_apply(r));
  r.outcome = "applied";  // replaces the failure: the owned rows cascade with the rebuilt key
  auto rec = store.record_apply(r);
  ASSERT_TRUE(rec) << rec.error().describe();
  EXPECT_TRUE(*rec);
  auto copy = store.recovery_copy("web-01");
  ASSERT_TRUE(copy && copy->size() == 1u);
  EXPECT_EQ((*copy)[0].digest, std::string(64, 'c'));
}

}  // namespace
}  // namespace mesh::stores::sqlite::testing
