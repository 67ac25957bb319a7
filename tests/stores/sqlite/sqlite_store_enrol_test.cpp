// The sqlite store: tokens and enrolment, including concurrent use of one token.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "store_fixture.h"

namespace mesh::stores::sqlite::testing {
namespace {

using sdk::ErrorCode;

class SqliteStoreEnrolTest : public SqliteStoreFixture {
 protected:
  void SetUp() override {
    store_ = opened();
    ASSERT_TRUE(store_);
  }

  /// Expects enrol to be refused with PermissionDenied whose message contains `reason`, and
  /// never the secret or its hash.
  void expect_refused(const std::string& secret, const std::string& node, const std::string& reason,
                      std::int64_t now_ms = 2000) {
    auto r = store_->enrol(hash_of(secret), node, "key", now_ms);
    ASSERT_FALSE(r) << "enrolment of " << node << " succeeded";
    EXPECT_EQ(r.error().code, ErrorCode::PermissionDenied);
    EXPECT_NE(r.error().message.find(reason), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.find(secret), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.find(hash_of(secret)), std::string::npos) << r.error().message;
  }

  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SqliteStoreEnrolTest, EnrolCreatesNodeAndUsesToken) {
  ASSERT_TRUE(store_->add_token(token("t1", "web-01", "s1", 1000, 10'000)));
  auto n = store_->enrol(hash_of("s1"), "web-01", "ab12", 2000);
  ASSERT_TRUE(n) << n.error().describe();
  EXPECT_EQ(n->name, "web-01");
  EXPECT_EQ(n->public_key, "ab12");
  EXPECT_EQ(n->generation, 1u);
  EXPECT_EQ(n->enrolled_at_ms, 2000);
  EXPECT_FALSE(n->last_contact_ms);
  EXPECT_EQ(n->applied_revision, 0u);
  EXPECT_EQ(n->last_outcome, "");
  EXPECT_TRUE(n->eligible);
  auto usable = store_->tokens(2000);
  ASSERT_TRUE(usable);
  EXPECT_TRUE(usable->empty());
  RawDb raw(db_path());
  EXPECT_EQ(raw.scalar("SELECT used_at_ms FROM tokens WHERE id = 't1'"), "2000");
}

TEST_F(SqliteStoreEnrolTest, UnknownTokenIsRefused) {
  expect_refused("never-issued", "web-01", "unknown token");
}

TEST_F(SqliteStoreEnrolTest, UsedTokenIsRefused) {
  ASSERT_TRUE(store_->add_token(token("t1", "web-01", "s1")));
  ASSERT_TRUE(store_->enrol(hash_of("s1"), "web-01", "k", 2000));
  // web-01 is enrolled now: the next token must allow re-enrolment.
  expect_refused("s1", "web-01", "token 't1' was already used; issue a new one with `mesh token issue web-01 --reenrol`");
}

TEST_F(SqliteStoreEnrolTest, RevokedTokenIsRefused) {
  ASSERT_TRUE(store_->add_token(token("t1", "web-01", "s1")));
  ASSERT_TRUE(store_->revoke_token("t1"));
  expect_refused("s1", "web-01", "token 't1' was revoked");
  auto n = store_->node("web-01");
  ASSERT_FALSE(n);
  EXPECT_EQ(n.error().code, ErrorCode::NotFound);
}

TEST_F(SqliteStoreEnrolTest, ExpiredTokenIsRefused) {
  ASSERT_TRUE(store_->add_token(token("t1", "web-01", "s1", 1000, 5000)));
  // When, in UTC, and what to do next.
  expect_refused("s1", "web-01", "token 't1' expired at 1970-01-01T00:00:05Z; issue a new one with `mesh token issue web-01`",
                 5000);
  expect_refused("s1", "web-01", "token 't1' expired at 1970-01-01T00:00:05Z", 9000);
  EXPECT_TRUE(store_->enrol(hash_of("s1"), "web-01", "k", 4999));
}

TEST_F(SqliteStoreEnrolTest, TokenForAnotherNodeIsRefusedAndStaysUsable) {
  ASSERT_TRUE(store_->add_token(token("t1", "web-01", "s1")));
  expect_refused("s1", "web-02", "token 't1' was issued for another node");
  auto usable = store_->tokens(2000);
  ASSERT_TRUE(usable);
  ASSERT_EQ(usable->size(), 1u);
  EXPECT_TRUE(store_->enrol(hash_of("s1"), "web-01", "k", 2000));
}

TEST_F(SqliteStoreEnrolTest, AlreadyEnrolledNodeNeedsReenrolToken) {
  enrol(*store_, "web-01", "old-key");
  ASSERT_TRUE(store_->add_token(token("t2", "web-01", "s2", 1000, 10'000, false)));
  expect_refused("s2", "web-01", "already enrolled");
  auto n = store_->node("web-01");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->public_key, "old-key");
  EXPECT_EQ(n->generation, 1u);
  auto usable = store_->tokens(2000);
  ASSERT_TRUE(usable);
  ASSERT_EQ(usable->size(), 1u);  // the refused attempt did not use the token
}

TEST_F(SqliteStoreEnrolTest, ReenrolmentReplacesKeyRaisesGenerationKeepsDataButNotWhatTheOldIdentityReported) {
  enrol(*store_, "web-01", "old-key");
  ASSERT_TRUE(store_->declare({write("web-01")}, 3000, 0));
  ASSERT_TRUE(store_->record_apply(report("web-01", 1, "applied", 3500, {"file:/etc/motd"})));
  ASSERT_TRUE(store_->set_briefing("web-01", "{}", true));
  ASSERT_TRUE(store_->add_token(token("t2", "web-01", "s2", 1000, 10'000, true)));
  auto n = store_->enrol(hash_of("s2"), "web-01", "new-key", 4000);
  ASSERT_TRUE(n) << n.error().describe();
  EXPECT_EQ(n->public_key, "new-key");
  EXPECT_EQ(n->generation, 2u);
  EXPECT_EQ(n->enrolled_at_ms, 4000);
  // What the revoked identity reported no longer counts (its key may have been stolen).
  EXPECT_EQ(n->applied_revision, 0u);
  EXPECT_EQ(n->last_outcome, "");
  EXPECT_EQ(n->briefing, "{}");
  auto latest = store_->latest_revision("web-01");
  ASSERT_TRUE(latest && *latest);
  EXPECT_EQ((*latest)->revision, 1u);
  auto owned = store_->owned("web-01");
  ASSERT_TRUE(owned);
  EXPECT_TRUE(owned->empty()) << "the recovery copy is cleared of the revoked identity's reports";
  auto reports = store_->apply_reports("web-01", 10);
  ASSERT_TRUE(reports);
  EXPECT_EQ(reports->size(), 0u);
  auto d = store_->delivery(1);
  ASSERT_TRUE(d);
  // The next declaration continues the numbering.
  auto next = store_->declare({write("web-01")}, 5000, 0);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->targets[0].revision, 2u);
}

TEST_F(SqliteStoreEnrolTest, ReenrolTokenAlsoEnrolsANewNode) {
  ASSERT_TRUE(store_->add_token(token("t1", "web-01", "s1", 1000, 10'000, true)));
  auto n = store_->enrol(hash_of("s1"), "web-01", "k", 2000);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->generation, 1u);
}

TEST_F(SqliteStoreEnrolTest, EightThreadsOneTokenExactlyOneWins) {
  ASSERT_TRUE(store_->add_token(token("t1", "web-01", "s1")));
  std::atomic<int> wins{0}, refused{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      auto r = store_->enrol(hash_of("s1"), "web-01", "key-" + std::to_string(i), 2000);
      if (r)
        ++wins;
      else if (r.error().code == ErrorCode::PermissionDenied)
        ++refused;
      else
        ++other;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(refused.load(), 7);
  EXPECT_EQ(other.load(), 0);
  auto n = store_->node("web-01");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->generation, 1u);
}

TEST_F(SqliteStoreEnrolTest, TwoInstancesOnOneFileOneTokenExactlyOneWins) {
  // Two connections to one file: what two control-plane processes would do.
  auto second = opened();
  ASSERT_TRUE(second);
  for (int round = 0; round < 5; ++round) {
    const std::string node = "node-" + std::to_string(round);
    const std::string secret = "secret-" + std::to_string(round);
    ASSERT_TRUE(store_->add_token(
        token("t" + std::to_string(round), node, secret, 1000, 10'000, /*reenrol=*/true)));
    std::atomic<int> wins{0}, refused{0}, other{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i)
      threads.emplace_back([&, i] {
        SqliteStore& s = i % 2 ? *store_ : *second;
        auto r = s.enrol(hash_of(secret), node, "key-" + std::to_string(i), 2000);
        if (r)
          ++wins;
        else if (r.error().code == ErrorCode::PermissionDenied)
          ++refused;
        else
          ++other;
      });
    for (auto& t : threads) t.join();
    EXPECT_EQ(wins.load(), 1) << "round " << round;
    EXPECT_EQ(refused.load(), 7) << "round " << round;
    EXPECT_EQ(other.load(), 0) << "round " << round;
    auto n = second->node(node);
    ASSERT_TRUE(n);
    // A re-enrol token used twice would have raised the generation to 2.
    EXPECT_EQ(n->generation, 1u);
  }
}

TEST_F(SqliteStoreEnrolTest, SixProcessesOneTokenExactlyOneWins) {
  // Real processes: SQLite's file locks between processes, not only between connections.
  ASSERT_TRUE(store_->add_token(token("t1", "web-01", "s1", 1000, 10'000, true)));
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < 6; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: its own store on the same file; never returns into the test framework.
      ::close(go[1]);
      SqliteStore store(host_);
      if (!store.configure(config(db_path())) || !store.open()) ::_exit(3);
      char c;
      if (::read(go[0], &c, 1) != 0) ::_exit(4);  // blocks until the parent closes the pipe
      auto r = store.enrol(hash_of("s1"), "web-01", "key-" + std::to_string(i), 2000);
      ::_exit(r ? 0 : r.error().code == ErrorCode::PermissionDenied ? 1 : 2);
    }
    children.push_back(pid);
  }
  ::close(go[0]);
  ::close(go[1]);  // start them all at once
  int wins = 0, refused = 0, other = 0;
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    const int code = WEXITSTATUS(status);
    (code == 0 ? wins : code == 1 ? refused : other)++;
  }
  EXPECT_EQ(wins, 1);
  EXPECT_EQ(refused, 5);
  EXPECT_EQ(other, 0);
  auto n = store_->node("web-01");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->generation, 1u);
}

TEST_F(SqliteStoreEnrolTest, AddTokenRejectsDuplicateIdOrHashWithoutNamingTheHash) {
  ASSERT_TRUE(store_->add_token(token("t1", "web-01", "s1")));
  auto same_id = store_->add_token(token("t1", "web-02", "s2"));
  ASSERT_FALSE(same_id);
  EXPECT_EQ(same_id.error().code, ErrorCode::AlreadyExists);
  EXPECT_NE(same_id.error().message.find("t1"), std::string::npos);
  auto same_hash = store_->add_token(token("t2", "web-02", "s1"));
  ASSERT_FALSE(same_hash);
  EXPECT_EQ(same_hash.error().code, ErrorCode::AlreadyExists);
  EXPECT_NE(same_hash.error().message.find("t2"), std::string::npos);
  EXPECT_EQ(same_hash.error().message.find(hash_of("s1")), std::string::npos);
  auto empty = store_->add_token(token("", "web-02", "s3"));
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, ErrorCode::InvalidArgument);
}

TEST_F(SqliteStoreEnrolTest, TokensListsOnlyUsableOldestFirst) {
  ASSERT_TRUE(store_->add_token(token("newer", "a", "s1", 300, 10'000)));
  ASSERT_TRUE(store_->add_token(token("older", "b", "s2", 100, 10'000)));
  ASSERT_TRUE(store_->add_token(token("expired", "c", "s3", 50, 1500)));
  ASSERT_TRUE(store_->add_token(token("revoked", "d", "s4", 60, 10'000)));
  ASSERT_TRUE(store_->add_token(token("used", "e", "s5", 70, 10'000)));
  ASSERT_TRUE(store_->revoke_token("revoked"));
  ASSERT_TRUE(store_->enrol(hash_of("s5"), "e", "k", 1000));
  auto t = store_->tokens(2000);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].id, "older");
  EXPECT_EQ((*t)[0].node, "b");
  EXPECT_EQ((*t)[0].hash, hash_of("s2"));
  EXPECT_EQ((*t)[0].created_at_ms, 100);
  EXPECT_EQ((*t)[0].expires_at_ms, 10'000);
  EXPECT_FALSE((*t)[0].used_at_ms);
  EXPECT_FALSE((*t)[0].revoked);
  EXPECT_EQ((*t)[1].id, "newer");
  auto early = store_->tokens(1000);
  ASSERT_TRUE(early);
  EXPECT_EQ(early->size(), 3u);  // "expired" is still usable at 1000
}

TEST_F(SqliteStoreEnrolTest, RevokeTokenIsIdempotentAndUnknownIsNotFound) {
  ASSERT_TRUE(store_->add_token(token("t1", "web-01", "s1")));
  EXPECT_TRUE(store_->revoke_token("t1"));
  EXPECT_TRUE(store_->revoke_token("t1"));
  auto r = store_->revoke_token("nope");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::NotFound);
  EXPECT_NE(r.error().message.find("nope"), std::string::npos);
}

}  // namespace
}  // namespace mesh::stores::sqlite::testing
