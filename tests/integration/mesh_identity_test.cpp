// The mesh's identity in its store (decision record 0117): a control plane whose keys_dir holds
// another control.key than the one that first served the store refuses to start, naming
// keys_dir, instead of taking a share of the queue group's traffic with the wrong keys.
#include <sqlite3.h>

#include <tuple>

#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

/// Two instances on one sqlite file (the single-machine setup README "Several control planes"
/// describes), each with its own state_dir; keys_dir as given.
class MeshIdentityTest : public MeshTest {
 public:
  void SetUp() override { nats_ = std::make_unique<NatsServer>(); }
  fs::path config(const std::string& name, const fs::path& keys_dir, const std::string& db = "mesh.db") {
    const fs::path cfg = dir() / (name + ".toml");
    write_text(cfg, "[control]\nstate_dir = \"" + (dir() / name).string() + "\"\nkeys_dir = \"" + keys_dir.string() +
                        "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\n\n[store]\nplugin = \"sqlite\"\npath = \"" +
                        (dir() / db).string() + "\"\n\n[transport]\nplugin = \"nats\"\nservers = [\"" +
                        nats_->url() + "\"]\n");
    return cfg;
  }
};

TEST_F(MeshIdentityTest, AnInstanceWithAnotherKeysDirIsRefusedNamingItAndOneWithTheMeshsKeysStarts) {
  const fs::path keys = dir() / "keys";
  BackgroundProcess first({bin("mesh-control"), "run", "--config", config("one", keys).string()});
  ASSERT_TRUE(first.wait_for_output("control started", 30000)) << first.stderr_text();

  // An empty keys_dir: refused before it serves anything, and no new key is made there (newuser
  // finding 3: a second mesh key left in the wrong directory), exit 2 (a config error).
  const fs::path empty_keys = dir() / "empty-keys";
  auto empty = mesh::testing::run_process({bin("mesh-control"), "run", "--config", config("two", empty_keys).string()},
                                          {}, 60000);
  EXPECT_EQ(empty.exit_code, 2) << empty.err;
  EXPECT_NE(empty.err.find("keys_dir '" + empty_keys.string() + "' has no control.key, but the store belongs to a mesh"),
            std::string::npos)
      << empty.err;
  EXPECT_EQ(empty.err.find("control started"), std::string::npos) << empty.err;
  EXPECT_FALSE(fs::exists(empty_keys / "control.key")) << "a new mesh key was left in the wrong keys_dir";

  // Another mesh's control.key: refused naming keys_dir, exit 2.
  const fs::path other_keys = dir() / "other-keys";
  {
    BackgroundProcess elsewhere({bin("mesh-control"), "run", "--config", config("other", other_keys, "other.db").string()});
    ASSERT_TRUE(elsewhere.wait_for_output("control started", 30000)) << elsewhere.stderr_text();
  }
  auto other = mesh::testing::run_process({bin("mesh-control"), "run", "--config", config("two", other_keys).string()},
                                          {}, 60000);
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_NE(other.err.find("belongs to another mesh"), std::string::npos) << other.err;
  EXPECT_NE(other.err.find(other_keys.string()), std::string::npos) << other.err;
  EXPECT_EQ(other.err.find("control started"), std::string::npos) << other.err;

  // The mesh's keys_dir: a second instance starts.
  BackgroundProcess second({bin("mesh-control"), "run", "--config", config("three", keys).string()});
  EXPECT_TRUE(second.wait_for_output("control started", 30000)) << second.stderr_text();
  EXPECT_EQ(second.stop(), 0) << second.stderr_text();
  EXPECT_EQ(first.stop(), 0) << first.stderr_text();
}

TEST_F(MeshIdentityTest, AfterAKeyRotationTheMeshStillStarts) {
  const fs::path keys = dir() / "keys";
  {
    BackgroundProcess first({bin("mesh-control"), "run", "--config", config("one", keys).string()});
    ASSERT_TRUE(first.wait_for_output("control started", 30000)) << first.stderr_text();
    EXPECT_EQ(first.stop(), 0) << first.stderr_text();
  }
  auto rotated = mesh::testing::run_process({bin("mesh-control"), "rotate-key", "--config", config("one", keys).string()},
                                            {}, 60000);
  ASSERT_EQ(rotated.exit_code, 0) << rotated.out << rotated.err;
  BackgroundProcess again({bin("mesh-control"), "run", "--config", config("one", keys).string()});
  EXPECT_TRUE(again.wait_for_output("control started", 30000)) << again.stderr_text();
  EXPECT_EQ(again.stop(), 0) << again.stderr_text();
}

TEST_F(MeshIdentityTest, AnInstanceWhoseKeysDirLacksTheNewestSigningJsonIsRefusedNamingIt) {
  // newuser finding 2: a copy of keys_dir taken before a rotation (control.key, operators.json, …
  // but no signing.json) started silently and signed with the retired key; a third of every
  // operator command then failed with a message about attackers.
  const fs::path keys = dir() / "keys";
  BackgroundProcess first({bin("mesh-control"), "run", "--config", config("one", keys).string()});
  ASSERT_TRUE(first.wait_for_output("control started", 30000)) << first.stderr_text();
  const fs::path stale = dir() / "keys-before-rotate";
  fs::create_directories(stale);
  for (const char* f : {"control.key", "control.pub", "operators.json", "admin.identity"})
    fs::copy_file(keys / f, stale / f);

  auto rotated = mesh::testing::run_process({bin("mesh-control"), "rotate-key", "--config", config("one", keys).string()},
                                            {}, 60000);
  ASSERT_EQ(rotated.exit_code, 0) << rotated.out << rotated.err;
  // The running instance takes the new key and records it in the store at its next lease round.
  auto recorded = [&] {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2((dir() / "mesh.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      sqlite3_close(db);
      return std::string();
    }
    sqlite3_busy_timeout(db, 2000);
    sqlite3_stmt* st = nullptr;
    std::string out;
    if (sqlite3_prepare_v2(db, "SELECT value FROM records WHERE ns = 'mesh' AND key = 'signing'", -1, &st, nullptr) ==
            SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
  };
  ASSERT_TRUE(mesh::testing::eventually([&] { return recorded().find("\"rotations\":1") != std::string::npos; }, 30000))
      << recorded() << "\n" << first.stderr_text();

  auto refused = mesh::testing::run_process({bin("mesh-control"), "run", "--config", config("two", stale).string()}, {},
                                            60000);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("keys_dir '" + stale.string() + "'"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("lacks the newest signing.json"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.err.find("control started"), std::string::npos) << refused.err;

  // With signing.json copied over, it starts.
  fs::copy_file(keys / "signing.json", stale / "signing.json");
  BackgroundProcess second({bin("mesh-control"), "run", "--config", config("two", stale).string()});
  EXPECT_TRUE(second.wait_for_output("control started", 30000)) << second.stderr_text();
  EXPECT_EQ(second.stop(), 0) << second.stderr_text();
  EXPECT_EQ(first.stop(), 0) << first.stderr_text();
}

TEST_F(MeshIdentityTest, ARestoreOfAnotherMeshsBackupIsRefusedWithExit2AndOneOfItsOwnIsTaken) {
  const fs::path keys_a = dir() / "keys-a";
  const fs::path keys_b = dir() / "keys-b";
  for (auto [name, keys, db] : {std::tuple{"a", keys_a, "a.db"}, std::tuple{"b", keys_b, "b.db"}}) {
    BackgroundProcess c({bin("mesh-control"), "run", "--config", config(name, keys, db).string()});
    ASSERT_TRUE(c.wait_for_output("control started", 30000)) << c.stderr_text();
    EXPECT_EQ(c.stop(), 0) << c.stderr_text();
  }
  const std::string backup_a = (dir() / "backup-a.db").string();
  auto made = mesh::testing::run_process(
      {bin("mesh-control"), "backup", "--config", config("a", keys_a, "a.db").string(), backup_a}, {}, 60000);
  ASSERT_EQ(made.exit_code, 0) << made.err;

  auto refused = mesh::testing::run_process(
      {bin("mesh-control"), "restore", "--config", config("b", keys_b, "b.db").string(), backup_a}, {}, 60000);
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("backup of another mesh"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find(keys_b.string()), std::string::npos) << refused.err;
  // Mesh b still starts on its own store (its identity was not replaced).
  BackgroundProcess b({bin("mesh-control"), "run", "--config", config("b", keys_b, "b.db").string()});
  EXPECT_TRUE(b.wait_for_output("control started", 30000)) << b.stderr_text();
  EXPECT_EQ(b.stop(), 0) << b.stderr_text();

  // A backup from before the identity was recorded: restored, with a warning.
  const std::string old_backup = (dir() / "backup-old.db").string();
  fs::copy_file(backup_a, old_backup);
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(old_backup.c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, "DELETE FROM records WHERE ns = 'mesh'", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto warned = mesh::testing::run_process(
      {bin("mesh-control"), "restore", "--config", config("b", keys_b, "b.db").string(), old_backup}, {}, 60000);
  EXPECT_EQ(warned.exit_code, 0) << warned.out << warned.err;
  EXPECT_NE(warned.err.find("holds no mesh identity"), std::string::npos) << warned.err;

  auto taken = mesh::testing::run_process(
      {bin("mesh-control"), "restore", "--config", config("a", keys_a, "a.db").string(), backup_a}, {}, 60000);
  EXPECT_EQ(taken.exit_code, 0) << taken.out << taken.err;
}

}  // namespace
}  // namespace mesh::itest
