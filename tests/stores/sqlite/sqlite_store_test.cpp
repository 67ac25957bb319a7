// The sqlite store: configuration, opening (schema, migrations, corrupt and foreign files),
// declarations, retention, deliveries, briefings and reopening.
#include <atomic>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "migrations.h"
#include "store_fixture.h"

namespace mesh::stores::sqlite::testing {
namespace {

using sdk::ErrorCode;

// --- configuration -------------------------------------------------------------------------------

using SqliteStoreConfigTest = SqliteStoreFixture;

TEST_F(SqliteStoreConfigTest, SchemaDocumentsPathAndBusyTimeout) {
  SqliteStore store(host_);
  const auto& schema = store.config_schema();
  const auto* path = schema.find("path");
  ASSERT_NE(path, nullptr);
  EXPECT_TRUE(path->required);
  EXPECT_EQ(path->type, sdk::ValueType::String);
  const auto* busy = schema.find("busy_timeout");
  ASSERT_NE(busy, nullptr);
  EXPECT_FALSE(busy->required);
  EXPECT_EQ(busy->type, sdk::ValueType::Int);
  ASSERT_TRUE(busy->default_value);
  EXPECT_EQ(*busy->default_value, sdk::Value(5000));
  EXPECT_NE(busy->description.find("millisecond"), std::string::npos);
}

TEST_F(SqliteStoreConfigTest, DefaultBusyTimeoutIsFilledIn) {
  SqliteStore store(host_);
  sdk::Value v = sdk::Value::object();
  v.set("path", db_path());
  ASSERT_TRUE(store.configure(v));
  EXPECT_TRUE(store.open());
}

TEST_F(SqliteStoreConfigTest, MissingDirectoryIsInvalidArgumentNamingPath) {
  SqliteStore store(host_);
  const std::string missing = (dir_.path() / "no-such-dir" / "mesh.db").string();
  auto r = store.configure(config(missing));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(r.error().path, "path");
  EXPECT_NE(r.error().message.find("no-such-dir"), std::string::npos) << r.error().message;
}

TEST_F(SqliteStoreConfigTest, MissingOrEmptyPathIsInvalidArgument) {
  SqliteStore store(host_);
  auto r = store.configure(sdk::Value::object());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(r.error().path, "path");
  r = store.configure(config(""));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "path");
}

TEST_F(SqliteStoreConfigTest, DirectoryAsPathIsInvalidArgument) {
  SqliteStore store(host_);
  auto r = store.configure(config(dir_.path().string()));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(r.error().path, "path");
}

TEST_F(SqliteStoreConfigTest, BadBusyTimeoutIsInvalidArgument) {
  SqliteStore store(host_);
  auto r = store.configure(config(db_path(), -1));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "busy_timeout");
  sdk::Value v = config(db_path());
  v.set("busy_timeout", "soon");
  r = store.configure(v);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "busy_timeout");
  v = config(db_path());
  v.set("colour", "red");
  r = store.configure(v);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "colour");
}

TEST_F(SqliteStoreConfigTest, CallsBeforeOpenFailWithFailedPrecondition) {
  SqliteStore unconfigured(host_);
  auto o = unconfigured.open();
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error().code, ErrorCode::FailedPrecondition);

  auto store = configured();
  auto n = store->nodes();
  ASSERT_FALSE(n);
  EXPECT_EQ(n.error().code, ErrorCode::FailedPrecondition);
  auto d = store->declare({write("a")}, 1, 0);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ErrorCode::FailedPrecondition);
  ASSERT_TRUE(store->open());
  auto again = store->open();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::FailedPrecondition);
}

// --- opening
// ---------------------------------------------------------------------------------------

using SqliteStoreOpenTest = SqliteStoreFixture;

TEST_F(SqliteStoreOpenTest, CreatesVersionedSchemaInWalMode) {
  auto store = opened();
  ASSERT_TRUE(store);
  ASSERT_TRUE(std::filesystem::exists(db_path()));
  RawDb raw(db_path());
  EXPECT_EQ(raw.scalar("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.scalar("SELECT version FROM schema_version"), std::to_string(kSchemaVersion));
  for (const char* table :
       {"nodes", "node_briefings", "tokens", "deliveries", "delivery_targets", "revisions",
        "apply_reports", "apply_report_owned", "owned", "drift_reports", "drift_items"})
    EXPECT_EQ(raw.scalar(std::string("SELECT count(*) FROM sqlite_schema WHERE type = 'table' "
                                     "AND name = '") +
                         table + "'"),
              "1")
        << table;
  auto nodes = store->nodes();
  ASSERT_TRUE(nodes);
  EXPECT_TRUE(nodes->empty());
  auto latest = store->latest_delivery();
  ASSERT_TRUE(latest);
  EXPECT_FALSE(*latest);
}

TEST_F(SqliteStoreOpenTest, CorruptFileFailsNamingTheFile) {
  {
    std::ofstream out(db_path(), std::ios::binary);
    for (int i = 0; i < 512; ++i) out << "this is not an sqlite database, just garbage. ";
  }
  auto store = configured();
  auto r = store->open();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Failed);
  EXPECT_NE(r.error().message.find(db_path()), std::string::npos) << r.error().message;
  // Still not open: later calls fail cleanly.
  auto n = store->nodes();
  ASSERT_FALSE(n);
  EXPECT_EQ(n.error().code, ErrorCode::FailedPrecondition);
}

TEST_F(SqliteStoreOpenTest, DamagedPagesAreFailedNotACrash) {
  {
    auto store = opened();
    ASSERT_TRUE(store);
    enrol(*store, "web-01");
  }
  {
    // Keep the 100-byte header, overwrite the rest of every page with garbage.
    std::fstream f(db_path(), std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(100);
    const std::string junk(8192, '\xA5');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto store = configured();
  auto r = store->open();
  if (r) {  // the damage may only show when the data is read
    auto n = store->nodes();
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error().code, ErrorCode::Failed);
    EXPECT_NE(n.error().message.find(db_path()), std::string::npos) << n.error().message;
  } else {
    EXPECT_EQ(r.error().code, ErrorCode::Failed);
    EXPECT_NE(r.error().message.find(db_path()), std::string::npos) << r.error().message;
  }
}

TEST_F(SqliteStoreOpenTest, NewerSchemaVersionIsRefusedNamingFileAndVersions) {
  {
    auto store = opened();
    ASSERT_TRUE(store);
  }
  {
    RawDb raw(db_path());
    ASSERT_EQ(raw.exec("UPDATE schema_version SET version = " + std::to_string(kSchemaVersion + 1)), SQLITE_OK);
  }
  auto store = configured();
  auto r = store->open();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::FailedPrecondition);
  const auto& m = r.error().message;
  EXPECT_NE(m.find(db_path()), std::string::npos) << m;
  EXPECT_NE(m.find("version " + std::to_string(kSchemaVersion + 1)), std::string::npos) << m;
  EXPECT_NE(m.find("version " + std::to_string(kSchemaVersion)), std::string::npos) << m;
  // Refused, not modified.
  RawDb raw(db_path());
  EXPECT_EQ(raw.scalar("SELECT version FROM schema_version"), std::to_string(kSchemaVersion + 1));
}

TEST_F(SqliteStoreOpenTest, ForeignSqliteDatabaseIsRefusedUntouched) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path().c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE recipes (name TEXT)", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = configured();
  auto r = store->open();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::FailedPrecondition);
  EXPECT_NE(r.error().message.find(db_path()), std::string::npos);
  RawDb raw(db_path());
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM sqlite_schema WHERE name = 'nodes'"), "0");
}

TEST_F(SqliteStoreOpenTest, EmptyExistingFileBecomesAStore) {
  { std::ofstream out(db_path()); }
  auto store = opened();
  ASSERT_TRUE(store);
  enrol(*store, "web-01");
}

TEST_F(SqliteStoreOpenTest, ReopenAfterCloseKeepsEverything) {
  {
    auto store = opened();
    ASSERT_TRUE(store);
    enrol(*store, "web-01", "key-1");
    ASSERT_TRUE(store->add_token(token("spare", "web-02", "s2", 10, 99'999)));
    ASSERT_TRUE(store->set_briefing("web-01", R"({"lines":[]})", false));
    ASSERT_TRUE(store->declare({write("web-01")}, 3000, 0));
    ASSERT_TRUE(store->declare({write("web-01")}, 3100, 0));
    ASSERT_TRUE(store->record_apply(report("web-01", 2, "applied", 4000, {"file:/b", "file:/a"})));
    sdk::DriftReport drift{
        "web-01", "scan-1", 2, 4500, {{"file:/a", "content differs", "repaired"}}};
    ASSERT_TRUE(store->record_drift(drift));
    ASSERT_TRUE(store->touch({{"web-01", 5000, 0, "0.1.0", "idle"}}));
  }
  auto store = opened();
  ASSERT_TRUE(store);
  auto n = store->node("web-01");
  ASSERT_TRUE(n) << n.error().describe();
  EXPECT_EQ(n->public_key, "key-1");
  EXPECT_EQ(n->generation, 1u);
  EXPECT_EQ(n->applied_revision, 2u);
  EXPECT_EQ(n->last_outcome, "applied");
  EXPECT_EQ(n->last_contact_ms, 5000);
  EXPECT_EQ(n->host_version, "0.1.0");
  EXPECT_EQ(n->host_state, "idle");
  EXPECT_EQ(n->briefing, R"({"lines":[]})");
  EXPECT_FALSE(n->eligible);
  auto tokens = store->tokens(100);
  ASSERT_TRUE(tokens);
  ASSERT_EQ(tokens->size(), 1u);
  EXPECT_EQ((*tokens)[0].id, "spare");
  auto latest = store->latest_revision("web-01");
  ASSERT_TRUE(latest);
  ASSERT_TRUE(*latest);
  EXPECT_EQ((*latest)->revision, 2u);
  EXPECT_EQ((*latest)->body, "web-01@2");
  auto delivery = store->latest_delivery();
  ASSERT_TRUE(delivery && *delivery);
  EXPECT_EQ((*delivery)->id, 2u);
  auto owned = store->owned("web-01");
  ASSERT_TRUE(owned);
  EXPECT_EQ(*owned, (std::vector<std::string>{"file:/a", "file:/b"}));
  auto drift = store->last_drift("web-01", true);
  ASSERT_TRUE(drift && *drift);
  EXPECT_EQ((*drift)->scan_id, "scan-1");
  // Counters continue after reopening.
  auto next = store->declare({write("web-01")}, 6000, 0);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->id, 3u);
  EXPECT_EQ(next->targets.at(0).revision, 3u);
}

TEST_F(SqliteStoreOpenTest, WriteWaitsForLockThenFailsTransient) {
  auto store = opened({}, 50);
  ASSERT_TRUE(store);
  enrol(*store, "web-01");
  RawDb other(db_path());
  ASSERT_EQ(other.exec("BEGIN IMMEDIATE"), SQLITE_OK);
  auto r = store->declare({write("web-01")}, 1, 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Transient);
  ASSERT_EQ(other.exec("ROLLBACK"), SQLITE_OK);
  auto ok = store->declare({write("web-01")}, 1, 0);
  ASSERT_TRUE(ok) << ok.error().describe();
  EXPECT_EQ(ok->targets.at(0).revision, 1u);
}

// --- declarations and deliveries
// ---------------------------------------------------------------------

using SqliteStoreDeclareTest = SqliteStoreFixture;

TEST_F(SqliteStoreDeclareTest, AssignsRevisionsStoresBodyAndDigest) {
  auto store = opened();
  ASSERT_TRUE(store);
  enrol(*store, "web-02");
  enrol(*store, "web-01");
  std::vector<std::uint64_t> rendered;
  std::vector<sdk::DeclarationWrite> writes{{"web-02",
                                             [&](std::uint64_t rev) {
                                               rendered.push_back(rev);
                                               return std::string("abc");
                                             }},
                                            write("web-01")};
  auto d = store->declare(writes, 7000, 0);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->id, 1u);
  EXPECT_EQ(d->created_at_ms, 7000);
  ASSERT_EQ(d->targets.size(), 2u);
  EXPECT_EQ(d->targets[0].node, "web-01");  // node-name order
  EXPECT_EQ(d->targets[1].node, "web-02");
  EXPECT_EQ(rendered, std::vector<std::uint64_t>{1});

  auto rev = store->revision("web-02", 1);
  ASSERT_TRUE(rev) << rev.error().describe();
  EXPECT_EQ(rev->body, "abc");
  // SHA-256("abc"), FIPS 180-2 test vector, lower-case hex.
  EXPECT_EQ(rev->digest, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(rev->delivery, 1u);
  EXPECT_EQ(rev->created_at_ms, 7000);
  EXPECT_EQ(rev->node, "web-02");

  // Durable and visible to another connection once declare returned.
  RawDb raw(db_path());
  EXPECT_EQ(raw.scalar("SELECT body FROM revisions WHERE node = 'web-01'"), "web-01@1");

  auto d2 = store->declare({write("web-01")}, 8000, 0);
  ASSERT_TRUE(d2);
  EXPECT_EQ(d2->id, 2u);
  ASSERT_EQ(d2->targets.size(), 1u);
  EXPECT_EQ(d2->targets[0].revision, 2u);
  auto latest = store->latest_revision("web-01");
  ASSERT_TRUE(latest && *latest);
  EXPECT_EQ((*latest)->revision, 2u);
  EXPECT_EQ((*latest)->body, "web-01@2");
}

TEST_F(SqliteStoreDeclareTest, UnknownNodeWritesNothing) {
  auto store = opened();
  ASSERT_TRUE(store);
  enrol(*store, "web-01");
  bool rendered = false;
  std::vector<sdk::DeclarationWrite> writes{{"web-01",
                                             [&](std::uint64_t) {
                                               rendered = true;
                                               return std::string("x");
                                             }},
                                            write("ghost")};
  auto d = store->declare(writes, 1, 0);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ErrorCode::NotFound);
  EXPECT_NE(d.error().message.find("ghost"), std::string::npos) << d.error().message;
  EXPECT_FALSE(rendered);
  auto latest = store->latest_revision("web-01");
  ASSERT_TRUE(latest);
  EXPECT_FALSE(*latest);
  auto ld = store->latest_delivery();
  ASSERT_TRUE(ld);
  EXPECT_FALSE(*ld);
  RawDb raw(db_path());
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM revisions"), "0");
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM deliveries"), "0");
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM delivery_targets"), "0");
  EXPECT_EQ(raw.scalar("SELECT last_revision FROM nodes WHERE name = 'web-01'"), "0");
  auto ok = store->declare({write("web-01")}, 2, 0);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->id, 1u);
  EXPECT_EQ(ok->targets[0].revision, 1u);
}

TEST_F(SqliteStoreDeclareTest, RejectsEmptyDuplicateAndRenderless) {
  auto store = opened();
  ASSERT_TRUE(store);
  enrol(*store, "web-01");
  auto empty = store->declare({}, 1, 0);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, ErrorCode::InvalidArgument);
  auto dup = store->declare({write("web-01"), write("web-01")}, 1, 0);
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(dup.error().message.find("web-01"), std::string::npos);
  auto none = store->declare({sdk::DeclarationWrite{"web-01", {}}}, 1, 0);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::InvalidArgument);
  auto latest = store->latest_delivery();
  ASSERT_TRUE(latest);
  EXPECT_FALSE(*latest);
}

TEST_F(SqliteStoreDeclareTest, ThrowingRenderRollsBackAndStoreStaysUsable) {
  auto store = opened();
  ASSERT_TRUE(store);
  enrol(*store, "web-01");
  enrol(*store, "web-02");
  std::vector<sdk::DeclarationWrite> writes{
      write("web-01"),
      {"web-02", [](std::uint64_t) -> std::string { throw std::runtime_error("no signer"); }}};
  auto d = store->declare(writes, 1, 0);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ErrorCode::Internal);
  EXPECT_NE(d.error().message.find("no signer"), std::string::npos);
  auto latest = store->latest_revision("web-01");
  ASSERT_TRUE(latest);
  EXPECT_FALSE(*latest);
  auto ok = store->declare({write("web-01"), write("web-02")}, 2, 0);
  ASSERT_TRUE(ok) << ok.error().describe();
  EXPECT_EQ(ok->id, 1u);
}

TEST_F(SqliteStoreDeclareTest, RetentionKeepsNewestAndRevisionNumbersContinue) {
  auto store = opened();
  ASSERT_TRUE(store);
  enrol(*store, "web-01");
  enrol(*store, "web-02");
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE(store->declare({write("web-01")}, i, 2));
  ASSERT_TRUE(store->declare({write("web-02")}, 10, 2));
  auto h = store->history("web-01", 100);
  ASSERT_TRUE(h);
  ASSERT_EQ(h->size(), 2u);
  EXPECT_EQ((*h)[0].revision, 5u);
  EXPECT_EQ((*h)[1].revision, 4u);
  auto pruned = store->revision("web-01", 3);
  ASSERT_FALSE(pruned);
  EXPECT_EQ(pruned.error().code, ErrorCode::NotFound);
  EXPECT_NE(pruned.error().message.find("revision 3"), std::string::npos);
  EXPECT_NE(pruned.error().message.find("web-01"), std::string::npos);

  // retain 1: only the one just written survives; the numbers continue.
  auto d = store->declare({write("web-01")}, 20, 1);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->targets[0].revision, 6u);
  h = store->history("web-01", 100);
  ASSERT_TRUE(h);
  ASSERT_EQ(h->size(), 1u);
  EXPECT_EQ((*h)[0].revision, 6u);
  EXPECT_EQ((*h)[0].body, "web-01@6");

  // retain 0 keeps everything from now on.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->declare({write("web-01")}, 30 + i, 0));
  h = store->history("web-01", 100);
  ASSERT_TRUE(h);
  ASSERT_EQ(h->size(), 4u);
  EXPECT_EQ((*h)[0].revision, 9u);
  EXPECT_EQ((*h)[3].revision, 6u);

  // Other nodes are not pruned by a node's retention.
  auto h2 = store->history("web-02", 100);
  ASSERT_TRUE(h2);
  EXPECT_EQ(h2->size(), 1u);

  // Deliveries outlive pruned revisions.
  auto first = store->delivery(1);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->targets.size(), 1u);
  EXPECT_EQ(first->targets[0].revision, 1u);
}

TEST_F(SqliteStoreDeclareTest, HistoryIsNewestFirstWithLimit) {
  auto store = opened();
  ASSERT_TRUE(store);
  enrol(*store, "web-01");
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(store->declare({write("web-01")}, 100 * i, 0));
  auto h = store->history("web-01", 3);
  ASSERT_TRUE(h);
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ((*h)[0].revision, 4u);
  EXPECT_EQ((*h)[0].created_at_ms, 400);
  EXPECT_EQ((*h)[2].revision, 2u);
  auto none = store->history("web-01", 0);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  auto unknown = store->history("ghost", 3);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::NotFound);
  EXPECT_NE(unknown.error().message.find("ghost"), std::string::npos);
}

TEST_F(SqliteStoreDeclareTest, DeliveriesByIdAndLatestWithTargetsInNameOrder) {
  auto store = opened();
  ASSERT_TRUE(store);
  for (const char* n : {"c", "a", "b"}) enrol(*store, n);
  ASSERT_TRUE(store->declare({write("c"), write("a")}, 10, 0));
  ASSERT_TRUE(store->declare({write("b"), write("c"), write("a")}, 20, 0));
  auto d1 = store->delivery(1);
  ASSERT_TRUE(d1);
  EXPECT_EQ(d1->created_at_ms, 10);
  ASSERT_EQ(d1->targets.size(), 2u);
  EXPECT_EQ(d1->targets[0].node, "a");
  EXPECT_EQ(d1->targets[1].node, "c");
  auto latest = store->latest_delivery();
  ASSERT_TRUE(latest && *latest);
  EXPECT_EQ((*latest)->id, 2u);
  ASSERT_EQ((*latest)->targets.size(), 3u);
  EXPECT_EQ((*latest)->targets[0].node, "a");
  EXPECT_EQ((*latest)->targets[0].revision, 2u);
  EXPECT_EQ((*latest)->targets[1].node, "b");
  EXPECT_EQ((*latest)->targets[1].revision, 1u);
  EXPECT_EQ((*latest)->targets[2].node, "c");
  auto missing = store->delivery(3);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::NotFound);
  EXPECT_NE(missing.error().message.find("3"), std::string::npos);
  auto huge = store->delivery(~std::uint64_t{0});
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().code, ErrorCode::NotFound);
}

TEST_F(SqliteStoreDeclareTest, DeliveryIdsNeverReusedAfterDeletes) {
  auto store = opened();
  ASSERT_TRUE(store);
  enrol(*store, "web-01");
  ASSERT_TRUE(store->declare({write("web-01")}, 1, 0));
  ASSERT_TRUE(store->declare({write("web-01")}, 2, 0));
  {
    // An operator tidying by hand must not make ids come back.
    RawDb raw(db_path());
    ASSERT_EQ(raw.exec("PRAGMA foreign_keys = ON; DELETE FROM revisions; DELETE FROM deliveries"),
              SQLITE_OK);
  }
  auto d = store->declare({write("web-01")}, 3, 0);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->id, 3u);
  EXPECT_EQ(d->targets[0].revision, 3u);
}

TEST_F(SqliteStoreDeclareTest, ConcurrentDeclaresFromTwoInstancesNeverShareARevision) {
  auto a = opened();
  auto b = opened();
  ASSERT_TRUE(a && b);
  enrol(*a, "web-01");
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      SqliteStore& s = t % 2 ? *a : *b;
      for (int i = 0; i < 10; ++i)
        if (!s.declare({write("web-01")}, i, 0)) ++failures;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  auto h = a->history("web-01", 100);
  ASSERT_TRUE(h);
  ASSERT_EQ(h->size(), 40u);
  for (std::size_t i = 0; i < h->size(); ++i) {
    EXPECT_EQ((*h)[i].revision, 40u - i);
    EXPECT_EQ((*h)[i].body, "web-01@" + std::to_string(40 - i));
  }
}

// --- briefings
// -------------------------------------------------------------------------------------

using SqliteStoreBriefingTest = SqliteStoreFixture;

TEST_F(SqliteStoreBriefingTest, StoresTextAndEligibility) {
  auto store = opened();
  ASSERT_TRUE(store);
  enrol(*store, "web-01");
  auto n = store->node("web-01");
  ASSERT_TRUE(n);
  EXPECT_TRUE(n->eligible);
  EXPECT_EQ(n->briefing, "");
  ASSERT_TRUE(store->set_briefing("web-01", R"({"outcome":"failed"})", false));
  n = store->node("web-01");
  ASSERT_TRUE(n);
  EXPECT_FALSE(n->eligible);
  EXPECT_EQ(n->briefing, R"({"outcome":"failed"})");
  ASSERT_TRUE(store->set_briefing("web-01", R"({"outcome":"passed"})", true));
  auto all = store->nodes();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_TRUE((*all)[0].eligible);
  EXPECT_EQ((*all)[0].briefing, R"({"outcome":"passed"})");
}

TEST_F(SqliteStoreBriefingTest, UnknownNodeIsNotFound) {
  auto store = opened();
  ASSERT_TRUE(store);
  auto r = store->set_briefing("ghost", "{}", true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::NotFound);
  EXPECT_NE(r.error().message.find("ghost"), std::string::npos);
  RawDb raw(db_path());
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM node_briefings"), "0");
}

TEST_F(SqliteStoreBriefingTest, NodesAreSortedByName) {
  auto store = opened();
  ASSERT_TRUE(store);
  for (const char* n : {"web-10", "db-01", "web-02"}) enrol(*store, n);
  auto all = store->nodes();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].name, "db-01");
  EXPECT_EQ((*all)[1].name, "web-02");
  EXPECT_EQ((*all)[2].name, "web-10");
  auto missing = store->node("ghost");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::NotFound);
  EXPECT_NE(missing.error().message.find("ghost"), std::string::npos);
}

}  // namespace
}  // namespace mesh::stores::sqlite::testing
