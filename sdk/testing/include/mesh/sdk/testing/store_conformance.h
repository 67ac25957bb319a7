// Nox Mesh SDK testing — the store conformance suite (GoogleTest, header-only).
//
// Every store plugin runs these checks (the `sqlite` and `jetstream-kv` stores do, in
// tests/stores/): what the control plane relies on of sdk::Store, whatever keeps the data.
//
//   * tokens and enrolment: a token enrols its node once; used, revoked, expired or another
//     node's tokens are refused; re-enrolment needs a re-enrol token and raises the generation;
//   * declarations: revisions count from 1 per node, bodies and digests round-trip, deliveries
//     list their targets by node name, retention keeps the newest and numbers continue; an unknown
//     node, a stale expected_revision or a throwing render writes nothing;
//   * apply reports: the outcome state machine of docs/protocol.md, the recovery copy, a revision
//     never declared is InvalidArgument, a revoked generation PermissionDenied;
//   * contact: touch moves last contact forward only, skips unknown nodes; drift reports are
//     idempotent per scan id;
//   * group commit (record_reports, SDK ABI 2.3): a batch of apply and drift reports gives each
//     report what record_apply/record_drift would give it in that order; a refused report
//     (unknown node, revision never declared, revoked generation, bad outcome) is refused alone
//     and the others of its batch are recorded, durably; a batch larger than one message
//     (1.2 MB of recovery copies) is recorded once;
//   * removal keeps history, purge deletes it and keeps the revision counter;
//   * signed requests: fresh exactly once, answers stored (with the declaration, all or nothing);
//     a batch (remember_requests, SDK ABI 2.4) answers each as remember_request would, in one
//     write, durably; two instances remembering the same nonces find each fresh exactly once;
//   * provider schemas; records with versions and compare-and-swap; sequences; declare_with all
//     or nothing;
//   * durability: a store opened again on the same backing sees everything;
//   * several instances on one backing (when the store supports it): each sees the others'
//     writes, and of two racing compare-and-swap writes exactly one wins.
//
// How to use it (link NoxMesh::sdk_testing and GTest::gtest_main):
//
//   #include <mesh/sdk/testing/store_conformance.h>
//   namespace mt = mesh::sdk::testing;
//
//   // Called once per test: every test gets a fresh, empty backing.
//   mt::StoreConformance my_store() {
//     auto dir = std::make_shared<MyTempDir>();
//     mt::StoreConformance c;
//     c.open_store = [dir](const mesh::sdk::HostContext& host, int instance) {
//       auto s = std::make_unique<MyStore>(host);      // host outlives the store
//       mesh::sdk::Value config = mesh::sdk::Value::object();
//       config.set("path", dir->path() + "/store");     // the same backing for every instance
//       if (!s->configure(config) || !s->open()) return std::unique_ptr<mesh::sdk::Store>();
//       return std::unique_ptr<mesh::sdk::Store>(std::move(s));
//     };
//     c.keep_alive = dir;
//     return c;
//   }
//   MESH_INSTANTIATE_STORE_CONFORMANCE(MyStore, my_store);
//
// That defines MyStore/StoreConformanceTest.<Check>/MyStore for each check. Use the macro at
// global namespace scope, in one source file of a test binary (once per store or configuration; several
// in one binary are fine).
//
// `open_store(host, instance)` returns a configured and opened store, or null (the test fails).
// The suite calls it with instance 0 first; "reopen" checks destroy that store and call it again
// with 0 (it must see what was written); the several-instance checks call it with 1 while 0 is
// open (a second control plane: its own local files, if any, the same backing). Set
// `several_instances = false` for a store that cannot be opened twice: those checks then skip.
// The suite writes only through the store (node names web-NN, records in namespace "conf").
//
// Thread safety: the suite calls a store from one thread at a time, except the racing checks,
// which call two instances from two threads at once.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mesh/sdk/logger.h"
#include "mesh/sdk/plugin.h"
#include "mesh/sdk/store.h"

namespace mesh::sdk::testing {

/// One store's backing for one test (see the header comment).
struct StoreConformance {
  /// Opens a store on this test's backing; `instance` 0 or 1 (see the header comment). Returns
  /// null on failure (report why with ADD_FAILURE or a log line).
  std::function<std::unique_ptr<Store>(const HostContext& host, int instance)> open_store;
  /// Whether a second instance may be opened on the backing while the first is open.
  bool several_instances = true;
  /// Dropped after the test's stores are destroyed (temporary folders, servers).
  std::shared_ptr<void> keep_alive;
};

/// What MESH_INSTANTIATE_STORE_CONFORMANCE passes to the tests: a name and a factory called once
/// per test.
struct StoreConformanceParam {
  std::string name;
  std::function<StoreConformance()> make;
};

/// The fixture of every check: a fresh backing per test, instance 0 opened.
class StoreConformanceTest : public ::testing::TestWithParam<StoreConformanceParam> {
 protected:
  void SetUp() override {
    host_.logger = &logger_;
    host_.role = "tool";
    backing_ = GetParam().make();
    ASSERT_TRUE(backing_.open_store) << "StoreConformance::open_store is not set";
    store_ = backing_.open_store(host_, 0);
    ASSERT_TRUE(store_) << "the store did not open";
  }
  void TearDown() override {
    store_.reset();
    backing_.keep_alive.reset();
  }

  /// Destroys instance 0 and opens it again on the same backing.
  void reopen() {
    store_.reset();
    store_ = backing_.open_store(host_, 0);
    ASSERT_TRUE(store_) << "the store did not open again";
  }

  static TokenRecord token(const std::string& id, const std::string& node, const std::string& hash,
                           bool reenrol = false, std::int64_t expires_at_ms = 1'000'000) {
    TokenRecord t;
    t.id = id;
    t.node = node;
    t.hash = hash;
    t.created_at_ms = 1000;
    t.expires_at_ms = expires_at_ms;
    t.reenrol = reenrol;
    return t;
  }
  /// Adds a token for `node` and enrols it.
  static void enrol(Store& s, const std::string& node, const std::string& key = "aa",
                    const std::string& suffix = "") {
    auto t = s.add_token(token("tok-" + node + suffix, node, "hash-" + node + suffix, !suffix.empty()));
    ASSERT_TRUE(t) << t.error().describe();
    auto e = s.enrol("hash-" + node + suffix, node, key, 2000);
    ASSERT_TRUE(e) << e.error().describe();
  }
  /// A declaration write whose body is "<node>@<revision>".
  static DeclarationWrite write(const std::string& node, std::optional<std::uint64_t> expected = {}) {
    DeclarationWrite w{node, [node](std::uint64_t rev) { return node + "@" + std::to_string(rev); }};
    w.expected_revision = expected;
    return w;
  }
  static ApplyReport report(const std::string& node, std::uint64_t revision, const std::string& outcome,
                            std::int64_t at_ms, std::vector<std::string> owned = {}) {
    ApplyReport r;
    r.node = node;
    r.revision = revision;
    r.outcome = outcome;
    r.at_ms = at_ms;
    r.received_at_ms = at_ms;
    r.owned = std::move(owned);
    if (outcome == "failed") {
      r.resource = "file:/etc/motd";
      r.reason = "permission denied";
      r.code = "permission_denied";
    }
    return r;
  }
  static RecordWrite put(const std::string& key, const std::string& value,
                         std::optional<std::uint64_t> expected = {}) {
    RecordWrite w;
    w.ns = "conf";
    w.key = key;
    w.value = value;
    w.expected_version = expected;
    return w;
  }
  NodeRecord node(Store& s, const std::string& name) {
    auto n = s.node(name);
    EXPECT_TRUE(n) << n.error().describe();
    return n ? *n : NodeRecord{};
  }

  NullLogger logger_;
  HostContext host_;
  StoreConformance backing_;
  std::unique_ptr<Store> store_;
};

#define MESH_STORE_EXPECT_CODE(expr, want)                                                   \
  do {                                                                                       \
    auto mesh_r_ = (expr);                                                                   \
    ASSERT_FALSE(mesh_r_) << #expr " succeeded";                                             \
    EXPECT_EQ(mesh_r_.error().code, (want)) << #expr ": " << mesh_r_.error().describe();     \
  } while (0)

TEST_P(StoreConformanceTest, ATokenEnrolsItsNodeOnceAndOthersAreRefused) {
  Store& s = *store_;
  ASSERT_TRUE(s.add_token(token("t1", "web-01", "h1")));
  MESH_STORE_EXPECT_CODE(s.add_token(token("t1", "web-02", "h9")), ErrorCode::AlreadyExists);
  ASSERT_TRUE(s.add_token(token("t2", "web-02", "h2")));
  ASSERT_TRUE(s.add_token(token("t3", "web-03", "h3", false, 1500)));
  auto listed = s.tokens(1200);
  ASSERT_TRUE(listed) << listed.error().describe();
  ASSERT_EQ(listed->size(), 3u);
  EXPECT_EQ((*listed)[0].id, "t1");

  MESH_STORE_EXPECT_CODE(s.enrol("nope", "web-01", "aa", 2000), ErrorCode::PermissionDenied);
  MESH_STORE_EXPECT_CODE(s.enrol("h2", "web-01", "aa", 2000), ErrorCode::PermissionDenied);
  MESH_STORE_EXPECT_CODE(s.enrol("h3", "web-03", "aa", 2000), ErrorCode::PermissionDenied);  // expired
  auto e = s.enrol("h1", "web-01", "key-1", 2000);
  ASSERT_TRUE(e) << e.error().describe();
  EXPECT_EQ(e->name, "web-01");
  EXPECT_EQ(e->public_key, "key-1");
  EXPECT_EQ(e->generation, 1u);
  MESH_STORE_EXPECT_CODE(s.enrol("h1", "web-01", "key-1", 2001), ErrorCode::PermissionDenied);  // used

  ASSERT_TRUE(s.revoke_token("t2"));
  MESH_STORE_EXPECT_CODE(s.revoke_token("no-such-token"), ErrorCode::NotFound);
  MESH_STORE_EXPECT_CODE(s.enrol("h2", "web-02", "aa", 2000), ErrorCode::PermissionDenied);

  // Re-enrolment needs a re-enrol token; it raises the generation and replaces the key.
  ASSERT_TRUE(s.add_token(token("t4", "web-01", "h4")));
  EXPECT_FALSE(s.enrol("h4", "web-01", "key-2", 3000));
  ASSERT_TRUE(s.add_token(token("t5", "web-01", "h5", true)));
  auto again = s.enrol("h5", "web-01", "key-2", 3000);
  ASSERT_TRUE(again) << again.error().describe();
  EXPECT_EQ(again->generation, 2u);
  EXPECT_EQ(node(s, "web-01").public_key, "key-2");
  MESH_STORE_EXPECT_CODE(s.node("web-02"), ErrorCode::NotFound);
}

TEST_P(StoreConformanceTest, DeclarationsCountRevisionsPerNodeAndDeliveriesListTheirTargets) {
  Store& s = *store_;
  enrol(s, "web-02");
  enrol(s, "web-01");
  auto d1 = s.declare({write("web-02"), write("web-01")}, 100, 0);
  ASSERT_TRUE(d1) << d1.error().describe();
  EXPECT_EQ(d1->id, 1u);
  ASSERT_EQ(d1->targets.size(), 2u);
  EXPECT_EQ(d1->targets[0].node, "web-01");
  EXPECT_EQ(d1->targets[0].revision, 1u);
  auto d2 = s.declare({write("web-01")}, 200, 0);
  ASSERT_TRUE(d2) << d2.error().describe();
  EXPECT_EQ(d2->id, 2u);
  EXPECT_EQ(d2->targets.at(0).revision, 2u);

  auto latest = s.latest_revision("web-01");
  ASSERT_TRUE(latest && *latest);
  EXPECT_EQ((*latest)->revision, 2u);
  EXPECT_EQ((*latest)->body, "web-01@2");
  EXPECT_EQ((*latest)->delivery, 2u);
  EXPECT_EQ((*latest)->created_at_ms, 200);
  EXPECT_EQ((*latest)->digest.size(), 64u);
  auto r1 = s.revision("web-01", 1);
  ASSERT_TRUE(r1);
  EXPECT_EQ(r1->body, "web-01@1");
  MESH_STORE_EXPECT_CODE(s.revision("web-01", 9), ErrorCode::NotFound);
  auto h = s.history("web-01", 10);
  ASSERT_TRUE(h);
  ASSERT_EQ(h->size(), 2u);
  EXPECT_EQ((*h)[0].revision, 2u);
  auto d = s.delivery(1);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->targets.size(), 2u);
  EXPECT_EQ(d->created_at_ms, 100);
  auto ld = s.latest_delivery();
  ASSERT_TRUE(ld && *ld);
  EXPECT_EQ((*ld)->id, 2u);
  MESH_STORE_EXPECT_CODE(s.delivery(7), ErrorCode::NotFound);
  EXPECT_EQ(node(s, "web-01").declared_revision, 2u);
  auto next = s.next_revision("web-01", 1);
  ASSERT_TRUE(next && *next);
  EXPECT_EQ((*next)->revision, 2u);
  EXPECT_EQ((*next)->delivery, 2u);

  // Retention keeps the newest; numbers continue.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.declare({write("web-01")}, 300 + i, 2));
  h = s.history("web-01", 10);
  ASSERT_TRUE(h);
  ASSERT_EQ(h->size(), 2u);
  EXPECT_EQ((*h)[0].revision, 5u);
  EXPECT_EQ((*h)[1].revision, 4u);
}

TEST_P(StoreConformanceTest, AFailedDeclarationWritesNothing) {
  Store& s = *store_;
  enrol(s, "web-01");
  ASSERT_TRUE(s.declare({write("web-01")}, 100, 0));
  MESH_STORE_EXPECT_CODE(s.declare({write("web-01"), write("web-77")}, 101, 0), ErrorCode::NotFound);
  MESH_STORE_EXPECT_CODE(s.declare({write("web-01", 0)}, 102, 0), ErrorCode::FailedPrecondition);
  MESH_STORE_EXPECT_CODE(s.declare({}, 103, 0), ErrorCode::InvalidArgument);
  MESH_STORE_EXPECT_CODE(s.declare({write("web-01"), write("web-01")}, 103, 0), ErrorCode::InvalidArgument);
  DeclarationWrite throwing{"web-01", [](std::uint64_t) -> std::string { throw std::runtime_error("render failed"); }};
  EXPECT_FALSE(s.declare({throwing}, 104, 0));
  auto latest = s.latest_revision("web-01");
  ASSERT_TRUE(latest && *latest);
  EXPECT_EQ((*latest)->revision, 1u);
  auto ld = s.latest_delivery();
  ASSERT_TRUE(ld && *ld);
  EXPECT_EQ((*ld)->id, 1u);
  // The store is still usable, and the expected revision that holds goes through.
  auto d = s.declare({write("web-01", 1)}, 105, 0);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->targets.at(0).revision, 2u);
}

TEST_P(StoreConformanceTest, ApplyReportsFollowTheOutcomeStateMachine) {
  Store& s = *store_;
  enrol(s, "web-01");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.declare({write("web-01")}, 100 + i, 0));

  auto r = s.record_apply(report("web-01", 1, "failed", 1000));
  ASSERT_TRUE(r && *r) << (r ? "" : r.error().describe());
  r = s.record_apply(report("web-01", 1, "applied", 1100, {"file:/etc/a"}));
  ASSERT_TRUE(r && *r);
  r = s.record_apply(report("web-01", 1, "failed", 1200));  // applied is final
  ASSERT_TRUE(r);
  EXPECT_FALSE(*r);
  r = s.record_apply(report("web-01", 2, "refused", 1300));
  ASSERT_TRUE(r && *r);
  r = s.record_apply(report("web-01", 2, "applied", 1400, {"file:/etc/b", "file:/etc/a"}));
  ASSERT_TRUE(r && *r);
  MESH_STORE_EXPECT_CODE(s.record_apply(report("web-01", 9, "applied", 1500)), ErrorCode::InvalidArgument);
  MESH_STORE_EXPECT_CODE(s.record_apply(report("web-77", 1, "applied", 1500)), ErrorCode::NotFound);
  auto bad = report("web-01", 3, "exploded", 1500);
  MESH_STORE_EXPECT_CODE(s.record_apply(bad), ErrorCode::InvalidArgument);
  auto revoked = report("web-01", 3, "applied", 1500);
  revoked.generation = 7;
  MESH_STORE_EXPECT_CODE(s.record_apply(revoked), ErrorCode::PermissionDenied);

  auto n = node(s, "web-01");
  EXPECT_EQ(n.applied_revision, 2u);
  EXPECT_EQ(n.last_outcome, "applied");
  EXPECT_EQ(n.last_contact_ms, 1400);
  auto owned = s.owned("web-01");
  ASSERT_TRUE(owned);
  EXPECT_EQ(*owned, (std::vector<std::string>{"file:/etc/a", "file:/etc/b"}));
  auto one = s.apply_report("web-01", 1);
  ASSERT_TRUE(one && *one);
  EXPECT_EQ((*one)->outcome, "applied");
  auto all = s.apply_reports("web-01", 10);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].revision, 2u);
  auto none = s.apply_report("web-01", 3);
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
}

// read_many (SDK ABI 2.3): reads through the view answer as the same reads alone would, and a
// later read_many sees what was written between the two.
TEST_P(StoreConformanceTest, ManyReadsThroughOneViewAnswerAsEachAloneWould) {
  Store& s = *store_;
  enrol(s, "web-01");
  enrol(s, "web-02");
  ASSERT_TRUE(s.declare({write("web-01"), write("web-02")}, 100, 0));
  ASSERT_TRUE(s.declare({write("web-01")}, 101, 0));
  auto r = s.record_apply(report("web-01", 1, "applied", 1000, {"file:/etc/a"}));
  ASSERT_TRUE(r && *r);
  auto alone_node = s.node("web-01");
  auto alone_report = s.apply_report("web-01", 1);
  auto alone_next = s.next_revision("web-01", 1);
  auto alone_latest = s.latest_revision("web-02");
  ASSERT_TRUE(alone_node && alone_report && alone_next && alone_latest);
  int calls = 0;
  auto many = s.read_many([&](Store& view) -> Result<void> {
    ++calls;
    auto n = view.node("web-01");
    EXPECT_TRUE(n) << n.error().describe();
    if (n) {
      EXPECT_EQ(n->applied_revision, alone_node->applied_revision);
      EXPECT_EQ(n->public_key, alone_node->public_key);
    }
    auto rep = view.apply_report("web-01", 1);
    EXPECT_TRUE(rep && *rep && (*rep)->outcome == "applied");
    auto next = view.next_revision("web-01", 1);
    EXPECT_TRUE(next && *next && (*next)->revision == 2u);
    auto latest = view.latest_revision("web-02");
    EXPECT_TRUE(latest && *latest && (*latest)->revision == (*alone_latest)->revision);
    auto none = view.apply_report("web-02", 1);
    EXPECT_TRUE(none && !*none);
    auto missing = view.node("web-77");
    EXPECT_FALSE(missing);
    if (!missing) {
      EXPECT_EQ(missing.error().code, ErrorCode::NotFound) << missing.error().describe();
    }
    return {};
  });
  ASSERT_TRUE(many) << many.error().describe();
  EXPECT_EQ(calls, 1);

  // An error of `reads` is what read_many returns; the store is usable after it.
  auto failed = s.read_many([](Store&) -> Result<void> { return fail(ErrorCode::Failed, "stop here"); });
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, ErrorCode::Failed);

  r = s.record_apply(report("web-02", 1, "failed", 1100));
  ASSERT_TRUE(r && *r);
  ASSERT_TRUE(s.read_many([&](Store& view) -> Result<void> {
    auto rep = view.apply_report("web-02", 1);
    EXPECT_TRUE(rep && *rep && (*rep)->outcome == "failed") << "a later read_many sees the write";
    return {};
  }));
}

TEST_P(StoreConformanceTest, ContactMovesForwardOnlyAndDriftIsIdempotent) {
  Store& s = *store_;
  enrol(s, "web-01");
  ContactUpdate u{"web-01", 5000, 0, "1.2.3", "idle", 4900, 1};
  ContactUpdate ghost{"web-77", 5000, 0, "1.2.3", "idle", 0, 0};
  ASSERT_TRUE(s.touch({u, ghost}));
  u.at_ms = 4000;
  u.host_state = "applying";
  ASSERT_TRUE(s.touch({u}));
  auto n = node(s, "web-01");
  EXPECT_EQ(n.last_contact_ms, 5000);
  EXPECT_EQ(n.host_version, "1.2.3");
  EXPECT_EQ(n.heartbeat_ms, 4900);
  auto listed = s.nodes();
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->size(), 1u);

  DriftReport d;
  d.node = "web-01";
  d.scan_id = "scan-1";
  d.at_ms = 5500;
  d.received_at_ms = 6000;
  d.items = {DriftItem{"file:/etc/motd", "properties.content differs", "repaired"}};
  auto first = s.record_drift(d);
  ASSERT_TRUE(first && *first);
  auto second = s.record_drift(d);
  ASSERT_TRUE(second);
  EXPECT_FALSE(*second);
  auto last = s.last_drift("web-01", true);
  ASSERT_TRUE(last && *last);
  EXPECT_EQ((*last)->scan_id, "scan-1");
  ASSERT_EQ((*last)->items.size(), 1u);
  EXPECT_EQ((*last)->items[0].action, "repaired");
  EXPECT_EQ(node(s, "web-01").last_contact_ms, 6000);
  d.node = "web-77";
  MESH_STORE_EXPECT_CODE(s.record_drift(d), ErrorCode::NotFound);

  ASSERT_TRUE(s.set_briefing("web-01", R"({"lines":[]})", false));
  n = node(s, "web-01");
  EXPECT_EQ(n.briefing, R"({"lines":[]})");
  EXPECT_FALSE(n.eligible);
}

TEST_P(StoreConformanceTest, ABatchOfReportsIsRecordedTogetherAndABadReportIsRefusedAlone) {
  Store& s = *store_;
  enrol(s, "web-01");
  enrol(s, "web-02");
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(s.declare({write("web-01")}, 100 + i, 0));
  ASSERT_TRUE(s.declare({write("web-02")}, 200, 0));

  auto empty = s.record_reports(ReportBatch{});
  ASSERT_TRUE(empty) << empty.error().describe();
  EXPECT_TRUE(empty->applies.empty() && empty->drifts.empty());

  ReportBatch b;
  b.applies.push_back(report("web-01", 1, "applied", 1000, {"file:/etc/a"}));  // 0: recorded
  b.applies.push_back(report("web-01", 9, "applied", 1000));                   // 1: never declared
  b.applies.push_back(report("web-77", 1, "applied", 1000));                   // 2: unknown node
  b.applies.push_back(report("web-02", 1, "failed", 1100));                    // 3: recorded
  b.applies.push_back(report("web-01", 1, "failed", 1200));                    // 4: applied is final
  b.applies.push_back(report("web-01", 2, "applied", 1300, {"file:/etc/b"}));  // 5: recorded
  auto revoked = report("web-02", 1, "applied", 1400);
  revoked.generation = 7;
  b.applies.push_back(revoked);                                         // 6: revoked identity
  b.applies.push_back(report("web-02", 1, "exploded", 1400));           // 7: unknown outcome
  DriftReport d;
  d.node = "web-01";
  d.scan_id = "scan-1";
  d.at_ms = 1500;
  d.received_at_ms = 1600;
  d.items = {DriftItem{"file:/etc/motd", "properties.content differs", "repaired"}};
  b.drifts.push_back(d);  // 0: recorded
  b.drifts.push_back(d);  // 1: the same scan again: not recorded
  DriftReport ghost = d;
  ghost.node = "web-77";
  b.drifts.push_back(ghost);  // 2: unknown node

  auto r = s.record_reports(b);
  ASSERT_TRUE(r) << r.error().describe();
  ASSERT_EQ(r->applies.size(), b.applies.size());
  ASSERT_EQ(r->drifts.size(), b.drifts.size());
  auto is = [](const Result<bool>& x, bool want) { return x && *x == want; };
  auto refused = [](const Result<bool>& x, ErrorCode want) { return !x && x.error().code == want; };
  EXPECT_TRUE(is(r->applies[0], true));
  EXPECT_TRUE(refused(r->applies[1], ErrorCode::InvalidArgument));
  EXPECT_TRUE(refused(r->applies[2], ErrorCode::NotFound));
  EXPECT_TRUE(is(r->applies[3], true));
  EXPECT_TRUE(is(r->applies[4], false));
  EXPECT_TRUE(is(r->applies[5], true));
  EXPECT_TRUE(refused(r->applies[6], ErrorCode::PermissionDenied));
  EXPECT_TRUE(refused(r->applies[7], ErrorCode::InvalidArgument));
  EXPECT_TRUE(is(r->drifts[0], true));
  EXPECT_TRUE(is(r->drifts[1], false));
  EXPECT_TRUE(refused(r->drifts[2], ErrorCode::NotFound));
  if (!r->applies[1]) {
    EXPECT_NE(r->applies[1].error().message.find("web-01"), std::string::npos) << r->applies[1].error().message;
  }

  // What the good reports wrote is there, durably; the refused ones wrote nothing.
  reopen();
  Store& t = *store_;
  auto n1 = node(t, "web-01");
  EXPECT_EQ(n1.applied_revision, 2u);
  EXPECT_EQ(n1.last_outcome, "applied");
  EXPECT_EQ(n1.last_contact_ms, 1600);
  auto owned = t.owned("web-01");
  ASSERT_TRUE(owned);
  EXPECT_EQ(*owned, (std::vector<std::string>{"file:/etc/b"}));
  auto one = t.apply_report("web-01", 1);
  ASSERT_TRUE(one && *one);
  EXPECT_EQ((*one)->outcome, "applied");
  auto reports = t.apply_reports("web-01", 10);
  ASSERT_TRUE(reports);
  EXPECT_EQ(reports->size(), 2u);
  auto n2 = node(t, "web-02");
  EXPECT_EQ(n2.last_outcome, "failed");
  EXPECT_EQ(n2.applied_revision, 0u);
  auto two = t.apply_report("web-02", 1);
  ASSERT_TRUE(two && *two);
  EXPECT_EQ((*two)->outcome, "failed");
  auto last = t.last_drift("web-01", true);
  ASSERT_TRUE(last && *last);
  EXPECT_EQ((*last)->scan_id, "scan-1");
}

TEST_P(StoreConformanceTest, ABatchLargerThanOneMessageIsRecordedOnce) {
  Store& s = *store_;
  enrol(s, "web-01");
  ASSERT_TRUE(s.declare({write("web-01")}, 100, 0));
  // 200 copies of one report, each with 50 owned resources of ~120 bytes: 1.2 MB in one batch,
  // more than a broker's default max_payload (1 MiB).
  std::vector<std::string> owned;
  for (int i = 0; i < 50; ++i) owned.push_back("file:/srv/" + std::string(100, 'x') + "/" + std::to_string(i));
  ReportBatch b;
  for (int i = 0; i < 200; ++i) b.applies.push_back(report("web-01", 1, "applied", 1000 + i, owned));
  auto r = s.record_reports(b);
  ASSERT_TRUE(r) << r.error().describe();
  ASSERT_EQ(r->applies.size(), 200u);
  EXPECT_TRUE(r->applies[0] && *r->applies[0]);
  for (std::size_t i = 1; i < r->applies.size(); ++i)
    EXPECT_TRUE(r->applies[i] && !*r->applies[i]) << "copy " << i << " recorded again";
  auto reports = s.apply_reports("web-01", 10);
  ASSERT_TRUE(reports);
  ASSERT_EQ(reports->size(), 1u);
  EXPECT_EQ((*reports)[0].at_ms, 1000);
  auto kept = s.owned("web-01");
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->size(), 50u);
}

TEST_P(StoreConformanceTest, RemovalKeepsHistoryAndPurgeKeepsTheRevisionCounter) {
  Store& s = *store_;
  enrol(s, "web-01");
  ASSERT_TRUE(s.declare({write("web-01")}, 100, 0));
  ASSERT_TRUE(s.declare({write("web-01")}, 101, 0));
  auto removed = s.remove_node("web-01", 5000, false);
  ASSERT_TRUE(removed) << removed.error().describe();
  EXPECT_EQ(removed->name, "web-01");
  MESH_STORE_EXPECT_CODE(s.node("web-01"), ErrorCode::NotFound);
  MESH_STORE_EXPECT_CODE(s.remove_node("web-01", 5001, false), ErrorCode::NotFound);
  auto all = s.all_nodes();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].removed_at_ms, 5000);
  auto h = s.history("web-01", 10);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->size(), 2u);
  MESH_STORE_EXPECT_CODE(s.declare({write("web-01")}, 102, 0), ErrorCode::NotFound);
  ASSERT_TRUE(s.remove_node("web-01", 5002, true));
  enrol(s, "web-01", "bb", "-again");
  auto d = s.declare({write("web-01")}, 103, 0);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->targets.at(0).revision, 3u);
}

TEST_P(StoreConformanceTest, ARequestIsFreshOnceAndItsAnswerIsWrittenWithItsDeclaration) {
  Store& s = *store_;
  enrol(s, "web-01");
  RequestRecord req{"operator:alice", "nonce-0000000000001", "digest-1", 10'000, std::nullopt};
  auto fresh = s.remember_request(req, 1000);
  ASSERT_TRUE(fresh) << fresh.error().describe();
  EXPECT_FALSE(*fresh);
  auto replay = s.remember_request(req, 1001);
  ASSERT_TRUE(replay && *replay);
  EXPECT_EQ((*replay)->digest, "digest-1");
  EXPECT_FALSE((*replay)->answer);
  MESH_STORE_EXPECT_CODE(s.answer_request("operator:alice", "nonce-unknown-000001", "x"), ErrorCode::NotFound);

  RequestAnswer answer{"operator:alice", "nonce-0000000000001",
                       [](const DeliveryRecord& d) { return "delivery " + std::to_string(d.id); }};
  auto d = s.declare_answered({write("web-01")}, 1002, 0, answer);
  ASSERT_TRUE(d) << d.error().describe();
  replay = s.remember_request(req, 1003);
  ASSERT_TRUE(replay && *replay);
  EXPECT_EQ((*replay)->answer, "delivery 1");

  RequestAnswer unknown{"operator:alice", "nonce-unknown-000001",
                        [](const DeliveryRecord&) { return std::string("x"); }};
  MESH_STORE_EXPECT_CODE(s.declare_answered({write("web-01")}, 1004, 0, unknown), ErrorCode::NotFound);
  auto latest = s.latest_revision("web-01");
  ASSERT_TRUE(latest && *latest);
  EXPECT_EQ((*latest)->revision, 1u);

  RequestRecord refused{"node:web-01", "nonce-0000000000002", "digest-2", 10'000, std::nullopt};
  ASSERT_TRUE(s.remember_request(refused, 1005));
  ASSERT_TRUE(s.answer_request("node:web-01", "nonce-0000000000002", "refused"));
  auto again = s.remember_request(refused, 1006);
  ASSERT_TRUE(again && *again);
  EXPECT_EQ((*again)->answer, "refused");
  // Expired requests are forgotten.
  auto later = s.remember_request(req, 20'000);
  ASSERT_TRUE(later);
  EXPECT_FALSE(*later);
}

TEST_P(StoreConformanceTest, ABatchOfRequestsIsRememberedAsEachAloneWouldBeAndDurably) {
  Store& s = *store_;
  RequestRecord kept{"node:web-01", "nonce-0000000000004", "digest-4", 10'000, std::nullopt};
  ASSERT_TRUE(s.remember_request(kept, 1000));
  ASSERT_TRUE(s.answer_request("node:web-01", "nonce-0000000000004", "refused"));
  RequestRecord a{"node:web-01", "nonce-0000000000005", "digest-5", 10'000, std::nullopt};
  RequestRecord b{"node:web-02", "nonce-0000000000005", "digest-5b", 10'000, std::nullopt};
  auto none = s.remember_requests({}, 1001);
  ASSERT_TRUE(none) << none.error().describe();
  EXPECT_TRUE(none->empty());
  auto r = s.remember_requests({a, b, a, RequestRecord{}, kept}, 1001);
  ASSERT_TRUE(r) << r.error().describe();
  ASSERT_EQ(r->size(), 5u);
  ASSERT_TRUE((*r)[0]) << (*r)[0].error().describe();
  EXPECT_FALSE(*(*r)[0]) << "fresh";
  ASSERT_TRUE((*r)[1]) << (*r)[1].error().describe();
  EXPECT_FALSE(*(*r)[1]) << "the same nonce of another signer is another request";
  ASSERT_TRUE((*r)[2] && *(*r)[2]) << "the second copy in one batch is a replay";
  EXPECT_EQ((*(*r)[2])->digest, "digest-5");
  ASSERT_FALSE((*r)[3]);
  EXPECT_EQ((*r)[3].error().code, ErrorCode::InvalidArgument);
  ASSERT_TRUE((*r)[4] && *(*r)[4]);
  EXPECT_EQ((*(*r)[4])->answer, "refused");

  // Durable: opened again, every one of them is a replay, in a batch or alone.
  reopen();
  Store& again = *store_;
  auto after = again.remember_requests({a, b}, 1002);
  ASSERT_TRUE(after) << after.error().describe();
  ASSERT_EQ(after->size(), 2u);
  ASSERT_TRUE((*after)[0] && *(*after)[0]);
  ASSERT_TRUE((*after)[1] && *(*after)[1]);
  EXPECT_EQ((*(*after)[1])->digest, "digest-5b");
  auto alone = again.remember_request(a, 1003);
  ASSERT_TRUE(alone && *alone);
  // Expired requests are forgotten by a batch too.
  auto later = again.remember_requests({a}, 20'000);
  ASSERT_TRUE(later);
  ASSERT_TRUE((*later)[0]);
  EXPECT_FALSE(*(*later)[0]);
}

TEST_P(StoreConformanceTest, TwoInstancesRememberingTheSameBatchesGetEachNonceFreshOnce) {
  if (!backing_.several_instances) GTEST_SKIP() << "this store cannot be opened twice";
  auto other = backing_.open_store(host_, 1);
  ASSERT_TRUE(other) << "the second instance did not open";
  constexpr int kRounds = 10;
  constexpr int kPerBatch = 8;
  std::vector<std::vector<int>> fresh(2, std::vector<int>(kRounds * kPerBatch, 0));
  std::vector<std::string> errors[2];
  auto run = [&](int who, Store* st) {
    for (int round = 0; round < kRounds; ++round) {
      std::vector<RequestRecord> batch;
      for (int i = 0; i < kPerBatch; ++i)
        batch.push_back(RequestRecord{"node:web-01", "nonce-race-" + std::to_string(round * kPerBatch + i),
                                      "digest", 100'000, std::nullopt});
      auto r = st->remember_requests(batch, 1000 + round);
      if (!r) {
        errors[who].push_back(r.error().describe());
        continue;
      }
      for (int i = 0; i < kPerBatch && i < static_cast<int>(r->size()); ++i) {
        if (!(*r)[i]) errors[who].push_back((*r)[i].error().describe());
        else if (!*(*r)[i]) fresh[who][round * kPerBatch + i] = 1;
      }
    }
  };
  std::thread t0(run, 0, store_.get());
  std::thread t1(run, 1, other.get());
  t0.join();
  t1.join();
  EXPECT_TRUE(errors[0].empty()) << errors[0].front();
  EXPECT_TRUE(errors[1].empty()) << errors[1].front();
  for (int i = 0; i < kRounds * kPerBatch; ++i)
    EXPECT_EQ(fresh[0][i] + fresh[1][i], 1) << "nonce-race-" << i << " must be fresh for exactly one instance";
}

TEST_P(StoreConformanceTest, ProviderSchemasAreStoredReplacedAndForgotten) {
  Store& s = *store_;
  enrol(s, "web-01");
  auto none = s.provider_schemas("web-01");
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  ASSERT_TRUE(s.set_provider_schemas("web-01", R"([{"type":"file"}])"));
  ASSERT_TRUE(s.set_provider_schemas("web-01", R"([{"type":"package"}])"));
  auto got = s.provider_schemas("web-01");
  ASSERT_TRUE(got && *got);
  EXPECT_EQ(**got, R"([{"type":"package"}])");
  ASSERT_TRUE(s.set_provider_schemas("web-01", ""));
  got = s.provider_schemas("web-01");
  ASSERT_TRUE(got);
  EXPECT_FALSE(*got);
  MESH_STORE_EXPECT_CODE(s.set_provider_schemas("web-77", "[]"), ErrorCode::NotFound);
}

TEST_P(StoreConformanceTest, RecordsAreVersionedAndCompareAndSwapWritesAllOrNothing) {
  Store& s = *store_;
  auto w = s.put_records({put("a/1", "one", 0), put("a/2", "two")}, 100);
  ASSERT_TRUE(w) << w.error().describe();
  ASSERT_EQ(w->size(), 2u);
  EXPECT_EQ((*w)[0].version, 1u);
  w = s.put_records({put("a/1", "uno", 1)}, 200);
  ASSERT_TRUE(w) << w.error().describe();
  EXPECT_EQ((*w)[0].version, 2u);
  MESH_STORE_EXPECT_CODE(s.put_records({put("a/2", "zwei", 1), put("a/1", "stale", 1)}, 300),
                         ErrorCode::FailedPrecondition);
  auto two = s.record("conf", "a/2");
  ASSERT_TRUE(two && *two);
  EXPECT_EQ((*two)->value, "two");
  MESH_STORE_EXPECT_CODE(s.put_records({}, 300), ErrorCode::InvalidArgument);
  MESH_STORE_EXPECT_CODE(s.put_records({put("a/3", "x"), put("a/3", "y")}, 300), ErrorCode::InvalidArgument);
  RecordWrite rendered = put("a/4", "");
  rendered.render = [](const DeliveryRecord&) { return std::string("r"); };
  MESH_STORE_EXPECT_CODE(s.put_records({rendered}, 300), ErrorCode::InvalidArgument);

  RecordWrite erase = put("a/2", "");
  erase.erase = true;
  ASSERT_TRUE(s.put_records({erase}, 400));
  auto gone = s.record("conf", "a/2");
  ASSERT_TRUE(gone);
  EXPECT_FALSE(*gone);
  w = s.put_records({put("a/2", "back", 0)}, 500);
  ASSERT_TRUE(w) << w.error().describe();
  EXPECT_EQ((*w)[0].version, 3u);
  ASSERT_TRUE(s.put_records({put("b/1", "other")}, 600));
  auto listed = s.records("conf", "a/");
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].key, "a/1");
  EXPECT_EQ((*listed)[0].value, "uno");
  EXPECT_EQ((*listed)[0].updated_at_ms, 200);

  auto s1 = s.next_sequence("deploy");
  auto s2 = s.next_sequence("deploy");
  auto o1 = s.next_sequence("run");
  ASSERT_TRUE(s1 && s2 && o1);
  EXPECT_EQ(*s1, 1u);
  EXPECT_EQ(*s2, 2u);
  EXPECT_EQ(*o1, 1u);
  MESH_STORE_EXPECT_CODE(s.next_sequence(""), ErrorCode::InvalidArgument);
}

TEST_P(StoreConformanceTest, DeclareWithWritesTheDeliveryRecordsAndAnswerTogetherOrNothing) {
  Store& s = *store_;
  enrol(s, "web-01");
  enrol(s, "web-02");
  RequestRecord req{"operator:alice", "nonce-0000000000003", "digest-3", 10'000, std::nullopt};
  ASSERT_TRUE(s.remember_request(req, 1000));
  RecordWrite deploy = put("deploy/1", "");
  deploy.expected_version = 0;
  deploy.render = [](const DeliveryRecord& d) {
    return "delivery " + std::to_string(d.id) + " to " + std::to_string(d.targets.size());
  };
  auto w1 = write("web-01", 0);
  w1.composition = R"({"own":[]})";
  RequestAnswer answer{"operator:alice", "nonce-0000000000003",
                       [](const DeliveryRecord& d) { return "ok " + std::to_string(d.id); }};
  auto d = s.declare_with({w1, write("web-02")}, {deploy}, 2000, 0, answer);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->id, 1u);
  auto rec = s.record("conf", "deploy/1");
  ASSERT_TRUE(rec && *rec);
  EXPECT_EQ((*rec)->value, "delivery 1 to 2");
  auto rev = s.revision("web-01", 1);
  ASSERT_TRUE(rev);
  EXPECT_EQ(rev->composition, R"({"own":[]})");
  auto replay = s.remember_request(req, 2001);
  ASSERT_TRUE(replay && *replay);
  EXPECT_EQ((*replay)->answer, "ok 1");

  // A stale version or revision anywhere writes nothing at all.
  MESH_STORE_EXPECT_CODE(s.declare_with({write("web-01", 1)}, {put("deploy/1", "again", 0)}, 3000, 0, std::nullopt),
                         ErrorCode::FailedPrecondition);
  MESH_STORE_EXPECT_CODE(s.declare_with({write("web-01", 0)}, {put("deploy/2", "x", 0)}, 3000, 0, std::nullopt),
                         ErrorCode::FailedPrecondition);
  auto latest = s.latest_revision("web-01");
  ASSERT_TRUE(latest && *latest);
  EXPECT_EQ((*latest)->revision, 1u);
  auto none = s.record("conf", "deploy/2");
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);

  // No node: records alone, no delivery.
  RecordWrite alone = put("deploy/3", "");
  alone.render = [](const DeliveryRecord& d) { return "id " + std::to_string(d.id); };
  auto empty = s.declare_with({}, {alone}, 4000, 0, std::nullopt);
  ASSERT_TRUE(empty) << empty.error().describe();
  EXPECT_EQ(empty->id, 0u);
  rec = s.record("conf", "deploy/3");
  ASSERT_TRUE(rec && *rec);
  EXPECT_EQ((*rec)->value, "id 0");
}

TEST_P(StoreConformanceTest, AStoreOpenedAgainSeesEverything) {
  enrol(*store_, "web-01");
  ASSERT_TRUE(store_->declare({write("web-01")}, 100, 0));
  ASSERT_TRUE(store_->record_apply(report("web-01", 1, "applied", 200, {"file:/etc/a"})));
  ASSERT_TRUE(store_->put_records({put("k", "v")}, 300));
  ASSERT_TRUE(store_->next_sequence("deploy"));
  reopen();
  Store& s = *store_;
  auto n = node(s, "web-01");
  EXPECT_EQ(n.applied_revision, 1u);
  EXPECT_EQ(n.last_contact_ms, 200);
  auto rec = s.record("conf", "k");
  ASSERT_TRUE(rec && *rec);
  EXPECT_EQ((*rec)->value, "v");
  auto seq = s.next_sequence("deploy");
  ASSERT_TRUE(seq);
  EXPECT_EQ(*seq, 2u);
  auto d = s.declare({write("web-01")}, 400, 0);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->id, 2u);
  EXPECT_EQ(d->targets.at(0).revision, 2u);
}

TEST_P(StoreConformanceTest, ASecondInstanceSeesTheFirstsWritesAtOnce) {
  if (!backing_.several_instances) GTEST_SKIP() << "this store cannot be opened twice";
  auto other = backing_.open_store(host_, 1);
  ASSERT_TRUE(other) << "the second instance did not open";
  enrol(*store_, "web-01");
  auto n = other->node("web-01");
  ASSERT_TRUE(n) << n.error().describe();
  ASSERT_TRUE(other->declare({write("web-01")}, 100, 0));
  auto latest = store_->latest_revision("web-01");
  ASSERT_TRUE(latest && *latest);
  EXPECT_EQ((*latest)->revision, 1u);
  ASSERT_TRUE(store_->put_records({put("k", "from 0", 0)}, 200));
  MESH_STORE_EXPECT_CODE(other->put_records({put("k", "from 1", 0)}, 201), ErrorCode::FailedPrecondition);
  auto rec = other->record("conf", "k");
  ASSERT_TRUE(rec && *rec);
  EXPECT_EQ((*rec)->value, "from 0");
}

TEST_P(StoreConformanceTest, TwoInstancesRacingNeverBothWinACompareAndSwap) {
  if (!backing_.several_instances) GTEST_SKIP() << "this store cannot be opened twice";
  auto other = backing_.open_store(host_, 1);
  ASSERT_TRUE(other) << "the second instance did not open";
  enrol(*store_, "web-01");
  constexpr int kRounds = 20;
  std::atomic<int> record_wins[2] = {0, 0};
  std::atomic<int> declare_wins[2] = {0, 0};
  std::vector<std::uint64_t> sequences[2];
  std::vector<std::string> errors[2];
  auto run = [&](int who, Store* st) {
    for (int round = 0; round < kRounds; ++round) {
      // Both read the same version and try to write on it: one wins each round.
      const std::string key = "race/" + std::to_string(round);
      auto w = st->put_records({put(key, "by " + std::to_string(who), 0)}, 1000 + round);
      if (w) ++record_wins[who];
      else if (w.error().code != ErrorCode::FailedPrecondition) errors[who].push_back(w.error().describe());
      auto d = st->declare({write("web-01", static_cast<std::uint64_t>(round))}, 2000 + round, 0);
      if (d) ++declare_wins[who];
      else if (d.error().code != ErrorCode::FailedPrecondition) errors[who].push_back(d.error().describe());
      auto seq = st->next_sequence("race");
      if (seq) sequences[who].push_back(*seq);
      else errors[who].push_back(seq.error().describe());
    }
  };
  std::thread a(run, 0, store_.get());
  std::thread b(run, 1, other.get());
  a.join();
  b.join();
  EXPECT_TRUE(errors[0].empty()) << errors[0].front();
  EXPECT_TRUE(errors[1].empty()) << errors[1].front();
  EXPECT_EQ(record_wins[0] + record_wins[1], kRounds);
  // Each round's expected revision holds for exactly one write: revision r+1 is written once.
  auto h = store_->history("web-01", 1000);
  ASSERT_TRUE(h);
  EXPECT_EQ(static_cast<int>(h->size()), declare_wins[0] + declare_wins[1]);
  for (std::size_t i = 0; i + 1 < h->size(); ++i) EXPECT_EQ((*h)[i].revision, (*h)[i + 1].revision + 1);
  std::vector<std::uint64_t> all = sequences[0];
  all.insert(all.end(), sequences[1].begin(), sequences[1].end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), 2u * kRounds);
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], i + 1) << "a sequence value given twice or skipped";
  // Both instances agree on every record.
  for (int round = 0; round < kRounds; ++round) {
    auto x = store_->record("conf", "race/" + std::to_string(round));
    auto y = other->record("conf", "race/" + std::to_string(round));
    ASSERT_TRUE(x && y && *x && *y);
    EXPECT_EQ((*x)->value, (*y)->value);
    EXPECT_EQ((*x)->version, 1u);
  }
}

#undef MESH_STORE_EXPECT_CODE

}  // namespace mesh::sdk::testing

/// Instantiates every check of the store conformance suite for one store (see the header
/// comment). `suite_name` is an identifier; `make_fn` a function (visible from namespace
/// mesh::sdk::testing) returning a StoreConformance. Use at global namespace scope.
#define MESH_INSTANTIATE_STORE_CONFORMANCE(suite_name, make_fn)                                \
  namespace mesh::sdk::testing {                                                              \
  INSTANTIATE_TEST_SUITE_P(suite_name, StoreConformanceTest,                                  \
                           ::testing::Values(StoreConformanceParam{#suite_name, make_fn}),    \
                           [](const ::testing::TestParamInfo<StoreConformanceParam>& info) {  \
                             return info.param.name;                                          \
                           });                                                                \
  }                                                                                           \
  static_assert(true, "")
