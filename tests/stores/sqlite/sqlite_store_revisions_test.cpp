// The sqlite store: a heartbeat whose applied revision is above the node's revision counter raises
// the counter (decision record 191) — a store restored from a backup numbers the next revision
// above what the host applied — and only as far as that: never down, never for another identity,
// never beyond 2^53 - 1. Revisions below the gap stay, counted by `retain`.
#include "store_fixture.h"

namespace mesh::stores::sqlite::testing {
namespace {

using sdk::ErrorCode;

class SqliteStoreRevisionTest : public SqliteStoreFixture {
 protected:
  void SetUp() override {
    store_ = opened();
    ASSERT_TRUE(store_);
    enrol(*store_, "web-01");
  }
  sdk::NodeRecord node() {
    auto n = store_->node("web-01");
    EXPECT_TRUE(n) << n.error().describe();
    return n ? *n : sdk::NodeRecord{};
  }
  /// A heartbeat batch of one: web-01 says it applied `applied`, verified with `generation`.
  void heartbeat(std::uint64_t applied, std::uint64_t generation, std::int64_t at_ms = 5000) {
    sdk::ContactUpdate u;
    u.node = "web-01";
    u.at_ms = at_ms;
    u.applied_revision = applied;
    u.host_state = "idle";
    u.heartbeat_ms = at_ms;
    u.generation = generation;
    auto ok = store_->touch({u});
    ASSERT_TRUE(ok) << ok.error().describe();
  }
  /// declare_with of one node with the compare-and-swap `expected`; returns the revision written.
  sdk::Result<std::uint64_t> declare(std::optional<std::uint64_t> expected, std::uint32_t retain = 50) {
    sdk::DeclarationWrite w = write("web-01");
    w.expected_revision = expected;
    MESH_TRY(d, store_->declare_with({w}, {}, 6000, retain, std::nullopt));
    return d.targets.at(0).revision;
  }
  std::uint64_t latest() {
    auto l = store_->latest_revision("web-01");
    EXPECT_TRUE(l) << l.error().describe();
    return l && *l ? (*l)->revision : 0;
  }
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SqliteStoreRevisionTest, AHeartbeatAboveTheCounterNumbersTheNextRevisionAboveIt) {
  ASSERT_EQ(*declare(0), 1u);
  // The host applied revision 7 of a store this one was restored from a backup of.
  heartbeat(7, node().generation);
  EXPECT_EQ(node().declared_revision, 1u) << "declared is the newest revision stored, not the counter";
  EXPECT_EQ(node().applied_revision, 0u) << "a heartbeat never moves applied_revision (reports do)";
  EXPECT_EQ(latest(), 1u);
  // The compare-and-swap is on the newest revision, as latest_revision() reports it.
  auto stale = declare(7);
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, ErrorCode::FailedPrecondition);
  auto next = declare(1);
  ASSERT_TRUE(next) << next.error().describe();
  EXPECT_EQ(*next, 8u);
  EXPECT_EQ(node().declared_revision, 8u);
  EXPECT_EQ(latest(), 8u);
  // Revision 1 is still history, and a report for the new revision counts.
  EXPECT_TRUE(store_->revision("web-01", 1));
  auto rec = store_->record_apply(report("web-01", 8, "applied", 7000));
  ASSERT_TRUE(rec) << rec.error().describe();
  EXPECT_TRUE(*rec);
  EXPECT_EQ(node().applied_revision, 8u);
}

TEST_F(SqliteStoreRevisionTest, ANodeWithNoRevisionYetStartsAboveWhatItApplied) {
  // A node enrolled again (or enrolled anew) on a state directory that applied revision 5 of a
  // store that is gone: its first revision here is 6, and nothing is shown as declared before it.
  heartbeat(5, node().generation);
  EXPECT_EQ(node().declared_revision, 0u);
  EXPECT_EQ(latest(), 0u);
  auto first = declare(0);
  ASSERT_TRUE(first) << first.error().describe();
  EXPECT_EQ(*first, 6u);
}

TEST_F(SqliteStoreRevisionTest, TheCounterIsNeverLoweredNorRaisedByAnotherIdentityOrBeyondTheBound) {
  ASSERT_EQ(*declare(0), 1u);
  ASSERT_EQ(*declare(1), 2u);
  ASSERT_EQ(*declare(2), 3u);
  const std::uint64_t generation = node().generation;
  heartbeat(1, generation);   // behind: nothing moves
  heartbeat(0, generation);   // a host that applied nothing
  heartbeat(40, generation + 1);  // verified with a generation that is not the node's current one
  heartbeat(40, 0);               // no generation recorded
  heartbeat(std::uint64_t{1} << 53, generation);   // beyond 2^53 - 1
  heartbeat(~std::uint64_t{0}, generation);
  auto next = declare(3);
  ASSERT_TRUE(next) << next.error().describe();
  EXPECT_EQ(*next, 4u);
  // At the bound itself it is taken; the numbers still fit (int64).
  heartbeat((std::uint64_t{1} << 53) - 1, generation);
  next = declare(4);
  ASSERT_TRUE(next) << next.error().describe();
  EXPECT_EQ(*next, std::uint64_t{1} << 53);
}

TEST_F(SqliteStoreRevisionTest, ARemovedNodesHeartbeatRaisesNothing) {
  ASSERT_EQ(*declare(0), 1u);
  const std::uint64_t generation = node().generation;
  ASSERT_TRUE(store_->remove_node("web-01", 4000, false));
  heartbeat(9, generation);
  auto all = store_->all_nodes();
  ASSERT_TRUE(all) << all.error().describe();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].declared_revision, 1u);
  // Enrolled again: its numbers continue from the counter, which the heartbeat did not move.
  ASSERT_TRUE(store_->add_token(token("tok-back", "web-01", "back")));
  ASSERT_TRUE(store_->enrol(hash_of("back"), "web-01", "cc", 4500));
  auto next = declare(0);
  ASSERT_TRUE(next) << next.error().describe();
  EXPECT_EQ(*next, 2u);
}

TEST_F(SqliteStoreRevisionTest, RetainCountsRevisionsSoAGapKeepsThoseBeforeIt) {
  ASSERT_EQ(*declare(0, 3), 1u);
  ASSERT_EQ(*declare(1, 3), 2u);
  heartbeat(100, node().generation);
  ASSERT_EQ(*declare(2, 3), 101u);
  // retain 3: revisions 1, 2 and 101 are the newest three, whatever their numbers.
  EXPECT_TRUE(store_->revision("web-01", 1)) << "a gap in the numbers pruned a revision inside retain";
  EXPECT_TRUE(store_->revision("web-01", 2));
  ASSERT_EQ(*declare(101, 3), 102u);
  EXPECT_FALSE(store_->revision("web-01", 1)) << "the fourth newest is pruned";
  EXPECT_TRUE(store_->revision("web-01", 2));
  ASSERT_EQ(*declare(102, 3), 103u);
  ASSERT_EQ(*declare(103, 3), 104u);
  auto h = store_->history("web-01", 10);
  ASSERT_TRUE(h) << h.error().describe();
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ((*h)[2].revision, 102u);
}

}  // namespace
}  // namespace mesh::stores::sqlite::testing
