// The jetstream-kv store's backup (decision 85): the local file's online backup after catching
// up — what another instance wrote is in it — in the sqlite store's format, so a sqlite store
// restores it and import_sqlite makes it a new stream. restore() names that way instead.
#include <filesystem>

#include "jetstream_kv_fixture.h"
#include "sqlite_store.h"

namespace mesh::stores::jetstream_kv::testing {
namespace {

class JetStreamKvBackupTest : public JetStreamKvTest {
 protected:
  static std::vector<std::string> names(sdk::Store& s) {
    std::vector<std::string> out;
    auto n = s.nodes();
    EXPECT_TRUE(n) << n.error().describe();
    if (n)
      for (const auto& r : *n) out.push_back(r.name + "@" + std::to_string(r.declared_revision));
    return out;
  }
};

TEST_F(JetStreamKvBackupTest, ABackupHoldsWhatEveryInstanceWroteAndRestoresIntoSqliteOrANewStream) {
  const std::string prefix = fresh_prefix();
  auto a = open_store(host_, store_config({server_.url()}, prefix, 1, local("a.db")));
  auto b = open_store(host_, store_config({server_.url()}, prefix, 1, local("b.db")));
  ASSERT_TRUE(a && b);
  enrol(*a, "web-01");
  enrol(*b, "web-02");  // written by the other instance: a catches up before the copy
  auto d = b->declare({sdk::DeclarationWrite{"web-02", [](std::uint64_t r) { return "body@" + std::to_string(r); }}},
                      3000, 0);
  ASSERT_TRUE(d) << d.error().describe();

  const std::string backup = local("backup.db");
  auto made = a->backup(backup);
  ASSERT_TRUE(made) << made.error().describe();
  const std::vector<std::string> expected{"web-01@0", "web-02@1"};
  EXPECT_EQ(names(*a), expected);

  // A sqlite store restores it.
  {
    sqlite::SqliteStore s(host_);
    sdk::Value c = sdk::Value::object();
    c.set("path", local("restored.db"));
    ASSERT_TRUE(s.configure(c));
    auto r = s.restore(backup);
    ASSERT_TRUE(r) << r.error().describe();
  }
  {
    sqlite::SqliteStore s(host_);
    sdk::Value c = sdk::Value::object();
    c.set("path", local("restored.db"));
    ASSERT_TRUE(s.configure(c));
    ASSERT_TRUE(s.open());
    EXPECT_EQ(names(s), expected);
  }

  // Restoring over a stream other instances serve is refused, naming the way that works.
  auto refused = JetStreamKvStore(host_).restore(backup);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, sdk::ErrorCode::Unsupported);
  EXPECT_NE(refused.error().message.find("import_sqlite"), std::string::npos) << refused.error().message;

  // ... which is: a new stream whose first operation is the backup.
  sdk::Value c = store_config({server_.url()}, fresh_prefix(), 1, local("c.db"));
  c.set("import_sqlite", backup);
  auto imported = open_store(host_, c);
  ASSERT_TRUE(imported);
  EXPECT_EQ(names(*imported), expected);
}

// Decision record 189: every instance of a restore may keep import_sqlite in its config. The
// stream records the digest of the file it was imported from; the same file again is nothing to
// do, through compactions too; another file is refused, saying to remove import_sqlite.
TEST_F(JetStreamKvBackupTest, ImportingTheFileTheStreamWasMadeFromAgainIsANoOpAndAnotherFileIsRefused) {
  const std::string prefix = fresh_prefix();
  auto a = open_store(host_, store_config({server_.url()}, prefix, 1, local("a.db")));
  ASSERT_TRUE(a);
  enrol(*a, "web-01");
  const std::string backup = local("backup.db");
  ASSERT_TRUE(a->backup(backup));
  const std::string other = local("other.db");
  enrol(*a, "web-02");
  ASSERT_TRUE(a->backup(other));

  const std::string restored = fresh_prefix();
  auto with_import = [&](const std::string& local_name, const std::string& file) {
    sdk::Value c = store_config({server_.url()}, restored, 1, local(local_name));
    c.set("import_sqlite", file);
    c.set("compact_after", std::int64_t{16});
    return c;
  };
  auto first = open_store(host_, with_import("r1.db", backup));
  ASSERT_TRUE(first);
  EXPECT_EQ(names(*first), std::vector<std::string>{"web-01@0"});
  // The second instance, same config: uses the stream as it is (what the first wrote since too).
  enrol(*first, "web-03");
  auto second = open_store(host_, with_import("r2.db", backup));
  ASSERT_TRUE(second);
  EXPECT_EQ(names(*second), (std::vector<std::string>{"web-01@0", "web-03@0"}));
  // After a compaction (the import's own operation purged), still recognised.
  auto compacted = first->compact();
  ASSERT_TRUE(compacted) << compacted.error().describe();
  EXPECT_GT(compacted->purged, 0u);
  auto third = open_store(host_, with_import("r3.db", backup));
  ASSERT_TRUE(third);
  EXPECT_EQ(names(*third), (std::vector<std::string>{"web-01@0", "web-03@0"}));

  // Another file: refused, naming the key and telling to remove it; nothing written.
  JetStreamKvStore wrong(host_);
  ASSERT_TRUE(wrong.configure(with_import("r4.db", other)));
  auto refused = wrong.open();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, sdk::ErrorCode::FailedPrecondition) << refused.error().describe();
  EXPECT_EQ(refused.error().path, "import_sqlite");
  EXPECT_NE(refused.error().message.find("remove import_sqlite"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("sha256:"), std::string::npos) << refused.error().message;
  // A migration (import_new_only) never reuses a stream, even one made from its file.
  sdk::Value again = with_import("r5.db", backup);
  again.set("import_new_only", true);
  JetStreamKvStore migrate(host_);
  ASSERT_TRUE(migrate.configure(again));
  auto once = migrate.open();
  ASSERT_FALSE(once);
  EXPECT_NE(once.error().message.find("already holds operations"), std::string::npos) << once.error().message;
  EXPECT_EQ(names(*first), (std::vector<std::string>{"web-01@0", "web-03@0"}));
}

}  // namespace
}  // namespace mesh::stores::jetstream_kv::testing
