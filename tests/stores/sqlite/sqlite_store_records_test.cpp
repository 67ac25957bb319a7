// Records, sequences, compositions and compare-and-swap declarations (schema version 7, decision
// record 50): all or nothing, conflicts naming what conflicted, two writers racing on one file
// (threads with their own connections, and processes), the migration of a version-6 file, and
// retention as before.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "migrations.h"
#include "store_fixture.h"

namespace mesh::stores::sqlite::testing {
namespace {

using sdk::ErrorCode;
using sdk::RecordWrite;

RecordWrite put(const std::string& ns, const std::string& key, const std::string& value,
                std::optional<std::uint64_t> expected = std::nullopt) {
  RecordWrite w;
  w.ns = ns;
  w.key = key;
  w.value = value;
  w.expected_version = expected;
  return w;
}

RecordWrite erase(const std::string& ns, const std::string& key, std::optional<std::uint64_t> expected = std::nullopt) {
  RecordWrite w;
  w.ns = ns;
  w.key = key;
  w.erase = true;
  w.expected_version = expected;
  return w;
}

sdk::DeclarationWrite cas_write(const std::string& node, std::optional<std::uint64_t> expected,
                                const std::string& composition = {}) {
  sdk::DeclarationWrite w{node, [node](std::uint64_t rev) { return node + "@" + std::to_string(rev); }};
  w.composition = composition;
  w.expected_revision = expected;
  return w;
}

bool mentions(const sdk::Error& e, const std::string& s) { return e.message.find(s) != std::string::npos; }

class SqliteStoreRecordsTest : public SqliteStoreFixture {
 protected:
  void SetUp() override {
    store_ = opened();
    ASSERT_TRUE(store_);
    for (const char* n : {"web-01", "web-02", "web-03"}) enrol(*store_, n);
  }
  std::string count(const std::string& sql) { return RawDb(db_path()).scalar(sql); }
  std::uint64_t latest(SqliteStore& s, const std::string& node) {
    auto r = s.latest_revision(node);
    EXPECT_TRUE(r) << r.error().describe();
    return r && *r ? (*r)->revision : 0;
  }
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SqliteStoreRecordsTest, RecordsAreWrittenReadListedByPrefixAndVersioned) {
  auto none = store_->record("module", "web/1.0");
  ASSERT_TRUE(none) << none.error().describe();
  EXPECT_FALSE(*none);

  auto w = store_->put_records({put("module", "web/1.0", R"({"a":1})"), put("module", "web/1.1", "{}"),
                                put("module", "web2/1.0", "{}"), put("labels", "web-01", R"({"role":"web"})")},
                               5000);
  ASSERT_TRUE(w) << w.error().describe();
  ASSERT_EQ(w->size(), 4u);
  EXPECT_EQ((*w)[0].key, "web/1.0");
  EXPECT_EQ((*w)[0].version, 1u);
  EXPECT_EQ((*w)[0].updated_at_ms, 5000);

  auto again = store_->put_records({put("module", "web/1.0", R"({"a":2})")}, 6000);
  ASSERT_TRUE(again);
  EXPECT_EQ((*again)[0].version, 2u);
  auto r = store_->record("module", "web/1.0");
  ASSERT_TRUE(r && *r);
  EXPECT_EQ((*r)->ns, "module");
  EXPECT_EQ((*r)->value, R"({"a":2})");
  EXPECT_EQ((*r)->version, 2u);
  EXPECT_EQ((*r)->updated_at_ms, 6000);

  auto web = store_->records("module", "web/");
  ASSERT_TRUE(web) << web.error().describe();
  ASSERT_EQ(web->size(), 2u) << "web2/1.0 does not start with web/";
  EXPECT_EQ((*web)[0].key, "web/1.0");
  EXPECT_EQ((*web)[1].key, "web/1.1");
  auto all = store_->records("module", "");
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[2].key, "web2/1.0");
  auto labels = store_->records("labels", "");
  ASSERT_TRUE(labels);
  ASSERT_EQ(labels->size(), 1u);
  EXPECT_EQ((*labels)[0].ns, "labels");
  EXPECT_TRUE(store_->records("deploy", "")->empty());
  // A prefix ending in 0xFF bytes still bounds the range.
  ASSERT_TRUE(store_->put_records({put("bin", "a\xff", "1"), put("bin", "a\xff\xff", "2"), put("bin", "b", "3")}, 1));
  EXPECT_EQ(store_->records("bin", "a\xff")->size(), 2u);
}

TEST_F(SqliteStoreRecordsTest, AnExpectedVersionThatDoesNotHoldWritesNothingAndNamesTheRecord) {
  ASSERT_TRUE(store_->put_records({put("assignment", "web", "v1", 0)}, 1000)) << "0: must not exist yet";
  auto exists = store_->put_records({put("assignment", "db", "d1", 0), put("assignment", "web", "v2", 0)}, 2000);
  ASSERT_FALSE(exists);
  EXPECT_EQ(exists.error().code, ErrorCode::FailedPrecondition);
  EXPECT_TRUE(mentions(exists.error(), "assignment/web")) << exists.error().message;
  EXPECT_TRUE(mentions(exists.error(), "version 1")) << exists.error().message;
  EXPECT_FALSE(*store_->record("assignment", "db")) << "all or nothing: the first write is not kept";

  auto stale = store_->put_records({put("assignment", "web", "v2", 7)}, 2000);
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, ErrorCode::FailedPrecondition);
  EXPECT_TRUE(mentions(stale.error(), "expected version 7")) << stale.error().message;
  EXPECT_EQ((*store_->record("assignment", "web"))->value, "v1");

  auto ok = store_->put_records({put("assignment", "web", "v2", 1), put("assignment", "db", "d1", 0)}, 3000);
  ASSERT_TRUE(ok) << ok.error().describe();
  EXPECT_EQ((*ok)[0].version, 2u);
  EXPECT_EQ((*ok)[1].version, 1u);
  auto any = store_->put_records({put("assignment", "web", "v3")}, 4000);
  ASSERT_TRUE(any) << "nullopt: no check";
  EXPECT_EQ((*any)[0].version, 3u);
}

TEST_F(SqliteStoreRecordsTest, AnErasedRecordIsGoneButItsVersionNeverRestarts) {
  ASSERT_TRUE(store_->put_records({put("labels", "web-01", "{}")}, 1000));
  ASSERT_TRUE(store_->put_records({put("labels", "web-01", R"({"a":"b"})")}, 1001));  // version 2
  auto stale_erase = store_->put_records({erase("labels", "web-01", 1)}, 1002);
  ASSERT_FALSE(stale_erase);
  EXPECT_EQ(stale_erase.error().code, ErrorCode::FailedPrecondition);
  auto e = store_->put_records({erase("labels", "web-01", 2)}, 1003);
  ASSERT_TRUE(e) << e.error().describe();
  EXPECT_EQ((*e)[0].version, 3u);
  EXPECT_EQ((*e)[0].value, "");
  EXPECT_FALSE(*store_->record("labels", "web-01"));
  EXPECT_TRUE(store_->records("labels", "")->empty());
  // Erasing what does not exist changes nothing; with an expected version it must hold.
  ASSERT_TRUE(store_->put_records({erase("labels", "web-01"), erase("labels", "never")}, 1004));
  EXPECT_EQ(store_->put_records({erase("labels", "never", 1)}, 1004).error().code, ErrorCode::FailedPrecondition);

  // Written again: "must not exist" holds, and the version goes on from the erasure.
  EXPECT_EQ(store_->put_records({put("labels", "web-01", "x", 2)}, 1005).error().code,
            ErrorCode::FailedPrecondition)
      << "a compare-and-swap made against the old record cannot succeed";
  auto back = store_->put_records({put("labels", "web-01", "x", 0)}, 1006);
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ((*back)[0].version, 4u);
  EXPECT_EQ((*store_->record("labels", "web-01"))->value, "x");
}

TEST_F(SqliteStoreRecordsTest, BadRecordWritesAreRefusedNamingTheRecordAndWriteNothing) {
  EXPECT_EQ(store_->put_records({}, 1).error().code, ErrorCode::InvalidArgument);
  auto empty_ns = store_->put_records({put("", "k", "v")}, 1);
  EXPECT_EQ(empty_ns.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(empty_ns.error().path, "ns");
  auto bad_ns = store_->put_records({put("Module", "k", "v")}, 1);
  EXPECT_EQ(bad_ns.error().code, ErrorCode::InvalidArgument);
  EXPECT_TRUE(mentions(bad_ns.error(), "'Module'")) << bad_ns.error().message;
  EXPECT_EQ(store_->put_records({put(std::string(65, 'a'), "k", "v")}, 1).error().code, ErrorCode::InvalidArgument);
  auto empty_key = store_->put_records({put("module", "", "v")}, 1);
  EXPECT_EQ(empty_key.error().path, "key");
  EXPECT_EQ(store_->put_records({put("module", std::string(1025, 'k'), "v")}, 1).error().code,
            ErrorCode::InvalidArgument);
  EXPECT_EQ(store_->put_records({put("module", std::string("a\0b", 3), "v")}, 1).error().code,
            ErrorCode::InvalidArgument);
  auto twice = store_->put_records({put("module", "web/1", "a"), put("module", "web/1", "b")}, 1);
  EXPECT_EQ(twice.error().code, ErrorCode::InvalidArgument);
  EXPECT_TRUE(mentions(twice.error(), "module/web/1")) << twice.error().message;
  RecordWrite rendered = put("deploy", "000000000001", "");
  rendered.render = [](const sdk::DeliveryRecord&) { return std::string("{}"); };
  auto no_delivery = store_->put_records({rendered}, 1);
  EXPECT_EQ(no_delivery.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(no_delivery.error().path, "render");
  auto big = store_->put_records({put("module", "ok", "v"), put("pipeline_run", "000000000001",
                                                                std::string((16u << 20) + 1, 'x'))},
                                 1);
  EXPECT_EQ(big.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(big.error().path, "value");
  EXPECT_TRUE(mentions(big.error(), "pipeline_run/000000000001")) << big.error().message;
  EXPECT_EQ(count("SELECT count(*) FROM records"), "0");
}

TEST_F(SqliteStoreRecordsTest, SequencesCountFromOneByNameAndSurviveReopening) {
  EXPECT_EQ(*store_->next_sequence("deploy"), 1u);
  EXPECT_EQ(*store_->next_sequence("deploy"), 2u);
  EXPECT_EQ(*store_->next_sequence("pipeline_run"), 1u);
  store_.reset();
  store_ = opened();
  ASSERT_TRUE(store_);
  EXPECT_EQ(*store_->next_sequence("deploy"), 3u);
  EXPECT_EQ(store_->next_sequence("").error().code, ErrorCode::InvalidArgument);
}

TEST_F(SqliteStoreRecordsTest, DeclareWithWritesRevisionsCompositionsRecordsAndAnswerInOneTransaction) {
  ASSERT_TRUE(store_->remember_request(sdk::RequestRecord{"operator:alice", "n-1", "d", 100'000, {}}, 1000));
  const std::string comp = R"({"own":[],"modules":{"web":{"version":"1.4.2","resources":["file:/etc/motd"]}},)"
                           R"("operator":"alice","cause":"deploy","deploy":1})";
  RecordWrite deploy = put("deploy", "000000000001", "", 0);
  deploy.render = [](const sdk::DeliveryRecord& d) {
    return R"({"delivery":)" + std::to_string(d.id) + R"(,"targets":)" + std::to_string(d.targets.size()) + "}";
  };
  sdk::RequestAnswer answer{"operator:alice", "n-1",
                            [](const sdk::DeliveryRecord& d) { return "delivery " + std::to_string(d.id); }};
  const std::string deliveries_before = count("SELECT count(*) FROM deliveries");
  auto d = store_->declare_with({cas_write("web-01", 0, comp), cas_write("web-02", 0, comp), cas_write("web-03", 0, comp)},
                                {deploy, put("assignment", "web", R"({"selector":"role=web"})")}, 5000, 50, answer);
  ASSERT_TRUE(d) << d.error().describe();
  ASSERT_EQ(d->targets.size(), 3u);
  EXPECT_EQ(std::stoi(count("SELECT count(*) FROM deliveries")), std::stoi(deliveries_before) + 1) << "one delivery";
  for (const char* n : {"web-01", "web-02", "web-03"}) {
    auto rev = store_->latest_revision(n);
    ASSERT_TRUE(rev && *rev);
    EXPECT_EQ((*rev)->revision, 1u);
    EXPECT_EQ((*rev)->delivery, d->id);
    EXPECT_EQ((*rev)->composition, comp);
    EXPECT_EQ((*rev)->body, std::string(n) + "@1");
    auto h = store_->history(n, 10);
    ASSERT_TRUE(h && h->size() == 1u);
    EXPECT_EQ((*h)[0].composition, comp);
    EXPECT_EQ(store_->revision(n, 1)->composition, comp);
  }
  auto rec = store_->record("deploy", "000000000001");
  ASSERT_TRUE(rec && *rec);
  EXPECT_EQ((*rec)->value, R"({"delivery":)" + std::to_string(d->id) + R"(,"targets":3})");
  EXPECT_EQ((*rec)->updated_at_ms, 5000);
  EXPECT_TRUE(*store_->record("assignment", "web"));
  auto kept = store_->remember_request(sdk::RequestRecord{"operator:alice", "n-1", "d", 100'000, {}}, 1001);
  ASSERT_TRUE(kept && *kept && (*kept)->answer);
  EXPECT_EQ(*(*kept)->answer, "delivery " + std::to_string(d->id));

  // No optional answer: fine too; the next CAS writes on top of revision 1.
  auto next = store_->declare_with({cas_write("web-01", 1)}, {}, 6000, 50, std::nullopt);
  ASSERT_TRUE(next) << next.error().describe();
  EXPECT_EQ(next->targets[0].revision, 2u);
  EXPECT_EQ(store_->latest_revision("web-01")->value().composition, "") << "none given: all own";
}

TEST_F(SqliteStoreRecordsTest, AStaleExpectedRevisionOrVersionWritesNothingAtAll) {
  ASSERT_TRUE(store_->declare({write("web-02")}, 1000, 0));  // web-02 at 1, the others at 0
  ASSERT_TRUE(store_->put_records({put("deploy", "000000000001", "old")}, 1000));
  ASSERT_TRUE(store_->remember_request(sdk::RequestRecord{"operator:alice", "n-1", "d", 100'000, {}}, 1000));
  sdk::RequestAnswer answer{"operator:alice", "n-1", [](const sdk::DeliveryRecord&) { return std::string("ok"); }};
  const std::string deliveries = count("SELECT count(*) FROM deliveries");
  const std::string revisions = count("SELECT count(*) FROM revisions");
  bool rendered = false;
  RecordWrite rec = put("deploy", "000000000002", "", 0);
  rec.render = [&](const sdk::DeliveryRecord&) {
    rendered = true;
    return std::string("{}");
  };

  auto stale = store_->declare_with({cas_write("web-01", 0), cas_write("web-02", 0), cas_write("web-03", 0)},
                                    {rec}, 2000, 50, answer);
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, ErrorCode::FailedPrecondition);
  EXPECT_TRUE(mentions(stale.error(), "'web-02'")) << stale.error().message;
  EXPECT_TRUE(mentions(stale.error(), "expected its latest revision to be 0, but it is 1")) << stale.error().message;

  auto stale_record = store_->declare_with({cas_write("web-01", 0), cas_write("web-02", 1)},
                                           {rec, put("deploy", "000000000001", "new", 0)}, 2000, 50, answer);
  ASSERT_FALSE(stale_record);
  EXPECT_EQ(stale_record.error().code, ErrorCode::FailedPrecondition);
  EXPECT_TRUE(mentions(stale_record.error(), "deploy/000000000001")) << stale_record.error().message;

  auto unknown = store_->declare_with({cas_write("web-01", 0), cas_write("nobody", 0)}, {rec}, 2000, 50, answer);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::NotFound);
  EXPECT_TRUE(mentions(unknown.error(), "'nobody'")) << unknown.error().message;

  sdk::RequestAnswer not_remembered{"operator:alice", "never", answer.render};
  auto no_request = store_->declare_with({cas_write("web-01", 0)}, {rec}, 2000, 50, not_remembered);
  ASSERT_FALSE(no_request);
  EXPECT_EQ(no_request.error().code, ErrorCode::NotFound);

  RecordWrite too_big = put("deploy", "000000000003", "", 0);
  too_big.render = [](const sdk::DeliveryRecord&) { return std::string((16u << 20) + 1, 'x'); };
  auto big = store_->declare_with({cas_write("web-01", 0)}, {too_big}, 2000, 50, std::nullopt);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ErrorCode::InvalidArgument);

  EXPECT_EQ(count("SELECT count(*) FROM deliveries"), deliveries);
  EXPECT_EQ(count("SELECT count(*) FROM revisions"), revisions);
  EXPECT_EQ(latest(*store_, "web-01"), 0u);
  EXPECT_EQ(latest(*store_, "web-02"), 1u);
  EXPECT_EQ(store_->node("web-01")->declared_revision, 0u) << "the revision counter did not move";
  EXPECT_FALSE(*store_->record("deploy", "000000000002"));
  EXPECT_EQ((*store_->record("deploy", "000000000001"))->value, "old");
  EXPECT_FALSE((*store_->remember_request(sdk::RequestRecord{"operator:alice", "n-1", "d", 100'000, {}}, 1001))->answer);

  // declare() and declare_answered() honour expected_revision too.
  auto plain = store_->declare({cas_write("web-02", 5)}, 3000, 0);
  ASSERT_FALSE(plain);
  EXPECT_EQ(plain.error().code, ErrorCode::FailedPrecondition);
  auto plain_ok = store_->declare({cas_write("web-02", 1, R"({"own":["file:/a"]})")}, 3000, 0);
  ASSERT_TRUE(plain_ok) << plain_ok.error().describe();
  EXPECT_EQ(store_->latest_revision("web-02")->value().composition, R"({"own":["file:/a"]})");
  EXPECT_EQ(store_->declare_answered({cas_write("web-02", 1)}, 3000, 0, answer).error().code,
            ErrorCode::FailedPrecondition);
}

TEST_F(SqliteStoreRecordsTest, DeclareWithNoNodeWritesTheRecordsAndNoDelivery) {
  const std::string deliveries = count("SELECT count(*) FROM deliveries");
  RecordWrite rec = put("deploy", "000000000001", "", 0);
  std::uint64_t seen = 99;
  rec.render = [&](const sdk::DeliveryRecord& d) {
    seen = d.id;
    return std::string(R"({"skipped":3})");
  };
  auto d = store_->declare_with({}, {rec}, 1000, 50, std::nullopt);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->id, 0u);
  EXPECT_TRUE(d->targets.empty());
  EXPECT_EQ(seen, 0u);
  EXPECT_EQ(count("SELECT count(*) FROM deliveries"), deliveries);
  EXPECT_EQ((*store_->record("deploy", "000000000001"))->value, R"({"skipped":3})");
  // declare() itself still refuses an empty declaration.
  EXPECT_EQ(store_->declare({}, 1000, 0).error().code, ErrorCode::InvalidArgument);
  // A composition beyond the bound is refused naming the node.
  auto big = store_->declare_with({cas_write("web-01", 0, std::string((1u << 20) + 1, ' '))}, {}, 1, 0, std::nullopt);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ErrorCode::InvalidArgument);
  EXPECT_TRUE(mentions(big.error(), "'web-01'")) << big.error().message;
}

TEST_F(SqliteStoreRecordsTest, ARemovedAndReenrolledNodeHasNoLatestRevisionForCompareAndSwap) {
  ASSERT_TRUE(store_->declare({write("web-01")}, 1000, 0));
  ASSERT_TRUE(store_->declare({write("web-01")}, 1001, 0));
  ASSERT_TRUE(store_->remove_node("web-01", 2000, false));
  ASSERT_TRUE(store_->add_token(token("tok2", "web-01", "again")));
  ASSERT_TRUE(store_->enrol(hash_of("again"), "web-01", "bb", 3000));
  ASSERT_FALSE(*store_->latest_revision("web-01"));
  EXPECT_EQ(store_->declare_with({cas_write("web-01", 2)}, {}, 4000, 0, std::nullopt).error().code,
            ErrorCode::FailedPrecondition);
  auto d = store_->declare_with({cas_write("web-01", 0)}, {}, 4000, 0, std::nullopt);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->targets[0].revision, 3u) << "revision numbers continue";
}

TEST_F(SqliteStoreRecordsTest, RetentionIsAsBeforeAndLeavesRecordsAlone) {
  std::uint64_t rev = 0;
  for (int i = 0; i < 5; ++i) {
    auto d = store_->declare_with({cas_write("web-01", rev, "{\"n\":" + std::to_string(i) + "}")},
                                  {put("deploy", "00000000000" + std::to_string(i + 1), "{}")}, 1000 + i, 2,
                                  std::nullopt);
    ASSERT_TRUE(d) << d.error().describe();
    rev = d->targets[0].revision;
  }
  EXPECT_EQ(rev, 5u);
  auto h = store_->history("web-01", 10);
  ASSERT_TRUE(h);
  ASSERT_EQ(h->size(), 2u) << "retain 2: the newest two";
  EXPECT_EQ((*h)[0].revision, 5u);
  EXPECT_EQ((*h)[0].composition, R"({"n":4})");
  EXPECT_EQ((*h)[1].revision, 4u);
  EXPECT_EQ(store_->revision("web-01", 3).error().code, ErrorCode::NotFound);
  auto next = store_->next_revision("web-01", 1);
  ASSERT_TRUE(next && *next);
  EXPECT_EQ((*next)->revision, 2u) << "delivery targets are not pruned";
  EXPECT_EQ(store_->records("deploy", "")->size(), 5u);
}

// --- two writers racing on one file ----------------------------------------------------------------

// One "deploy" as the control plane does it: read both nodes' latest revisions and the counter
// record, then one declare_with with compare-and-swap on all three; retried on a conflict (and
// on Transient, the busy store). Each body says which count it was written at, so a lost update
// shows as a body that does not match its revision. Returns the conflicts seen, or -1 on error.
int deploy_loop(SqliteStore& store, int times) {
  int conflicts = 0;
  for (int done = 0; done < times;) {
    auto a = store.latest_revision("web-01");
    auto b = store.latest_revision("web-02");
    auto c = store.record("counter", "deploys");
    if (!a || !b || !c) return -1;
    const std::uint64_t ra = *a ? (*a)->revision : 0, rb = *b ? (*b)->revision : 0;
    const std::uint64_t version = *c ? (*c)->version : 0;
    const std::uint64_t n = *c ? std::stoull((*c)->value) : 0;
    auto body = [n](std::uint64_t rev) { return "count " + std::to_string(n + 1) + " rev " + std::to_string(rev); };
    sdk::DeclarationWrite wa{"web-01", body}, wb{"web-02", body};
    wa.expected_revision = ra;
    wb.expected_revision = rb;
    auto r = store.declare_with({wa, wb}, {put("counter", "deploys", std::to_string(n + 1), version)}, 1000, 0,
                                std::nullopt);
    if (r) {
      ++done;
    } else if (r.error().code == ErrorCode::FailedPrecondition || r.error().code == ErrorCode::Transient) {
      ++conflicts;
    } else {
      return -1;
    }
  }
  return conflicts;
}

// After the race: every write landed once, in order, none lost.
void expect_every_write_landed(SqliteStore& store, int total) {
  auto c = store.record("counter", "deploys");
  ASSERT_TRUE(c && *c);
  EXPECT_EQ((*c)->value, std::to_string(total));
  EXPECT_EQ((*c)->version, static_cast<std::uint64_t>(total));
  for (const char* n : {"web-01", "web-02"}) {
    auto h = store.history(n, UINT32_MAX);
    ASSERT_TRUE(h);
    ASSERT_EQ(h->size(), static_cast<std::size_t>(total)) << n;
    for (const auto& r : *h)
      EXPECT_EQ(r.body, "count " + std::to_string(r.revision) + " rev " + std::to_string(r.revision))
          << n << ": a write did not see the one before it";
  }
}

TEST_F(SqliteStoreRecordsTest, TwoInstancesOnOneFileRacingBothLandEveryWrite) {
  auto second = opened();
  ASSERT_TRUE(second);
  constexpr int kEach = 25;
  std::atomic<int> failures{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (SqliteStore* s : {store_.get(), second.get()})
    threads.emplace_back([&, s] {
      while (!go) std::this_thread::yield();
      if (deploy_loop(*s, kEach) < 0) ++failures;
    });
  go = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  expect_every_write_landed(*store_, 2 * kEach);
}

TEST_F(SqliteStoreRecordsTest, TwoProcessesRacingBothLandEveryWrite) {
  constexpr int kEach = 25;
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < 2; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: its own store on the same file; never returns into the test framework.
      ::close(go[1]);
      SqliteStore store(host_);
      if (!store.configure(config(db_path())) || !store.open()) ::_exit(3);
      char c;
      if (::read(go[0], &c, 1) != 0) ::_exit(4);  // blocks until the parent closes the pipe
      ::_exit(deploy_loop(store, kEach) < 0 ? 1 : 0);
    }
    children.push_back(pid);
  }
  ::close(go[0]);
  ::close(go[1]);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  expect_every_write_landed(*store_, 2 * kEach);
}

// --- migration ---------------------------------------------------------------------------------------

TEST_F(SqliteStoreRecordsTest, AVersion6FileMigratesKeepingItsRevisionsAsAllOwn) {
  ASSERT_TRUE(store_->declare({write("web-01"), write("web-02")}, 1000, 3));
  ASSERT_TRUE(store_->declare({write("web-01")}, 1001, 3));
  ASSERT_TRUE(store_->record_apply(report("web-01", 2, "applied", 1002, {"file:/etc/motd"})));
  const std::string deliveries = count("SELECT count(*) FROM deliveries");
  store_.reset();
  {
    // The file as version 6 left it: no records, no sequences, no compositions.
    RawDb raw(db_path());
    ASSERT_EQ(raw.exec("DROP TABLE records; DROP TABLE sequences; ALTER TABLE revisions DROP COLUMN composition; "
                       "UPDATE schema_version SET version = 6"),
              SQLITE_OK);
    ASSERT_EQ(raw.scalar("SELECT count(*) FROM pragma_table_info('revisions') WHERE name = 'composition'"), "0");
  }
  store_ = opened();
  ASSERT_TRUE(store_);
  EXPECT_EQ(count("SELECT version FROM schema_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(kSchemaVersion, 8);
  auto h = store_->history("web-01", 10);
  ASSERT_TRUE(h) << h.error().describe();
  ASSERT_EQ(h->size(), 2u);
  EXPECT_EQ((*h)[0].body, "web-01@2");
  EXPECT_EQ((*h)[0].composition, "") << "written before schema 7: all own";
  EXPECT_EQ(store_->node("web-01")->applied_revision, 2u);
  EXPECT_EQ(*store_->owned("web-01"), std::vector<std::string>{"file:/etc/motd"});
  EXPECT_EQ(count("SELECT count(*) FROM deliveries"), deliveries);
  EXPECT_TRUE(store_->records("module", "")->empty());
  EXPECT_EQ(*store_->next_sequence("deploy"), 1u);
  auto d = store_->declare_with({cas_write("web-01", 2, "{}"), cas_write("web-02", 1, "{}")},
                                {put("deploy", "000000000001", "{}", 0)}, 2000, 3, std::nullopt);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->targets[0].revision, 3u);
  EXPECT_EQ(d->targets[1].revision, 2u);
}

}  // namespace
}  // namespace mesh::stores::sqlite::testing
