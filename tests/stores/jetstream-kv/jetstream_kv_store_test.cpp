// The jetstream-kv store's own behaviour beyond the conformance suite, on a real nats-server with
// JetStream on loopback: operations in parts, a restart resumes where it stopped, the local file's
// identity, a malformed operation in the log, servers down, config errors.
#include <nats/nats.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "jetstream_kv_fixture.h"

namespace mesh::stores::jetstream_kv::testing {
namespace {

class JetStreamKvStoreTest : public ::testing::Test {
 protected:
  JetStreamKvStoreTest() {
    host_.logger = &logger_;
    host_.role = "tool";
  }
  std::string local(const std::string& name) const { return (dir_.path() / name).string(); }
  sdk::Value config(const std::string& file) const { return store_config({server_.url()}, prefix_, 1, local(file)); }
  static void enrol(sdk::Store& s, const std::string& node) {
    ASSERT_TRUE(s.add_token(sdk::TokenRecord{"tok-" + node, node, "hash-" + node, 1000, 1'000'000, false, {}, false}));
    auto e = s.enrol("hash-" + node, node, "aa", 2000);
    ASSERT_TRUE(e) << e.error().describe();
  }

  sdk::NullLogger logger_;
  sdk::HostContext host_;
  mesh::testing::TempDir dir_;
  mesh::testing::NatsServer server_{{}, true};
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

}  // namespace
}  // namespace mesh::stores::jetstream_kv::testing
