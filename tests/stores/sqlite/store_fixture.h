// Shared set-up for the sqlite store tests: a fresh temp directory per test, stores opened on
// real database files in it, and small builders for records.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "connection.h"
#include "mesh/sdk/logger.h"
#include "mesh/sdk/plugin.h"
#include "sqlite_store.h"

namespace mesh::stores::sqlite::testing {

/// A directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/mesh-sqlite-test-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// A raw SQLite connection, for looking at (or tampering with) a store's file from outside.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK)
      throw std::runtime_error("cannot open " + path);
    sqlite3_busy_timeout(db_, 5000);
  }
  ~RawDb() { sqlite3_close_v2(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;
  /// Runs SQL; returns SQLite's result code.
  int exec(const std::string& sql) {
    return sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  }
  /// The first column of the first row as text ("" when no row).
  std::string scalar(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string("prepare: ") + sqlite3_errmsg(db_));
    std::string out;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

class SqliteStoreFixture : public ::testing::Test {
 protected:
  SqliteStoreFixture() {
    host_.logger = &logger_;
    host_.role = "tool";
  }

  std::string db_path() const { return (dir_.path() / "mesh.db").string(); }

  static sdk::Value config(const std::string& path, std::int64_t busy_timeout_ms = 5000) {
    sdk::Value v = sdk::Value::object();
    v.set("path", path);
    v.set("busy_timeout", busy_timeout_ms);
    return v;
  }

  /// A configured, not yet opened store on `path` (default: this test's mesh.db).
  std::unique_ptr<SqliteStore> configured(std::string path = {},
                                          std::int64_t busy_timeout_ms = 5000) {
    auto store = std::make_unique<SqliteStore>(host_);
    auto r = store->configure(config(path.empty() ? db_path() : path, busy_timeout_ms));
    EXPECT_TRUE(r) << r.error().describe();
    return store;
  }

  /// A configured and opened store; fails the test when opening fails.
  std::unique_ptr<SqliteStore> opened(std::string path = {}, std::int64_t busy_timeout_ms = 5000) {
    auto store = configured(std::move(path), busy_timeout_ms);
    auto r = store->open();
    EXPECT_TRUE(r) << r.error().describe();
    return r ? std::move(store) : nullptr;
  }

  /// The hash the control plane stores for a token secret (SHA-256 hex).
  static std::string hash_of(const std::string& secret) { return sha256_hex(secret); }

  static sdk::TokenRecord token(const std::string& id, const std::string& node,
                                const std::string& secret, std::int64_t created_at_ms = 1000,
                                std::int64_t expires_at_ms = 1'000'000, bool reenrol = false) {
    sdk::TokenRecord t;
    t.id = id;
    t.node = node;
    t.hash = hash_of(secret);
    t.created_at_ms = created_at_ms;
    t.expires_at_ms = expires_at_ms;
    t.reenrol = reenrol;
    return t;
  }

  /// Adds a token for `node` and enrols it; fails the test on error.
  void enrol(SqliteStore& store, const std::string& node, const std::string& key = "aa") {
    const std::string secret = "secret-for-" + node;
    auto t = store.add_token(token("tok-" + node, node, secret));
    ASSERT_TRUE(t) << t.error().describe();
    auto e = store.enrol(hash_of(secret), node, key, 2000);
    ASSERT_TRUE(e) << e.error().describe();
  }

  /// A declaration write whose body is "<node>@<revision>".
  static sdk::DeclarationWrite write(const std::string& node) {
    return sdk::DeclarationWrite{
        node, [node](std::uint64_t rev) { return node + "@" + std::to_string(rev); }};
  }

  static sdk::ApplyReport report(const std::string& node, std::uint64_t revision,
                                 const std::string& outcome, std::int64_t at_ms,
                                 std::vector<std::string> owned = {}) {
    sdk::ApplyReport r;
    r.node = node;
    r.revision = revision;
    r.outcome = outcome;
    r.at_ms = at_ms;
    r.received_at_ms = at_ms;  // received as claimed, unless a test says otherwise
    r.owned = std::move(owned);
    if (outcome == "failed") {
      r.resource = "file:/etc/motd";
      r.reason = "permission denied";
    }
    return r;
  }

  sdk::NullLogger logger_;
  sdk::HostContext host_;
  TempDir dir_;
};

/// web-01 enrolled, revisions 1-3 declared: the starting point of the report, contact and outcome tests.
class SqliteStoreReportsFixture : public SqliteStoreFixture {
 protected:
  void SetUp() override {
    store_ = opened();
    ASSERT_TRUE(store_);
    enrol(*store_, "web-01");
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(store_->declare({write("web-01")}, 100 + i, 0));
  }
  sdk::NodeRecord node() {
    auto n = store_->node("web-01");
    EXPECT_TRUE(n) << n.error().describe();
    return n ? *n : sdk::NodeRecord{};
  }
  std::vector<std::string> owned() {
    auto o = store_->owned("web-01");
    EXPECT_TRUE(o) << o.error().describe();
    return o ? *o : std::vector<std::string>{};
  }
  std::unique_ptr<SqliteStore> store_;
};

}  // namespace mesh::stores::sqlite::testing
