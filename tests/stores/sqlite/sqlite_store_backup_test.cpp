// SqliteStore::backup and ::restore (docs/decisions/0085): a copy of one instant made while
// another store instance writes to the same file, a restore that brings exactly that back, and
// restores refused — in use, damaged, not a store, newer — with nothing changed.
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "store_fixture.h"

namespace mesh::stores::sqlite::testing {
namespace {

using sdk::ErrorCode;
namespace fs = std::filesystem;

class SqliteStoreBackupTest : public SqliteStoreFixture {
 protected:
  std::string backup_path() const { return (dir_.path() / "backups" / "mesh-backup.db").string(); }
  void SetUp() override { fs::create_directories(dir_.path() / "backups"); }

  static std::uint64_t latest(SqliteStore& s, const std::string& node) {
    auto r = s.latest_revision(node);
    EXPECT_TRUE(r) << r.error().describe();
    return r && *r ? (*r)->revision : 0;
  }
};

TEST_F(SqliteStoreBackupTest, ABackupTakenWhileAnotherInstanceWritesRestoresThatInstant) {
  auto store = opened();
  ASSERT_TRUE(store);
  enrol(*store, "web-01");
  enrol(*store, "web-02");
  ASSERT_TRUE(store->declare({write("web-01"), write("web-02")}, 100, 0));

  // A second instance on the same file keeps declaring while the first makes the backup.
  auto writer = opened();
  ASSERT_TRUE(writer);
  std::atomic<bool> stop{false};
  std::atomic<int> written{0};
  std::thread t([&] {
    while (!stop) {
      if (writer->declare({write("web-01"), write("web-02")}, 200, 0)) ++written;
    }
  });
  while (written < 3) std::this_thread::yield();
  auto b = store->backup(backup_path());
  stop = true;
  t.join();
  ASSERT_TRUE(b) << b.error().describe();
  const std::uint64_t after_all = latest(*store, "web-01");

  struct stat st {};
  ASSERT_EQ(::stat(backup_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  for (const auto& e : fs::directory_iterator(dir_.path() / "backups"))
    EXPECT_EQ(e.path().filename(), "mesh-backup.db") << "a temporary file was left: " << e.path();

  // Restored into a fresh database: one consistent instant, both nodes at the same revision
  // (every declare wrote both), no later than what was written in all.
  const std::string other = (dir_.path() / "restored.db").string();
  {
    auto fresh = configured(other);
    auto r = fresh->restore(backup_path());
    ASSERT_TRUE(r) << r.error().describe();
  }
  auto restored = opened(other);
  ASSERT_TRUE(restored);
  const std::uint64_t a = latest(*restored, "web-01");
  const std::uint64_t c = latest(*restored, "web-02");
  EXPECT_EQ(a, c) << "the backup mixes two instants";
  EXPECT_GE(a, 1u + 3u);
  EXPECT_LE(a, after_all);
  auto nodes = restored->nodes();
  ASSERT_TRUE(nodes);
  EXPECT_EQ(nodes->size(), 2u);
}

TEST_F(SqliteStoreBackupTest, RestoreBringsBackTheBackupAndDropsLaterWrites) {
  {
    auto store = opened();
    ASSERT_TRUE(store);
    enrol(*store, "web-01");
    ASSERT_TRUE(store->declare({write("web-01")}, 100, 0));
    ASSERT_TRUE(store->backup(backup_path()));
    enrol(*store, "db-01");
    ASSERT_TRUE(store->declare({write("web-01")}, 200, 0));
  }
  {
    auto store = configured();
    auto r = store->restore(backup_path());
    ASSERT_TRUE(r) << r.error().describe();
  }
  auto store = opened();
  ASSERT_TRUE(store);
  EXPECT_EQ(latest(*store, "web-01"), 1u);
  auto gone = store->node("db-01");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::NotFound);
  // The revision counter is the backup's too: the next declare is revision 2 again.
  auto d = store->declare({write("web-01")}, 300, 0);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(latest(*store, "web-01"), 2u);
}

TEST_F(SqliteStoreBackupTest, RestoreIsRefusedWhileTheStoreIsOpenAndNothingChanges) {
  auto store = opened();
  ASSERT_TRUE(store);
  enrol(*store, "web-01");
  ASSERT_TRUE(store->backup(backup_path()));
  ASSERT_TRUE(store->declare({write("web-01")}, 100, 0));

  auto other = configured();
  auto r = other->restore(backup_path());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::FailedPrecondition);
  EXPECT_NE(r.error().message.find("in use"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(db_path()), std::string::npos) << r.error().message;
  EXPECT_EQ(latest(*store, "web-01"), 1u);

  // An open store cannot be restored into either.
  auto self = store->restore(backup_path());
  ASSERT_FALSE(self);
  EXPECT_EQ(self.error().code, ErrorCode::FailedPrecondition);
}

TEST_F(SqliteStoreBackupTest, ABadBackupIsNamedAndTheStoreIsLeftAsItWas) {
  {
    auto store = opened();
    ASSERT_TRUE(store);
    enrol(*store, "web-01");
    ASSERT_TRUE(store->declare({write("web-01")}, 100, 0));
    ASSERT_TRUE(store->backup(backup_path()));
  }
  const std::string junk = (dir_.path() / "junk.db").string();
  std::ofstream(junk) << "this is not a database\n";
  const std::string foreign = (dir_.path() / "foreign.db").string();
  std::ofstream(foreign).close();  // an empty file is an empty SQLite database
  { RawDb(foreign).exec("CREATE TABLE t(x); INSERT INTO t VALUES (1)"); }
  const std::string newer = (dir_.path() / "newer.db").string();
  fs::copy_file(backup_path(), newer);
  { RawDb(newer).exec("UPDATE schema_version SET version = version + 1 WHERE id = 1"); }
  const std::string damaged = (dir_.path() / "damaged.db").string();
  fs::copy_file(backup_path(), damaged);
  {
    // Overwrite a page past the header: integrity_check catches it.
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096);  // page 2: a b-tree page of the schema, never free in a store
    const std::string noise(4096, '\x5a');
    f.write(noise.data(), static_cast<std::streamsize>(noise.size()));
  }

  struct Case {
    std::string path;
    ErrorCode code;
    std::string says;
  };
  for (const Case& c : {Case{junk, ErrorCode::InvalidArgument, "not a readable SQLite database"},
                        Case{foreign, ErrorCode::InvalidArgument, "not a Nox Mesh store"},
                        Case{newer, ErrorCode::FailedPrecondition, "newer than this build"},
                        Case{damaged, ErrorCode::InvalidArgument, ""},
                        Case{(dir_.path() / "missing.db").string(), ErrorCode::InvalidArgument,
                             "not a regular file"}}) {
    auto store = configured();
    auto r = store->restore(c.path);
    ASSERT_FALSE(r) << c.path;
    EXPECT_EQ(r.error().code, c.code) << r.error().describe();
    EXPECT_NE(r.error().message.find(c.path), std::string::npos) << r.error().message;
    if (!c.says.empty()) {
      EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
    }
  }
  auto store = opened();
  ASSERT_TRUE(store);
  EXPECT_EQ(latest(*store, "web-01"), 1u);
}

TEST_F(SqliteStoreBackupTest, BackupRefusesAMissingDirectoryAndTheStoresOwnFile) {
  auto store = opened();
  ASSERT_TRUE(store);
  auto missing = store->backup((dir_.path() / "no-such-dir" / "b.db").string());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(missing.error().message.find("does not exist"), std::string::npos) << missing.error().message;
  auto self = store->backup(db_path());
  ASSERT_FALSE(self);
  EXPECT_EQ(self.error().code, ErrorCode::InvalidArgument);
  auto closed = configured((dir_.path() / "other.db").string());
  auto before_open = closed->backup(backup_path());
  ASSERT_FALSE(before_open);
  EXPECT_EQ(before_open.error().code, ErrorCode::FailedPrecondition);
}

}  // namespace
}  // namespace mesh::stores::sqlite::testing
