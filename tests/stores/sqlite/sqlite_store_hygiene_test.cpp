// The sqlite store's hygiene: node removal (decision record 37), apply reports pruned by
// retention, what one node may store, the database files' modes, and store errors that are
// retryable (a full disk is not the reporter's fault).
#include <fcntl.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "store_fixture.h"

namespace mesh::stores::sqlite::testing {
namespace {

using sdk::ErrorCode;

class SqliteStoreRemovalTest : public SqliteStoreFixture {
 protected:
  void SetUp() override {
    store_ = opened();
    ASSERT_TRUE(store_);
    enrol(*store_, "web-01", "k1");
    enrol(*store_, "web-02", "k2");
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(store_->declare({write("web-01")}, 100 + i, 0));
    ASSERT_TRUE(store_->record_apply(report("web-01", 3, "applied", 5000, {"file:/a"})));
    ASSERT_TRUE(store_->set_briefing("web-01", "{\"outcome\":\"pass\"}", true));
  }
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SqliteStoreRemovalTest, ARemovedNodeIsNoLongerEnrolledButItsHistoryStays) {
  // An unused token issued before the removal must not enrol the name again.
  ASSERT_TRUE(store_->add_token(token("old", "web-01", "old-secret", 1000, 1'000'000, true)));
  auto removed = store_->remove_node("web-01", 7000, false);
  ASSERT_TRUE(removed) << removed.error().describe();
  EXPECT_EQ(removed->generation, 1u);

  auto nodes = store_->nodes();
  ASSERT_TRUE(nodes);
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ(nodes->front().name, "web-02");
  auto all = store_->all_nodes();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ(all->front().name, "web-01");
  EXPECT_EQ(all->front().removed_at_ms, 7000);
  EXPECT_FALSE(all->back().removed_at_ms);

  auto n = store_->node("web-01");
  ASSERT_FALSE(n);
  EXPECT_EQ(n.error().code, ErrorCode::NotFound);
  EXPECT_NE(n.error().message.find("removed at"), std::string::npos) << n.error().message;

  // Nothing it sends is recorded any more.
  auto rep = store_->record_apply(report("web-01", 3, "failed", 8000));
  ASSERT_FALSE(rep);
  EXPECT_EQ(rep.error().code, ErrorCode::NotFound);
  sdk::DriftReport drift{"web-01", "scan-1", 3, 8000, {}};
  EXPECT_FALSE(store_->record_drift(drift));
  EXPECT_FALSE(store_->set_briefing("web-01", "{}", true));
  EXPECT_FALSE(store_->declare({write("web-01")}, 8000, 0));
  ASSERT_TRUE(store_->touch({sdk::ContactUpdate{"web-01", 9000, 0, "0.1.0", "idle"}}));
  all = store_->all_nodes();
  ASSERT_TRUE(all);
  EXPECT_EQ(all->front().last_contact_ms, 5000) << "a heartbeat of a removed node is not recorded";

  // Its history is readable for audit.
  auto history = store_->history("web-01", 10);
  ASSERT_TRUE(history) << history.error().describe();
  EXPECT_EQ(history->size(), 3u);
  auto applied = store_->apply_report("web-01", 3);
  ASSERT_TRUE(applied && *applied);
  EXPECT_EQ((*applied)->outcome, "applied");

  // Removing it again is refused unless it purges.
  auto again = store_->remove_node("web-01", 7500, false);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::NotFound);
  auto unknown = store_->remove_node("nobody", 7500, false);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::NotFound);

  // The token issued before the removal was revoked by it.
  auto old = store_->enrol(hash_of("old-secret"), "web-01", "k3", 9000);
  ASSERT_FALSE(old);
  EXPECT_EQ(old.error().code, ErrorCode::PermissionDenied);
  EXPECT_NE(old.error().message.find("revoked"), std::string::npos) << old.error().message;
}

TEST_F(SqliteStoreRemovalTest, ANewPlainTokenEnrolsTheNameAgainAsANewIdentity) {
  ASSERT_TRUE(store_->remove_node("web-01", 7000, false));
  ASSERT_TRUE(store_->add_token(token("new", "web-01", "new-secret", 7100)));
  auto back = store_->enrol(hash_of("new-secret"), "web-01", "k9", 8000);
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(back->generation, 2u) << "a new identity: new broker and heartbeat keys";
  EXPECT_EQ(back->public_key, "k9");
  EXPECT_FALSE(back->removed_at_ms);
  EXPECT_EQ(back->applied_revision, 0u);
  EXPECT_EQ(back->last_outcome, "");
  EXPECT_FALSE(back->last_contact_ms);
  EXPECT_TRUE(back->briefing.empty()) << "never briefed as this identity";
  auto owned = store_->owned("web-01");
  ASSERT_TRUE(owned);
  EXPECT_TRUE(owned->empty()) << "the retired machine's recovery copy does not carry over";
  auto latest = store_->latest_revision("web-01");
  ASSERT_TRUE(latest);
  EXPECT_FALSE(*latest) << "the retired identity's declaration is history, not current";
  // An outbox report of the retired machine, re-sent after the name came back, does not count.
  auto stale = store_->record_apply(report("web-01", 2, "applied", 8100, {"file:/old"}));
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(stale.error().message.find("before the node was removed"), std::string::npos) << stale.error().message;
  EXPECT_EQ(store_->node("web-01")->applied_revision, 0u);
  EXPECT_TRUE(store_->owned("web-01")->empty());
  // Revision numbers continue: an old signed declaration is never newer than a new one.
  auto d = store_->declare({write("web-01")}, 9000, 0);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->targets.front().revision, 4u);
  latest = store_->latest_revision("web-01");
  ASSERT_TRUE(latest && *latest);
  EXPECT_EQ((*latest)->revision, 4u);
  auto history = store_->history("web-01", 10);
  ASSERT_TRUE(history);
  EXPECT_EQ(history->size(), 4u);
}

TEST_F(SqliteStoreRemovalTest, PurgeDeletesTheHistoryButKeepsTheRevisionCounter) {
  ASSERT_TRUE(store_->remove_node("web-01", 7000, true));
  auto history = store_->history("web-01", 10);
  ASSERT_TRUE(history);
  EXPECT_TRUE(history->empty());
  auto reports = store_->apply_reports("web-01", 10);
  ASSERT_TRUE(reports);
  EXPECT_TRUE(reports->empty());
  auto owned = store_->owned("web-01");
  ASSERT_TRUE(owned);
  EXPECT_TRUE(owned->empty());
  auto all = store_->all_nodes();
  ASSERT_TRUE(all);
  EXPECT_EQ(all->front().removed_at_ms, 7000);
  EXPECT_EQ(all->front().public_key, "");
  // Purging a removed node again is allowed (nothing left to delete).
  ASSERT_TRUE(store_->remove_node("web-01", 7500, true));

  ASSERT_TRUE(store_->add_token(token("new", "web-01", "new-secret", 7100)));
  ASSERT_TRUE(store_->enrol(hash_of("new-secret"), "web-01", "k9", 8000));
  auto d = store_->declare({write("web-01")}, 9000, 0);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->targets.front().revision, 4u);
}

// --- retention and bounds -------------------------------------------------------------------------

using SqliteStoreBoundsTest = SqliteStoreFixture;

TEST_F(SqliteStoreBoundsTest, ApplyReportsArePrunedWithTheirRevisions) {
  auto store = opened();
  ASSERT_TRUE(store);
  enrol(*store, "web-01");
  for (std::uint64_t rev = 1; rev <= 6; ++rev) {
    ASSERT_TRUE(store->declare({write("web-01")}, 100 + static_cast<std::int64_t>(rev), 2));
    auto r = store->record_apply(report("web-01", rev, "applied", 1000 + static_cast<std::int64_t>(rev),
                                        {"file:/r" + std::to_string(rev)}));
    ASSERT_TRUE(r) << r.error().describe();
    EXPECT_TRUE(*r);
  }
  auto reports = store->apply_reports("web-01", 100);
  ASSERT_TRUE(reports);
  ASSERT_EQ(reports->size(), 2u) << "as many reports as revisions retained";
  EXPECT_EQ(reports->front().revision, 6u);
  EXPECT_EQ(reports->back().revision, 5u);
  RawDb raw(db_path());
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM apply_report_owned"), "2") << "owned lists go with their reports";
  // A late report for a pruned revision is not stored again.
  auto late = store->record_apply(report("web-01", 1, "failed", 9000));
  ASSERT_TRUE(late) << late.error().describe();
  EXPECT_FALSE(*late);
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM apply_reports"), "2");
  auto owned = store->owned("web-01");
  ASSERT_TRUE(owned);
  EXPECT_EQ(*owned, std::vector<std::string>{"file:/r6"}) << "the recovery copy is the newest applied list";
}

TEST_F(SqliteStoreBoundsTest, WhatOneNodeMayStoreIsBoundedWithAnErrorNamingTheNodeAndTheLimit) {
  auto store = opened();
  ASSERT_TRUE(store);
  enrol(*store, "web-01");
  ASSERT_TRUE(store->declare({write("web-01")}, 100, 0));

  std::vector<std::string> owned(100'001);
  for (std::size_t i = 0; i < owned.size(); ++i) owned[i] = "file:/f" + std::to_string(i);
  auto big = store->record_apply(report("web-01", 1, "applied", 1000, owned));
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(big.error().message.find("'web-01'"), std::string::npos) << big.error().message;
  EXPECT_NE(big.error().message.find("100000 resources"), std::string::npos) << big.error().message;
  owned.pop_back();
  auto fits = store->record_apply(report("web-01", 1, "applied", 1000, owned));
  ASSERT_TRUE(fits) << fits.error().describe();

  auto long_id = store->record_apply(report("web-01", 1, "applied", 1000, {"file:/" + std::string(5000, 'x')}));
  ASSERT_FALSE(long_id);
  EXPECT_EQ(long_id.error().code, ErrorCode::InvalidArgument);

  auto briefing = store->set_briefing("web-01", std::string(300 * 1024, ' '), true);
  ASSERT_FALSE(briefing);
  EXPECT_EQ(briefing.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(briefing.error().message.find("'web-01'"), std::string::npos) << briefing.error().message;
  EXPECT_NE(briefing.error().message.find("262144 bytes"), std::string::npos) << briefing.error().message;

  sdk::DriftReport drift{"web-01", "scan-1", 1, 2000, {}};
  drift.items.resize(10'001, sdk::DriftItem{"file:/a", "content differs", "repaired"});
  auto d = store->record_drift(drift);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(d.error().message.find("10000 items"), std::string::npos) << d.error().message;
}

// --- files and errors -------------------------------------------------------------------------------

using SqliteStoreFilesTest = SqliteStoreFixture;

mode_t mode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 07777;
  return st.st_mode & 07777;
}

TEST_F(SqliteStoreFilesTest, TheDatabaseAndItsWalAndShmAreOwnerOnly) {
  const mode_t old_umask = ::umask(022);
  {
    auto store = opened();
    ASSERT_TRUE(store);
    enrol(*store, "web-01");
    ASSERT_TRUE(store->declare({write("web-01")}, 100, 0));
    for (const char* suffix : {"", "-wal", "-shm"}) {
      ASSERT_TRUE(std::filesystem::exists(db_path() + suffix)) << suffix;
      EXPECT_EQ(mode_of(db_path() + suffix), 0600u) << db_path() + suffix;
    }
  }
  // A store file made before this rule (0644) is tightened when it is opened.
  const std::string old = (dir_.path() / "old.db").string();
  const int fd = ::creat(old.c_str(), 0644);  // an empty file is an empty database
  ASSERT_GE(fd, 0);
  ::close(fd);
  ::chmod(old.c_str(), 0644);
  {
    auto store = opened(old);
    ASSERT_TRUE(store);
    for (const char* suffix : {"", "-wal", "-shm"}) {
      if (std::filesystem::exists(old + suffix)) {
        EXPECT_EQ(mode_of(old + suffix), 0600u) << old + suffix;
      }
    }
  }
  ::umask(old_umask);
}

// Two control planes started together on one new file: switching it to WAL takes an exclusive
// lock SQLite's busy handler does not wait for, so one of them failed "database is locked" (seen
// in CI). Every one of several processes opening one new file at once opens it. Processes, not
// threads: SQLite's file locks do not conflict within one process.
TEST_F(SqliteStoreFilesTest, ProcessesOpeningOneNewFileAtOnceAllOpen) {
  constexpr int kRounds = 20;
  constexpr int kStores = 4;
  for (int round = 0; round < kRounds; ++round) {
    const std::string path = (dir_.path() / ("race-" + std::to_string(round) + ".db")).string();
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    std::vector<pid_t> children;
    for (int i = 0; i < kStores; ++i) {
      const pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        ::close(go[1]);
        char c;
        (void)::read(go[0], &c, 1);  // all start together: the parent closes the pipe
        auto store = configured(path);
        auto r = store->open();
        if (!r) ::fprintf(stderr, "round %d: %s\n", round, r.error().describe().c_str());
        ::_exit(r ? 0 : 1);
      }
      children.push_back(pid);
    }
    ::close(go[0]);
    ::close(go[1]);
    for (pid_t pid : children) {
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, 0), pid);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round << ": a store did not open";
    }
  }
}

TEST_F(SqliteStoreFilesTest, AStorePathThatIsASymbolicLinkIsRefusedAndItsTargetUntouched) {
  // Found by an attacker: a link where the store's file goes made mesh-control chmod a root
  // file 0600 (a link to it), or create a database 0644 elsewhere (a dangling link).
  const auto victim = dir_.path() / "victim";
  {
    std::ofstream(victim) << "not a database\n";
  }
  ::chmod(victim.c_str(), 0644);
  const std::string link = (dir_.path() / "y.db").string();
  std::filesystem::create_symlink(victim, link);
  auto store = configured(link);
  auto r = store->open();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::PermissionDenied);
  EXPECT_NE(r.error().message.find("symbolic link"), std::string::npos) << r.error().message;
  EXPECT_EQ(mode_of(victim.string()), 0644u);
  const std::string dangling = (dir_.path() / "z.db").string();
  std::filesystem::create_symlink(dir_.path() / "elsewhere.db", dangling);
  auto store2 = configured(dangling);
  EXPECT_FALSE(store2->open());
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "elsewhere.db"));
}

TEST_F(SqliteStoreFilesTest, AFullDatabaseIsARetryableErrorAndTheWriteSucceedsOnceThereIsRoom) {
  auto store = configured();
  {
    // The first open makes the schema at full size; the second sets a limit it already meets.
    auto r = store->open();
    ASSERT_TRUE(r) << r.error().describe();
    enrol(*store, "web-01");
    ASSERT_TRUE(store->declare({write("web-01")}, 100, 0));
    store.reset();
  }
  const auto size = static_cast<std::int64_t>(std::filesystem::file_size(db_path()));
  auto full = std::make_unique<SqliteStore>(host_);
  sdk::Value cfg = config(db_path());
  cfg.set("max_size", size);
  ASSERT_TRUE(full->configure(cfg));
  ASSERT_TRUE(full->open());
  std::vector<std::string> owned;
  for (int i = 0; i < 2000; ++i) owned.push_back("file:/srv/data/" + std::to_string(i) + std::string(40, 'x'));
  auto r = full->record_apply(report("web-01", 1, "applied", 1000, owned));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Unavailable) << r.error().describe();
  EXPECT_NE(r.error().message.find("retryable"), std::string::npos) << r.error().message;
  auto none = full->apply_report("web-01", 1);
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none) << "nothing of the failed write was kept";
  full.reset();

  auto roomy = opened();  // space returns
  ASSERT_TRUE(roomy);
  auto again = roomy->record_apply(report("web-01", 1, "applied", 1000, owned));
  ASSERT_TRUE(again) << again.error().describe();
  EXPECT_TRUE(*again);
}

TEST_F(SqliteStoreFilesTest, AnOpenErrorNamesTheOsError) {
  // The WAL file's name is taken by a directory: SQLite says only "unable to open database
  // file"; the OS says why.
  std::filesystem::create_directory(db_path() + "-wal");
  auto store = configured();
  auto r = store->open();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find(db_path()), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("Is a directory"), std::string::npos) << r.error().message;
}

TEST_F(SqliteStoreBoundsTest, AFailureWithAVeryLongReasonIsStoredCutNeverRefused) {
  auto store = opened();
  ASSERT_TRUE(store);
  enrol(*store, "web-01");
  ASSERT_TRUE(store->declare({write("web-01")}, 100, 0));
  auto r = report("web-01", 1, "failed", 1000);
  r.resource = "package:nginx";
  r.reason = "E: " + std::string(900 * 1024, 'z');
  auto rec = store->record_apply(r);
  ASSERT_TRUE(rec) << rec.error().describe();
  EXPECT_TRUE(*rec);
  auto got = store->apply_report("web-01", 1);
  ASSERT_TRUE(got && *got);
  EXPECT_EQ((*got)->outcome, "failed");
  EXPECT_LE((*got)->reason.size(), 64u * 1024);
  EXPECT_EQ((*got)->reason.rfind("E: zzz", 0), 0u);
  EXPECT_NE((*got)->reason.find("(921603 bytes, cut to"), std::string::npos) << (*got)->reason.substr(65000);
}

}  // namespace
}  // namespace mesh::stores::sqlite::testing
