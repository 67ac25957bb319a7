// Group commit of nonces (core/control/src/nonce_batcher.h, decision record 119) on the real
// `sqlite` store and a real SQLite file: nonces that arrive while a write runs go together into
// the next one; each gets its own result only once the write holding it is committed (visible to
// another connection); a nonce remembered by a batch is a replay after the store is opened again
// (a restart) and for another store on the same file (another control plane); a store failure
// makes no nonce of its batch fresh.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nonce_batcher.h"
#include "mesh/sdk/logger.h"
#include "mesh/sdk/plugin.h"
#include "sqlite_store.h"

namespace mesh::control::detail {
namespace {

namespace fs = std::filesystem;
using sdk::ErrorCode;

class Folder {
 public:
  Folder() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/mesh-nonce-batcher-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~Folder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

/// A second connection to the store's file, as another process would have.
class Raw {
 public:
  explicit Raw(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK)
      throw std::runtime_error("cannot open " + path);
    sqlite3_busy_timeout(db_, 10000);
  }
  ~Raw() { sqlite3_close_v2(db_); }
  int exec(const std::string& sql) { return sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr); }
  int count(const std::string& nonce) {
    sqlite3_stmt* st = nullptr;
    int n = -1;
    if (sqlite3_prepare_v2(db_, "SELECT count(*) FROM requests WHERE nonce = ?1", -1, &st, nullptr) == SQLITE_OK) {
      sqlite3_bind_text(st, 1, nonce.c_str(), -1, SQLITE_TRANSIENT);
      if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    return n;
  }

 private:
  sqlite3* db_ = nullptr;
};

sdk::RequestRecord request(const std::string& nonce, const std::string& signer = "node:web-01") {
  return sdk::RequestRecord{signer, nonce, "digest-" + nonce, 100'000, std::nullopt};
}

struct Answer {
  std::string nonce;
  NonceResult result = std::optional<sdk::RequestRecord>();
  int rows_seen = -1;  // rows of the nonce another connection saw when it was answered
};

class NonceBatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.logger = &logger_;
    host_.role = "control";
    store_ = open_store();
    ASSERT_TRUE(store_);
  }

  std::shared_ptr<sdk::Store> open_store() {
    auto s = std::make_shared<stores::sqlite::SqliteStore>(host_);
    sdk::Value config = sdk::Value::object();
    config.set("path", db_path());
    if (!s->configure(config) || !s->open()) return nullptr;
    return s;
  }

  std::string db_path() const { return (dir_.path() / "mesh.db").string(); }

  Folder dir_;
  sdk::NullLogger logger_;
  sdk::HostContext host_;
  std::shared_ptr<sdk::Store> store_;
};

TEST_F(NonceBatcherTest, NoncesArrivingDuringAWriteGoInTheNextAndEachIsAnsweredOnlyOnceCommitted) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Answer> answers;
  Raw reader(db_path());
  NonceBatcher batcher(store_, MESH_SDK_ABI_MINOR);
  auto submit = [&](sdk::RequestRecord r) {
    const std::string nonce = r.nonce;
    batcher.submit(PendingNonce{std::move(r), 1000, [&, nonce](NonceResult&& result) {
                                  Answer a{nonce, std::move(result), reader.count(nonce)};
                                  std::lock_guard lock(mu);
                                  answers.push_back(std::move(a));
                                  cv.notify_all();
                                }});
  };

  // Another connection holds the write lock: the first batch waits in the store.
  Raw blocker(db_path());
  ASSERT_EQ(blocker.exec("BEGIN IMMEDIATE"), SQLITE_OK);
  submit(request("nonce-0000000000000001"));
  for (int i = 0; i < 500 && batcher.waiting() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(batcher.waiting(), 0u) << "the committer took the first nonce";
  submit(request("nonce-0000000000000002"));
  submit(request("nonce-0000000000000003"));
  submit(request("nonce-0000000000000002"));  // the same nonce twice in one batch: a replay
  submit(request(""));                        // refused alone
  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(answers.empty()) << "nothing is answered before its write";
  }
  ASSERT_EQ(blocker.exec("COMMIT"), SQLITE_OK);
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return answers.size() == 5; }));
  }
  batcher.drain();
  EXPECT_EQ(batcher.batches(), 2u) << "the four that arrived during the first write went in one";
  EXPECT_EQ(batcher.nonces(), 5u);

  ASSERT_EQ(answers.size(), 5u);
  for (int i : {0, 1, 2}) {
    ASSERT_TRUE(answers[i].result) << answers[i].result.error().describe();
    EXPECT_FALSE(*answers[i].result) << answers[i].nonce << " is fresh";
    EXPECT_EQ(answers[i].rows_seen, 1) << answers[i].nonce << ": answered only once committed";
  }
  ASSERT_TRUE(answers[3].result) << answers[3].result.error().describe();
  ASSERT_TRUE(*answers[3].result) << "the second copy of a nonce in one batch is a replay";
  EXPECT_EQ((*answers[3].result)->digest, "digest-nonce-0000000000000002");
  ASSERT_FALSE(answers[4].result);
  EXPECT_EQ(answers[4].result.error().code, ErrorCode::InvalidArgument);
}

TEST_F(NonceBatcherTest, ANonceOfABatchIsAReplayAfterARestartAndForAnotherControlPlaneOnTheSameFile) {
  std::vector<std::string> nonces;
  {
    NonceBatcher batcher(store_, MESH_SDK_ABI_MINOR);
    std::vector<std::thread> senders;
    std::mutex mu;
    std::vector<NonceResult> results;
    for (int t = 0; t < 4; ++t)
      senders.emplace_back([&, t] {
        for (int i = 0; i < 50; ++i) {
          auto r = batcher.remember(request("nonce-" + std::to_string(t) + "-" + std::to_string(1000 + i)), 1000);
          std::lock_guard lock(mu);
          results.push_back(std::move(r));
        }
      });
    for (auto& s : senders) s.join();
    ASSERT_EQ(results.size(), 200u);
    for (const auto& r : results) {
      ASSERT_TRUE(r) << r.error().describe();
      EXPECT_FALSE(*r);
    }
    EXPECT_LE(batcher.batches(), 200u);
    for (int t = 0; t < 4; ++t)
      for (int i = 0; i < 50; ++i) nonces.push_back("nonce-" + std::to_string(t) + "-" + std::to_string(1000 + i));
  }
  // Another store on the same file (another control plane), while the first is still open.
  auto other = open_store();
  ASSERT_TRUE(other);
  {
    NonceBatcher batcher(other, MESH_SDK_ABI_MINOR);
    for (const auto& n : nonces) {
      auto r = batcher.remember(request(n), 2000);
      ASSERT_TRUE(r) << r.error().describe();
      EXPECT_TRUE(*r) << n << " is a replay on another control plane";
    }
  }
  // Closed and opened again (a restart): still replays, whether asked in a batch or alone.
  store_.reset();
  other.reset();
  auto reopened = open_store();
  ASSERT_TRUE(reopened);
  NonceBatcher batcher(reopened, MESH_SDK_ABI_MINOR);
  for (const auto& n : nonces) {
    auto r = batcher.remember(request(n), 3000);
    ASSERT_TRUE(r) << r.error().describe();
    EXPECT_TRUE(*r) << n << " is a replay after a restart";
  }
  auto alone = reopened->remember_request(request(nonces.front()), 3000);
  ASSERT_TRUE(alone && *alone);
  // A nonce of another signer is its own.
  auto theirs = batcher.remember(request(nonces.front(), "node:web-02"), 3000);
  ASSERT_TRUE(theirs);
  EXPECT_FALSE(*theirs);
}

TEST_F(NonceBatcherTest, AStoreFailureMakesNoNonceOfItsBatchFreshAndRemembersNone) {
  std::vector<Answer> answers;
  std::mutex mu;
  NonceBatcher batcher(store_, MESH_SDK_ABI_MINOR);
  // The write lock held longer than the store's busy timeout (5 s): its write fails as busy.
  Raw blocker(db_path());
  ASSERT_EQ(blocker.exec("BEGIN IMMEDIATE"), SQLITE_OK);
  for (const std::string n : {"nonce-0000000000000011", "nonce-0000000000000012"})
    batcher.submit(PendingNonce{request(n), 1000, [&, n](NonceResult&& r) {
                                  std::lock_guard lock(mu);
                                  answers.push_back(Answer{n, std::move(r), -1});
                                }});
  batcher.drain();
  ASSERT_EQ(blocker.exec("COMMIT"), SQLITE_OK);
  ASSERT_EQ(answers.size(), 2u);
  for (const auto& a : answers) {
    ASSERT_FALSE(a.result) << a.nonce << " must not count as fresh";
    EXPECT_EQ(a.result.error().code, ErrorCode::Transient) << a.result.error().describe();
  }
  Raw reader(db_path());
  EXPECT_EQ(reader.count("nonce-0000000000000011"), 0);
  EXPECT_EQ(reader.count("nonce-0000000000000012"), 0);
}

TEST_F(NonceBatcherTest, AnOlderStorePluginIsCalledOneNonceAtATimeWithTheSameAnswers) {
  NonceBatcher batcher(store_, 3);
  auto first = batcher.remember(request("nonce-0000000000000021"), 1000);
  ASSERT_TRUE(first) << first.error().describe();
  EXPECT_FALSE(*first);
  auto again = batcher.remember(request("nonce-0000000000000021"), 1001);
  ASSERT_TRUE(again && *again);
  auto bad = batcher.remember(request(""), 1002);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::InvalidArgument);
}

TEST_F(NonceBatcherTest, AfterStopANonceIsAnsweredUnavailableAndNeverFresh) {
  NonceBatcher batcher(store_, MESH_SDK_ABI_MINOR);
  batcher.stop();
  auto r = batcher.remember(request("nonce-0000000000000031"), 1000);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Unavailable);
  Raw reader(db_path());
  EXPECT_EQ(reader.count("nonce-0000000000000031"), 0);
}

}  // namespace
}  // namespace mesh::control::detail
