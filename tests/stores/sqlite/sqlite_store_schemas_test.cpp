// The provider schemas a node sends with its briefing (schema version 6, decision record 48):
// stored, replaced, forgotten, bounded, and the migration of a version-5 file.
#include <gtest/gtest.h>

#include "migrations.h"
#include "store_fixture.h"

namespace mesh::stores::sqlite::testing {
namespace {

using sdk::ErrorCode;
using SqliteStoreSchemasTest = SqliteStoreFixture;

const char* kSchemas = R"([{"name":"file","id_format":"absolute_path","attributes":[]}])";

TEST_F(SqliteStoreSchemasTest, StoresReplacesAndForgetsANodesSchemas) {
  auto store = opened();
  ASSERT_TRUE(store);
  enrol(*store, "web-01");
  auto none = store->provider_schemas("web-01");
  ASSERT_TRUE(none) << none.error().describe();
  EXPECT_FALSE(*none);  // never briefed

  ASSERT_TRUE(store->set_provider_schemas("web-01", kSchemas));
  auto got = store->provider_schemas("web-01");
  ASSERT_TRUE(got && *got);
  EXPECT_EQ(**got, kSchemas);

  ASSERT_TRUE(store->set_provider_schemas("web-01", "[]"));
  got = store->provider_schemas("web-01");
  ASSERT_TRUE(got && *got);
  EXPECT_EQ(**got, "[]");

  // A briefing without schemas (an older host): forgotten.
  ASSERT_TRUE(store->set_provider_schemas("web-01", ""));
  got = store->provider_schemas("web-01");
  ASSERT_TRUE(got);
  EXPECT_FALSE(*got);

  // Kept across a reopen.
  ASSERT_TRUE(store->set_provider_schemas("web-01", kSchemas));
  store.reset();
  store = opened();
  ASSERT_TRUE(store);
  got = store->provider_schemas("web-01");
  ASSERT_TRUE(got && *got);
  EXPECT_EQ(**got, kSchemas);
}

TEST_F(SqliteStoreSchemasTest, UnknownNodeAndOversizedSchemasAreRefused) {
  auto store = opened();
  ASSERT_TRUE(store);
  auto r = store->set_provider_schemas("nobody", kSchemas);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::NotFound);
  enrol(*store, "web-01");
  r = store->set_provider_schemas("web-01", std::string((1u << 20) + 1, ' '));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(r.error().message.find("web-01"), std::string::npos) << r.error().message;
  auto got = store->provider_schemas("web-01");
  ASSERT_TRUE(got);
  EXPECT_FALSE(*got);  // nothing stored
}

TEST_F(SqliteStoreSchemasTest, ReenrolmentOfARemovedNodeForgetsItsSchemas) {
  auto store = opened();
  ASSERT_TRUE(store);
  enrol(*store, "web-01");
  ASSERT_TRUE(store->set_provider_schemas("web-01", kSchemas));
  ASSERT_TRUE(store->remove_node("web-01", 3000, false));
  EXPECT_FALSE(store->set_provider_schemas("web-01", kSchemas));  // not enrolled
  ASSERT_TRUE(store->add_token(token("t2", "web-01", "s2", 3500, 10'000)));
  ASSERT_TRUE(store->enrol(hash_of("s2"), "web-01", "bb", 4000));
  auto got = store->provider_schemas("web-01");
  ASSERT_TRUE(got);
  EXPECT_FALSE(*got);
}

TEST_F(SqliteStoreSchemasTest, AVersion5FileMigratesKeepingItsData) {
  {
    auto store = opened();
    ASSERT_TRUE(store);
    enrol(*store, "web-01");
    ASSERT_TRUE(store->set_briefing("web-01", R"({"outcome":"pass"})", true));
  }
  {
    // The file as version 5 left it: no node_schemas table (nor what version 7 added).
    RawDb raw(db_path());
    ASSERT_EQ(raw.exec("DROP TABLE node_schemas"), SQLITE_OK);
    ASSERT_EQ(raw.exec("DROP TABLE records; DROP TABLE sequences; ALTER TABLE revisions DROP COLUMN composition"),
              SQLITE_OK);
    ASSERT_EQ(raw.exec("UPDATE schema_version SET version = 5"), SQLITE_OK);
  }
  auto store = opened();
  ASSERT_TRUE(store);
  {
    RawDb raw(db_path());
    EXPECT_EQ(raw.scalar("SELECT version FROM schema_version"), std::to_string(kSchemaVersion));
  }
  auto n = store->node("web-01");
  ASSERT_TRUE(n) << n.error().describe();
  EXPECT_EQ(n->briefing, R"({"outcome":"pass"})");
  auto got = store->provider_schemas("web-01");
  ASSERT_TRUE(got) << got.error().describe();
  EXPECT_FALSE(*got);  // briefed before schemas existed: none
  ASSERT_TRUE(store->set_provider_schemas("web-01", kSchemas));
  got = store->provider_schemas("web-01");
  ASSERT_TRUE(got && *got);
  EXPECT_EQ(**got, kSchemas);
}

}  // namespace
}  // namespace mesh::stores::sqlite::testing
