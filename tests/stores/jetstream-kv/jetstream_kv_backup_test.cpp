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

}  // namespace
}  // namespace mesh::stores::jetstream_kv::testing
