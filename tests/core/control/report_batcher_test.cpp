// Group commit of reports (core/control/src/report_batcher.h, decision record 100) on the real
// `sqlite` store and a real SQLite file: reports that arrive while a write runs go together into
// the next one; each report is answered with its own result — a bad one refused alone — and only
// once the write that holds it is committed (visible to another connection).
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

#include "report_batcher.h"
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
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/mesh-report-batcher-XXXXXX";
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
  int count(const std::string& node, int revision) {
    sqlite3_stmt* st = nullptr;
    int n = -1;
    if (sqlite3_prepare_v2(db_, "SELECT count(*) FROM apply_reports WHERE node = ?1 AND revision = ?2", -1, &st,
                           nullptr) == SQLITE_OK) {
      sqlite3_bind_text(st, 1, node.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int(st, 2, revision);
      if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    return n;
  }

 private:
  sqlite3* db_ = nullptr;
};

sdk::ApplyReport report(const std::string& node, std::uint64_t revision, const std::string& outcome) {
  sdk::ApplyReport r;
  r.node = node;
  r.revision = revision;
  r.outcome = outcome;
  r.at_ms = 1000;
  r.received_at_ms = 1000;
  if (outcome == "failed") r.reason = "it broke";
  return r;
}

PendingReport pending(sdk::ApplyReport r) {
  sdk::Message m;
  m.subject = "mesh.report." + r.node;
  return PendingReport{std::move(m), std::move(r)};
}

struct Answer {
  std::string node;
  std::uint64_t revision = 0;
  sdk::Result<bool> result = false;
  int rows_seen = -1;  // rows of (node, revision) another connection saw when it was answered
};

class ReportBatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.logger = &logger_;
    host_.role = "control";
    auto s = std::make_shared<stores::sqlite::SqliteStore>(host_);
    sdk::Value config = sdk::Value::object();
    config.set("path", db_path());
    ASSERT_TRUE(s->configure(config));
    ASSERT_TRUE(s->open());
    for (const std::string node : {"web-01", "web-02"}) {
      sdk::TokenRecord t;
      t.id = "tok-" + node;
      t.node = node;
      t.hash = "hash-" + node;
      t.created_at_ms = 1;
      t.expires_at_ms = 1'000'000'000'000;
      ASSERT_TRUE(s->add_token(t));
      ASSERT_TRUE(s->enrol(t.hash, node, "aa", 10));
      sdk::DeclarationWrite w{node, [node](std::uint64_t rev) { return node + "@" + std::to_string(rev); }};
      ASSERT_TRUE(s->declare({w}, 20, 0));
    }
    store_ = s;
  }

  std::string db_path() const { return (dir_.path() / "mesh.db").string(); }

  Folder dir_;
  sdk::NullLogger logger_;
  sdk::HostContext host_;
  std::shared_ptr<sdk::Store> store_;
};

TEST_F(ReportBatcherTest, ReportsArrivingDuringAWriteGoInTheNextAndEachGetsItsOwnAnswerAfterCommit) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Answer> answers;
  Raw reader(db_path());
  ReportBatcher batcher(store_, 3, [&](PendingReport&& p, const sdk::Result<bool>& r) {
    const auto& a = std::get<sdk::ApplyReport>(p.report);
    Answer x{a.node, a.revision, r, reader.count(a.node, static_cast<int>(a.revision))};
    std::lock_guard lock(mu);
    answers.push_back(std::move(x));
    cv.notify_all();
  });

  // Another connection holds the write lock: the first batch waits in the store.
  Raw blocker(db_path());
  ASSERT_EQ(blocker.exec("BEGIN IMMEDIATE"), SQLITE_OK);
  batcher.submit(pending(report("web-01", 1, "applied")));
  for (int i = 0; i < 500 && batcher.waiting() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(batcher.waiting(), 0u) << "the committer took the first report";
  batcher.submit(pending(report("web-02", 1, "applied")));
  batcher.submit(pending(report("web-01", 9, "applied")));  // never declared: refused alone
  batcher.submit(pending(report("web-01", 1, "failed")));   // after applied: not recorded
  EXPECT_EQ(batcher.waiting(), 3u);
  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(answers.empty()) << "nothing is answered before its write";
  }
  ASSERT_EQ(blocker.exec("COMMIT"), SQLITE_OK);
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return answers.size() == 4; }));
  }
  batcher.drain();
  EXPECT_EQ(batcher.batches(), 2u) << "the three that arrived during the first write went in one";
  EXPECT_EQ(batcher.reports(), 4u);

  ASSERT_EQ(answers.size(), 4u);
  EXPECT_EQ(answers[0].node, "web-01");
  ASSERT_TRUE(answers[0].result) << answers[0].result.error().describe();
  EXPECT_TRUE(*answers[0].result);
  EXPECT_EQ(answers[0].rows_seen, 1) << "answered only once committed";
  ASSERT_TRUE(answers[1].result) << answers[1].result.error().describe();
  EXPECT_TRUE(*answers[1].result);
  EXPECT_EQ(answers[1].rows_seen, 1) << "answered only once committed";
  ASSERT_FALSE(answers[2].result);
  EXPECT_EQ(answers[2].result.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(answers[2].result.error().message.find("web-01"), std::string::npos) << answers[2].result.error().message;
  EXPECT_EQ(answers[2].rows_seen, 0);
  ASSERT_TRUE(answers[3].result);
  EXPECT_FALSE(*answers[3].result);

  auto kept = store_->apply_report("web-01", 1);
  ASSERT_TRUE(kept && *kept);
  EXPECT_EQ((*kept)->outcome, "applied");
}

TEST_F(ReportBatcherTest, AStoreFailureFailsTheWholeBatchRetryablyAndWritesNothing) {
  std::vector<Answer> answers;
  std::mutex mu;
  ReportBatcher batcher(store_, 3, [&](PendingReport&& p, const sdk::Result<bool>& r) {
    const auto& a = std::get<sdk::ApplyReport>(p.report);
    std::lock_guard lock(mu);
    answers.push_back(Answer{a.node, a.revision, r, -1});
  });
  // The write lock held longer than the store's busy timeout (5 s): its write fails as busy.
  Raw blocker(db_path());
  ASSERT_EQ(blocker.exec("BEGIN IMMEDIATE"), SQLITE_OK);
  batcher.submit(pending(report("web-01", 1, "applied")));
  batcher.submit(pending(report("web-02", 1, "applied")));
  batcher.drain();
  ASSERT_EQ(blocker.exec("COMMIT"), SQLITE_OK);
  ASSERT_EQ(answers.size(), 2u);
  for (const auto& a : answers) {
    ASSERT_FALSE(a.result) << a.node;
    EXPECT_EQ(a.result.error().code, ErrorCode::Transient) << a.result.error().describe();
  }
  Raw reader(db_path());
  EXPECT_EQ(reader.count("web-01", 1), 0);
  EXPECT_EQ(reader.count("web-02", 1), 0);
}

TEST_F(ReportBatcherTest, AnOlderStorePluginIsCalledOneReportAtATime) {
  std::vector<Answer> answers;
  ReportBatcher batcher(store_, 2, [&](PendingReport&& p, const sdk::Result<bool>& r) {
    const auto& a = std::get<sdk::ApplyReport>(p.report);
    answers.push_back(Answer{a.node, a.revision, r, -1});
  });
  batcher.submit(pending(report("web-01", 1, "applied")));
  batcher.submit(pending(report("web-77", 1, "applied")));
  batcher.drain();
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_TRUE(answers[0].result && *answers[0].result);
  ASSERT_FALSE(answers[1].result);
  EXPECT_EQ(answers[1].result.error().code, ErrorCode::NotFound);
}

}  // namespace
}  // namespace mesh::control::detail
