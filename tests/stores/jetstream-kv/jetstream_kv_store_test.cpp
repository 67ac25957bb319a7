// The jetstream-kv store's own behaviour beyond the conformance suite, on a real nats-server with
// JetStream on loopback: operations in parts, a restart resumes where it stopped, the local file's
// identity, a malformed operation in the log, servers down, config errors.
#include <nats/nats.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <vector>

#include "stream_log.h"

#include "jetstream_kv_fixture.h"

namespace mesh::stores::jetstream_kv::testing {
namespace {

class JetStreamKvStoreTest : public JetStreamKvTest {
 protected:
  sdk::Value config(const std::string& file) const { return store_config({server_.url()}, prefix_, 1, local(file)); }
  std::string prefix_ = fresh_prefix();
};

TEST_F(JetStreamKvStoreTest, ADeclarationLargerThanMaxPayloadGoesInPartsAndAnotherInstanceReadsIt) {
  auto a = open_store(host_, config("a.db"));
  auto b = open_store(host_, config("b.db"));
  ASSERT_TRUE(a && b);
  enrol(*a, "web-01");
  const std::string big(3 * 1024 * 1024 + 17, 'x');  // the server's max_payload is 1 MiB
  auto d = a->declare({sdk::DeclarationWrite{"web-01", [&](std::uint64_t) { return big; }}}, 100, 0);
  ASSERT_TRUE(d) << d.error().describe();
  auto rev = b->latest_revision("web-01");
  ASSERT_TRUE(rev && *rev) << (rev ? "none" : rev.error().describe());
  EXPECT_EQ((*rev)->body.size(), big.size());
  EXPECT_EQ((*rev)->body, big);
  // The commit is the one operation: the parts took stream sequences but were not applied.
  EXPECT_EQ(a->applied_sequence(), b->applied_sequence());
}

TEST_F(JetStreamKvStoreTest, ARestartResumesWhereItStoppedAndCatchesUpWithWhatOthersWrote) {
  std::uint64_t applied = 0;
  {
    auto a = open_store(host_, config("a.db"));
    ASSERT_TRUE(a);
    enrol(*a, "web-01");
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(a->next_sequence("deploy"));
    applied = a->applied_sequence();
    EXPECT_GT(applied, 0u);
  }
  {
    auto b = open_store(host_, config("b.db"));
    ASSERT_TRUE(b);
    ASSERT_TRUE(b->next_sequence("deploy"));
  }
  auto a = open_store(host_, config("a.db"));
  ASSERT_TRUE(a);
  // Each operation was applied once: the counter is where the six calls left it.
  auto next = a->next_sequence("deploy");
  ASSERT_TRUE(next) << next.error().describe();
  EXPECT_EQ(*next, 7u);
  EXPECT_GT(a->applied_sequence(), applied);
}

// Reads share catch-ups (decision 128) and stay linearizable: a read that starts after another
// instance's write returned sees that write, however many reads run at once.
TEST_F(JetStreamKvStoreTest, ConcurrentReadsShareCatchUpsAndEachSeesEveryWriteFinishedBeforeItStarted) {
  auto a = open_store(host_, config("a.db"));
  auto b = open_store(host_, config("b.db"));
  ASSERT_TRUE(a && b);
  enrol(*b, "web-01");
  constexpr int kWrites = 60;
  std::atomic<int> written{0};
  std::atomic<bool> stop{false};
  std::atomic<int> stale{0}, failed{0}, reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t)
    readers.emplace_back([&] {
      while (!stop.load()) {
        const int before = written.load();  // finished before this read starts
        auto rev = a->latest_revision("web-01");
        reads.fetch_add(1);
        if (!rev) {
          failed.fetch_add(1);
          continue;
        }
        const int seen = *rev ? std::stoi((*rev)->body) : 0;
        if (seen < before) stale.fetch_add(1);
      }
    });
  // At least kWrites writes, and on until the readers made kReads reads (a loaded machine may
  // let the writer run ahead of them); bounded by kMaxWrites.
  constexpr int kReads = 4 * kWrites, kMaxWrites = 50 * kWrites;
  int k = 0;
  while (k < kMaxWrites && (k < kWrites || reads.load() < kReads)) {
    const std::string body = std::to_string(++k);
    auto d = b->declare({sdk::DeclarationWrite{"web-01", [&](std::uint64_t) { return body; }}}, 100, 0);
    ASSERT_TRUE(d) << d.error().describe();
    written.store(k);
  }
  stop.store(true);
  for (auto& r : readers) r.join();
  EXPECT_EQ(stale.load(), 0) << "reads that missed a write finished before they started";
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GE(reads.load(), kReads) << "in " << k << " writes";
  EXPECT_GT(a->reads_shared(), 0u) << reads.load() << " reads, each asked the stream itself";
}

TEST_F(JetStreamKvStoreTest, ALocalFileMadeFromAnotherStreamIsRefusedNamingTheFile) {
  {
    auto a = open_store(host_, config("a.db"));
    ASSERT_TRUE(a);
  }
  auto other = std::make_unique<JetStreamKvStore>(host_);
  ASSERT_TRUE(other->configure(store_config({server_.url()}, fresh_prefix(), 1, local("a.db"))));
  auto r = other->open();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, sdk::ErrorCode::FailedPrecondition);
  EXPECT_NE(r.error().message.find(local("a.db")), std::string::npos) << r.error().message;
}

TEST_F(JetStreamKvStoreTest, AMalformedOperationInTheLogIsSkippedAndTheStoreGoesOn) {
  auto a = open_store(host_, config("a.db"));
  ASSERT_TRUE(a);
  enrol(*a, "web-01");
  natsConnection* nc = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&nc, server_.url().c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_PublishString(nc, (prefix_ + ".op").c_str(), "not an operation"), NATS_OK);
  ASSERT_EQ(natsConnection_Flush(nc), NATS_OK);
  natsConnection_Destroy(nc);
  auto b = open_store(host_, config("b.db"));
  ASSERT_TRUE(b);
  auto n = b->node("web-01");
  ASSERT_TRUE(n) << n.error().describe();
  ASSERT_TRUE(a->put_records({sdk::RecordWrite{"conf", "k", "v", 0u}}, 10));
  auto rec = b->record("conf", "k");
  ASSERT_TRUE(rec && *rec);
  EXPECT_EQ((*rec)->value, "v");
}

TEST_F(JetStreamKvStoreTest, WithTheServerDownReadsAndWritesAreRetryableErrorsNotStaleAnswers) {
  auto a = open_store(host_, config("a.db"));
  ASSERT_TRUE(a);
  enrol(*a, "web-01");
  server_.stop();
  auto n = a->node("web-01");
  ASSERT_FALSE(n);
  EXPECT_TRUE(n.error().code == sdk::ErrorCode::Unavailable || n.error().code == sdk::ErrorCode::Timeout)
      << n.error().describe();
  auto w = a->next_sequence("deploy");
  ASSERT_FALSE(w);
  EXPECT_TRUE(w.error().code == sdk::ErrorCode::Unavailable || w.error().code == sdk::ErrorCode::Timeout)
      << w.error().describe();
  server_.start();
  // Back: it reconnects by itself and goes on.
  sdk::Result<std::uint64_t> again = sdk::fail(sdk::ErrorCode::Unavailable, "not tried");
  for (int i = 0; i < 100 && !again; ++i) {
    again = a->next_sequence("deploy");
    if (!again) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(again) << again.error().describe();
  EXPECT_EQ(*again, 1u);
}

TEST_F(JetStreamKvStoreTest, BadConfigIsRefusedNamingTheField) {
  auto check = [&](sdk::Value c, const std::string& field) {
    JetStreamKvStore s(host_);
    auto r = s.configure(c);
    ASSERT_FALSE(r) << field;
    EXPECT_EQ(r.error().code, sdk::ErrorCode::InvalidArgument);
    EXPECT_EQ(r.error().path.substr(0, field.size()), field) << r.error().describe();
  };
  auto c = config("a.db");
  c.set("replicas", std::int64_t{0});
  check(c, "replicas");
  c = config("a.db");
  c.set("prefix", std::string("a.b"));
  check(c, "prefix");
  c = config("a.db");
  c.set("servers", sdk::Value::array());
  check(c, "servers");
  c = config("a.db");
  sdk::Value list = sdk::Value::array();
  list.as_array().push_back(sdk::Value(std::string("http://127.0.0.1:1")));
  c.set("servers", list);
  check(c, "servers[0]");
  c = config("no-such-dir/a.db");
  check(c, "local_path");
}


TEST_F(JetStreamKvStoreTest, OfTwoPublishersExpectingTheSameLastOperationExactlyOneWins) {
  LogSettings settings;
  settings.servers = {server_.url()};
  settings.prefix = prefix_;
  auto one = StreamLog::open(settings);
  auto two = StreamLog::open(settings);
  ASSERT_TRUE(one && two) << (one ? two.error().describe() : one.error().describe());
  StreamLog& a = **one;
  StreamLog& b = **two;
  // 0: no operation yet (the header is sent, although nats.c's options would leave a 0 out).
  auto first = a.publish(a.op_subject(), "x", 0, "id-1");
  ASSERT_TRUE(first) << first.error().describe();
  EXPECT_FALSE(first->wrong_last);
  auto late = b.publish(b.op_subject(), "y", 0, "id-2");
  ASSERT_TRUE(late) << late.error().describe();
  EXPECT_TRUE(late->wrong_last);
  // A part (another subject) does not move the operations' last sequence.
  ASSERT_TRUE(b.publish(b.part_subject("p", 0), "part", std::nullopt, "id-p"));
  std::uint64_t last = first->seq;
  for (int round = 0; round < 20; ++round) {
    std::optional<StreamLog::Published> got[2];
    std::thread ta([&] { if (auto r = a.publish(a.op_subject(), "a", last, "a-" + std::to_string(round))) got[0] = *r; });
    std::thread tb([&] { if (auto r = b.publish(b.op_subject(), "b", last, "b-" + std::to_string(round))) got[1] = *r; });
    ta.join();
    tb.join();
    ASSERT_TRUE(got[0] && got[1]);
    ASSERT_NE(got[0]->wrong_last, got[1]->wrong_last) << "round " << round << ": both or neither won";
    last = got[0]->wrong_last ? got[1]->seq : got[0]->seq;
  }
}

// Another control plane writes between this instance's catch-up and its publish (inside the
// render, which runs after the one and before the other): the publish loses JetStream's
// compare-and-swap, the instance catches up and renders again on the new state.
TEST_F(JetStreamKvStoreTest, AWriteThatLosesTheCompareAndSwapCatchesUpAndRendersAgain) {
  auto a = open_store(host_, config("a.db"));
  auto b = open_store(host_, config("b.db"));
  ASSERT_TRUE(a && b);
  enrol(*a, "web-01");
  int renders = 0;
  sdk::DeclarationWrite from_a{"web-01", [&](std::uint64_t rev) {
                                 if (renders++ == 0) {
                                   auto won = b->declare({sdk::DeclarationWrite{"web-01", [](std::uint64_t r) {
                                                            return "b@" + std::to_string(r);
                                                          }}},
                                                         100, 0);
                                   EXPECT_TRUE(won) << won.error().describe();
                                 }
                                 return "a@" + std::to_string(rev);
                               }};
  auto d = a->declare({from_a}, 101, 0);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(renders, 2);
  EXPECT_EQ(d->id, 2u);
  EXPECT_EQ(d->targets.at(0).revision, 2u);
  auto h = b->history("web-01", 10);
  ASSERT_TRUE(h);
  ASSERT_EQ(h->size(), 2u);
  EXPECT_EQ((*h)[0].body, "a@2");
  EXPECT_EQ((*h)[1].body, "b@1");

  // The same race with a compare-and-swap of the caller's own: B wins, A writes nothing.
  renders = 0;
  from_a.expected_revision = 2;
  auto lost = a->declare({from_a}, 102, 0);
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().code, sdk::ErrorCode::FailedPrecondition) << lost.error().describe();
  h = a->history("web-01", 10);
  ASSERT_TRUE(h);
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ((*h)[0].body, "b@3");
}

TEST_F(JetStreamKvStoreTest, AStreamPurgedByHandIsRefusedNamingTheSequenceAndTheLocalFile) {
  auto a = open_store(host_, config("a.db"));
  ASSERT_TRUE(a);
  enrol(*a, "web-01");
  ASSERT_TRUE(a->next_sequence("deploy"));
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&nc, server_.url().c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_JetStream(&js, nc, nullptr), NATS_OK);
  ASSERT_EQ(js_PurgeStream(js, prefix_.c_str(), nullptr, nullptr), NATS_OK);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);

  // A had applied everything, but its compare-and-swap names an operation that is gone: it
  // refuses to write rather than guess. A new instance cannot rebuild what was purged.
  auto next = a->next_sequence("deploy");
  ASSERT_FALSE(next);
  EXPECT_EQ(next.error().code, sdk::ErrorCode::FailedPrecondition);
  EXPECT_NE(next.error().message.find("no longer holds"), std::string::npos) << next.error().message;
  auto b = std::make_unique<JetStreamKvStore>(host_);
  ASSERT_TRUE(b->configure(config("b.db")));
  auto r = b->open();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, sdk::ErrorCode::FailedPrecondition);
  EXPECT_NE(r.error().message.find("from sequence 1"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(local("b.db")), std::string::npos) << r.error().message;
}

// The figures of decision 87 ("Growth without compaction"), measured: the stream's bytes before
// and after one heartbeat batch of 100 nodes, and one deploy of a 1 KiB body to 100 nodes.
TEST_F(JetStreamKvStoreTest, TheLogGrowsByWhatEachOperationCarries) {
  auto a = open_store(host_, config("a.db"));
  ASSERT_TRUE(a);
  std::vector<sdk::ContactUpdate> batch;
  std::vector<sdk::DeclarationWrite> deploy;
  const std::string body(1024, 'b');
  for (int i = 0; i < 100; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "web-%03d", i);
    enrol(*a, name);
    batch.push_back(sdk::ContactUpdate{name, 5000, 0, "1.4.2", "idle", 4900, 1});
    deploy.push_back(sdk::DeclarationWrite{name, [&](std::uint64_t) { return body; }});
  }
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&nc, server_.url().c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_JetStream(&js, nc, nullptr), NATS_OK);
  auto bytes = [&]() -> std::uint64_t {
    jsStreamInfo* si = nullptr;
    if (js_GetStreamInfo(&si, js, prefix_.c_str(), nullptr, nullptr) != NATS_OK) return 0;
    const std::uint64_t b = si->State.Bytes;
    jsStreamInfo_Destroy(si);
    return b;
  };
  const std::uint64_t before = bytes();
  ASSERT_TRUE(a->touch(batch));
  const std::uint64_t after_touch = bytes();
  ASSERT_TRUE(a->declare(deploy, 6000, 0));
  const std::uint64_t after_deploy = bytes();
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  const std::uint64_t touch = after_touch - before;
  const std::uint64_t declared = after_deploy - after_touch;
  RecordProperty("heartbeat_batch_of_100_bytes", std::to_string(touch));
  RecordProperty("deploy_1KiB_to_100_bytes", std::to_string(declared));
  std::printf("stream growth: heartbeat batch of 100 nodes %llu bytes, deploy of 1 KiB to 100 nodes %llu bytes\n",
              static_cast<unsigned long long>(touch), static_cast<unsigned long long>(declared));
  // What decision 87 says: about 250 + 80 bytes per node for a batch (names of 7 characters),
  // the bodies plus about 100 bytes per node for a deploy.
  EXPECT_LT(touch, 250u + 80u * 100u);
  EXPECT_LT(declared, 300u + 100u * (1024u + 100u));
}

TEST(JetStreamKvClusterTest, AtReplicas3TheStreamIsOnThreeServersAndTheStoreGoesOnWhenItsLeaderIsKilled) {
  sdk::NullLogger logger;
  sdk::HostContext host;
  host.logger = &logger;
  host.role = "tool";
  mesh::testing::TempDir dir;
  mesh::testing::NatsCluster cluster(3);
  ASSERT_TRUE(cluster.wait_for_meta_leader(60000)) << "no JetStream meta leader";
  const std::string prefix = fresh_prefix();
  auto a = open_store(host, store_config(cluster.urls(), prefix, 3, (dir.path() / "a.db").string()));
  auto b = open_store(host, store_config(cluster.urls(), prefix, 3, (dir.path() / "b.db").string()));
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->add_token(sdk::TokenRecord{"t", "web-01", "h", 1000, 1'000'000, false, {}, false}));
  ASSERT_TRUE(a->enrol("h", "web-01", "aa", 2000));
  auto w = [](std::uint64_t) { return std::string("body"); };
  ASSERT_TRUE(a->declare({sdk::DeclarationWrite{"web-01", w}}, 100, 0));

  // The stream as the servers see it: three replicas, a leader and two current followers.
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&nc, cluster.urls_joined().c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_JetStream(&js, nc, nullptr), NATS_OK);
  jsStreamInfo* si = nullptr;
  ASSERT_EQ(js_GetStreamInfo(&si, js, prefix.c_str(), nullptr, nullptr), NATS_OK);
  EXPECT_EQ(si->Config->Replicas, 3);
  ASSERT_TRUE(si->Cluster && si->Cluster->Leader);
  EXPECT_EQ(si->Cluster->ReplicasLen, 2);
  const std::string leader = si->Cluster->Leader;
  jsStreamInfo_Destroy(si);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  std::size_t leader_index = cluster.size();
  for (std::size_t i = 0; i < cluster.size(); ++i)
    if (cluster.name(i) == leader) leader_index = i;
  ASSERT_LT(leader_index, cluster.size()) << leader;

  cluster.kill(leader_index);
  // The other two elect a new stream leader; until then writes fail as retryable, never half.
  sdk::Result<sdk::DeliveryRecord> d = sdk::fail(sdk::ErrorCode::Unavailable, "not tried");
  for (int i = 0; i < 600 && !d; ++i) {
    d = b->declare({sdk::DeclarationWrite{"web-01", w}}, 200, 0);
    if (!d) {
      EXPECT_TRUE(d.error().code == sdk::ErrorCode::Unavailable || d.error().code == sdk::ErrorCode::Transient)
          << d.error().describe();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->targets.at(0).revision, 2u);
  sdk::Result<std::vector<sdk::RevisionRecord>> h = sdk::fail(sdk::ErrorCode::Unavailable, "not tried");
  for (int i = 0; i < 600 && !h; ++i) {
    h = a->history("web-01", 10);
    if (!h) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(h) << h.error().describe();
  ASSERT_EQ(h->size(), 2u);
  EXPECT_EQ((*h)[0].revision, 2u);
}

}  // namespace
}  // namespace mesh::stores::jetstream_kv::testing
