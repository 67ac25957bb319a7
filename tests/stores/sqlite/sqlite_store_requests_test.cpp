// The sqlite store: signed requests remembered across reopening (replays after a restart), a
// declaration's answer written in its own transaction, and the heartbeat order per identity.
#include "store_fixture.h"

namespace mesh::stores::sqlite::testing {
namespace {

using sdk::ErrorCode;

class SqliteStoreRequestsTest : public SqliteStoreFixture {
 protected:
  void SetUp() override {
    store_ = opened();
    ASSERT_TRUE(store_);
    ASSERT_TRUE(store_->add_token(token("t1", "web-01", "s1")));
    ASSERT_TRUE(store_->enrol(hash_of("s1"), "web-01", "ab12", 2000));
  }
  static sdk::RequestRecord request(const std::string& nonce, std::int64_t expires_at_ms = 10'000) {
    return sdk::RequestRecord{"operator:admin", nonce, "digest-" + nonce, expires_at_ms, std::nullopt};
  }
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SqliteStoreRequestsTest, ARequestIsFreshOnceAlsoAfterReopeningUntilItExpires) {
  auto first = store_->remember_request(request("n-1"), 1000);
  ASSERT_TRUE(first) << first.error().describe();
  EXPECT_FALSE(*first) << "fresh";
  auto again = store_->remember_request(request("n-1"), 1001);
  ASSERT_TRUE(again);
  ASSERT_TRUE(*again) << "a replay";
  EXPECT_EQ((*again)->digest, "digest-n-1");
  EXPECT_FALSE((*again)->answer);

  store_.reset();
  store_ = opened();
  ASSERT_TRUE(store_);
  auto reopened = store_->remember_request(request("n-1"), 2000);
  ASSERT_TRUE(reopened);
  EXPECT_TRUE(*reopened) << "remembered across a restart";
  // Past its expiry it is forgotten (pruned at the next insert).
  auto later = store_->remember_request(request("n-2", 30'000), 10'000);
  ASSERT_TRUE(later);
  EXPECT_FALSE(*later);
  RawDb raw(db_path());
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM requests"), "1") << "n-1 was pruned";
  EXPECT_EQ(store_->remember_request(sdk::RequestRecord{}, 1).error().code, ErrorCode::InvalidArgument);
}

TEST_F(SqliteStoreRequestsTest, ADeclarationAndItsAnswerAreWrittenTogether) {
  ASSERT_TRUE(store_->remember_request(request("n-1"), 1000));
  sdk::DeclarationWrite w{"web-01", [](std::uint64_t rev) { return "{\"revision\":" + std::to_string(rev) + "}"; }};
  sdk::RequestAnswer a{"operator:admin", "n-1",
                       [](const sdk::DeliveryRecord& d) { return "delivery " + std::to_string(d.id); }};
  auto d = store_->declare_answered({w}, 1000, 50, a);
  ASSERT_TRUE(d) << d.error().describe();
  auto kept = store_->remember_request(request("n-1"), 1001);
  ASSERT_TRUE(kept && *kept);
  ASSERT_TRUE((*kept)->answer);
  EXPECT_EQ(*(*kept)->answer, "delivery " + std::to_string(d->id));

  // Not remembered: nothing is written at all (no revision without its answer).
  sdk::RequestAnswer unknown{"operator:admin", "never", a.render};
  auto refused = store_->declare_answered({w}, 1000, 50, unknown);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::NotFound);
  auto history = store_->history("web-01", 10);
  ASSERT_TRUE(history);
  EXPECT_EQ(history->size(), 1u);
  EXPECT_EQ(store_->answer_request("operator:admin", "never", "x").error().code, ErrorCode::NotFound);
  ASSERT_TRUE(store_->answer_request("operator:admin", "n-1", "refused"));
  EXPECT_EQ(*(*store_->remember_request(request("n-1"), 1002))->answer, "refused");
}

TEST_F(SqliteStoreRequestsTest, TheNewestHeartbeatOfTheCurrentIdentityIsKept) {
  sdk::ContactUpdate u{"web-01", 5000, 0, "0.1.0", "idle", 4000, 1};
  ASSERT_TRUE(store_->touch({u}));
  auto n = store_->node("web-01");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->heartbeat_ms, 4000);
  EXPECT_EQ(n->heartbeat_generation, 1u);
  u.heartbeat_ms = 3000;  // older: not taken
  ASSERT_TRUE(store_->touch({u}));
  EXPECT_EQ(store_->node("web-01")->heartbeat_ms, 4000);
  u.heartbeat_ms = 9000;
  u.generation = 7;  // not the node's identity: not taken
  ASSERT_TRUE(store_->touch({u}));
  EXPECT_EQ(store_->node("web-01")->heartbeat_ms, 4000);
}

}  // namespace
}  // namespace mesh::stores::sqlite::testing
