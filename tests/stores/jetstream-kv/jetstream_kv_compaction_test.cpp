// The jetstream-kv store's compaction (decision 104) on a real nats-server with JetStream on
// loopback: with `compact_after` reached, a write first publishes a snapshot (the local file's
// image) and purges every message before it, so the stream stays bounded; two instances writing
// at once lose no write through it (each counter of each writer comes back 1, 2, 3... with no
// gap or repeat, and each heartbeat batch is there); an instance that joins after the purge starts
// from the snapshot and reads what the writers read.
#include <nats/nats.h>

#include <cstdio>
#include <thread>

#include "jetstream_kv_fixture.h"

namespace mesh::stores::jetstream_kv::testing {
namespace {

class JetStreamKvCompactionTest : public JetStreamKvTest {
 protected:
  sdk::Value config(const std::string& file, std::int64_t compact_after) const {
    sdk::Value c = store_config({server_.url()}, prefix_, 1, local(file));
    c.set("compact_after", compact_after);
    return c;
  }
  struct StreamState {
    std::uint64_t first = 0, last = 0, msgs = 0, bytes = 0;
  };
  StreamState stream_state() {
    StreamState out;
    natsConnection* nc = nullptr;
    jsCtx* js = nullptr;
    if (natsConnection_ConnectTo(&nc, server_.url().c_str()) != NATS_OK) return out;
    if (natsConnection_JetStream(&js, nc, nullptr) == NATS_OK) {
      jsStreamInfo* si = nullptr;
      if (js_GetStreamInfo(&si, js, prefix_.c_str(), nullptr, nullptr) == NATS_OK) {
        out = StreamState{si->State.FirstSeq, si->State.LastSeq, si->State.Msgs, si->State.Bytes};
        jsStreamInfo_Destroy(si);
      }
      jsCtx_Destroy(js);
    }
    natsConnection_Destroy(nc);
    return out;
  }
  std::string prefix_ = fresh_prefix();
};

TEST_F(JetStreamKvCompactionTest, TwoWritersThroughCompactionsLoseNothingAndALateInstanceReadsTheSameState) {
  auto a = open_store(host_, config("a.db", 16));
  auto b = open_store(host_, config("b.db", 16));
  ASSERT_TRUE(a && b);
  enrol(*a, "web-a");
  enrol(*b, "web-b");
  constexpr int kWrites = 80;
  // Each writer: its own counter (next_sequence) and a heartbeat of its own node per write.
  auto writer = [&](JetStreamKvStore& s, const std::string& name, std::vector<std::uint64_t>& got) {
    for (int i = 0; i < kWrites; ++i) {
      auto n = s.next_sequence(name);
      if (!n) {
        ADD_FAILURE() << name << " write " << i << ": " << n.error().describe();
        return;
      }
      got.push_back(*n);
      auto t = s.touch({sdk::ContactUpdate{"web-" + name, 10'000 + i, 0, "1.0", "idle", 0, 0}});
      if (!t) ADD_FAILURE() << name << " touch " << i << ": " << t.error().describe();
    }
  };
  std::vector<std::uint64_t> got_a, got_b;
  std::thread ta(writer, std::ref(*a), "a", std::ref(got_a));
  std::thread tb(writer, std::ref(*b), "b", std::ref(got_b));
  ta.join();
  tb.join();
  // No write lost or applied twice: each counter went 1..kWrites for its only writer.
  ASSERT_EQ(got_a.size(), static_cast<std::size_t>(kWrites));
  ASSERT_EQ(got_b.size(), static_cast<std::size_t>(kWrites));
  for (int i = 0; i < kWrites; ++i) {
    EXPECT_EQ(got_a[static_cast<std::size_t>(i)], static_cast<std::uint64_t>(i + 1));
    EXPECT_EQ(got_b[static_cast<std::size_t>(i)], static_cast<std::uint64_t>(i + 1));
  }
  // 2 enrolments (4 operations) and 4 * 80 writes: compacted several times, the stream bounded.
  const StreamState st = stream_state();
  EXPECT_GT(st.first, 1u) << "messages before a snapshot were purged";
  EXPECT_LT(st.msgs, 3u * 16u) << "first=" << st.first << " last=" << st.last << " msgs=" << st.msgs;
  // Each instance counts what it applied since the newest snapshot it applied (A may not have
  // applied B's last writes yet, nor B's last snapshot).
  EXPECT_LT(a->operations_since_snapshot(), 3u * 16u);

  // A new instance (compaction off: it only reads) starts from the snapshot and answers as A.
  auto c = open_store(host_, config("c.db", 0));
  ASSERT_TRUE(c);
  for (const char* name : {"a", "b"}) {
    auto n = c->next_sequence(name);
    ASSERT_TRUE(n) << n.error().describe();
    EXPECT_EQ(*n, static_cast<std::uint64_t>(kWrites + 1)) << name;
  }
  for (const char* node : {"web-a", "web-b"}) {
    auto na = a->node(node);
    auto nc = c->node(node);
    ASSERT_TRUE(na && nc) << node;
    EXPECT_EQ(nc->last_contact_ms.value_or(-1), 10'000 + kWrites - 1) << node;
    EXPECT_EQ(nc->last_contact_ms.value_or(-1), na->last_contact_ms.value_or(-2)) << node;
    EXPECT_EQ(nc->generation, na->generation) << node;
  }
  // And A and B see C's writes (the counters move on for all three).
  auto n = a->next_sequence("a");
  ASSERT_TRUE(n) << n.error().describe();
  EXPECT_EQ(*n, static_cast<std::uint64_t>(kWrites + 2));
}

TEST_F(JetStreamKvCompactionTest, CompactPurgesEverythingBeforeTheSnapshotAndAnInstanceBehindItCatchesUp) {
  auto a = open_store(host_, config("a.db", 0));
  ASSERT_TRUE(a);
  enrol(*a, "web-01");
  auto b = open_store(host_, config("b.db", 0));
  ASSERT_TRUE(b);
  ASSERT_TRUE(b->next_sequence("x"));  // B has applied up to here, then stays behind
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(a->next_sequence("x"));
  const StreamState before = stream_state();
  auto c = a->compact();
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->purged, before.msgs) << "every message before the snapshot";
  const StreamState after = stream_state();
  EXPECT_EQ(after.msgs, after.last - after.first + 1);
  EXPECT_LE(after.msgs, 4u) << "the snapshot (its parts and commit) alone";
  // B is behind the purge point: it starts again from the snapshot, no gap error.
  auto n = b->next_sequence("x");
  ASSERT_TRUE(n) << n.error().describe();
  EXPECT_EQ(*n, 32u);
  auto node = b->node("web-01");
  ASSERT_TRUE(node) << node.error().describe();
}

// Finding 13 of issue 15 (decision record 186): a node's big briefings, again and again, are few
// operations but many bytes; compaction by bytes keeps the stream within about the snapshot plus
// the byte threshold plus one operation, whatever the count of operations.
TEST_F(JetStreamKvCompactionTest, BigOperationsCompactTheStreamByBytesLongBeforeTheOperationCount) {
  constexpr std::int64_t kThreshold = 256 * 1024;
  sdk::Value c = config("a.db", 1'000'000);
  c.set("compact_after_bytes", kThreshold);
  auto a = open_store(host_, c);
  ASSERT_TRUE(a);
  enrol(*a, "web-01");
  const std::string detail(100'000, 'x');
  constexpr int kBriefings = 40;  // 4 MB in all
  std::uint64_t largest = 0;
  for (int i = 0; i < kBriefings; ++i) {
    // Each briefing differs (as a thief's fresh at_ms makes it).
    const std::string briefing = "{\"at_ms\":" + std::to_string(i) + ",\"detail\":\"" + detail + "\"}";
    ASSERT_TRUE(a->set_briefing("web-01", briefing, true));
    const StreamState st = stream_state();
    largest = std::max(largest, st.bytes);
  }
  const StreamState st = stream_state();
  EXPECT_GT(st.first, 1u) << "compacted by size";
  EXPECT_LT(a->operations_since_snapshot(), 40u);
  // The image (a store with one 100 kB briefing: well under 1 MB) + the threshold + one briefing.
  EXPECT_LT(largest, 2u * 1024 * 1024) << "the stream stayed bounded; it peaked at " << largest << " bytes of "
                                       << kBriefings * detail.size() << " written";
  EXPECT_LT(a->bytes_since_snapshot(), static_cast<std::uint64_t>(kThreshold) + 4 * detail.size());
  auto node = a->node("web-01");
  ASSERT_TRUE(node) << node.error().describe();
  EXPECT_NE(node->briefing.find("\"at_ms\":" + std::to_string(kBriefings - 1)), std::string::npos);
}

TEST_F(JetStreamKvCompactionTest, ABadCompactAfterIsRefusedNamingTheKey) {
  auto s = std::make_unique<JetStreamKvStore>(host_);
  auto r = s->configure(config("a.db", 3));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "compact_after") << r.error().describe();
  EXPECT_NE(r.error().message.find("between 16 and"), std::string::npos) << r.error().message;
  sdk::Value bytes = config("b.db", 16);
  bytes.set("compact_after_bytes", std::int64_t{1000});
  auto rb = JetStreamKvStore(host_).configure(bytes);
  ASSERT_FALSE(rb);
  EXPECT_EQ(rb.error().path, "compact_after_bytes") << rb.error().describe();
}

}  // namespace
}  // namespace mesh::stores::jetstream_kv::testing
