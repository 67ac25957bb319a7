// The jetstream-kv store never changes an existing stream's configuration (decision record
// 0118): an instance or a one-shot command whose store.replicas differs from the stream's
// replica count is refused, naming the key, and the stream keeps its replicas.
#include <gtest/gtest.h>
#include <nats/nats.h>

#include "jetstream_kv_fixture.h"

namespace mesh::stores::jetstream_kv::testing {
namespace {

int stream_replicas(const std::string& urls, const std::string& stream) {
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  int out = -1;
  if (natsConnection_ConnectTo(&nc, urls.c_str()) == NATS_OK && natsConnection_JetStream(&js, nc, nullptr) == NATS_OK) {
    jsStreamInfo* si = nullptr;
    if (js_GetStreamInfo(&si, js, stream.c_str(), nullptr, nullptr) == NATS_OK) {
      out = static_cast<int>(si->Config->Replicas);
      jsStreamInfo_Destroy(si);
    }
  }
  if (js) jsCtx_Destroy(js);
  if (nc) natsConnection_Destroy(nc);
  return out;
}

TEST(JetStreamKvReplicasTest, AStoreOpenedWithOtherReplicasIsRefusedNamingTheKeyAndTheStreamKeepsItsThree) {
  sdk::NullLogger logger;
  sdk::HostContext host;
  host.logger = &logger;
  host.role = "tool";
  mesh::testing::TempDir dir;
  mesh::testing::NatsCluster cluster(3);
  ASSERT_TRUE(cluster.wait_for_meta_leader(60000)) << "no JetStream meta leader";
  const std::string prefix = fresh_prefix();
  auto a = open_store(host, store_config(cluster.urls(), prefix, 3, (dir.path() / "a.db").string()));
  ASSERT_TRUE(a);
  ASSERT_EQ(stream_replicas(cluster.urls_joined(), prefix), 3);

  // A backup or a second instance left at the default replicas = 1.
  JetStreamKvStore b(host);
  ASSERT_TRUE(b.configure(store_config(cluster.urls(), prefix, 1, (dir.path() / "b.db").string())));
  auto opened = b.open();
  ASSERT_FALSE(opened) << "a replicas=1 store opened a replicas=3 stream";
  EXPECT_EQ(opened.error().code, sdk::ErrorCode::FailedPrecondition) << opened.error().describe();
  EXPECT_EQ(opened.error().path, "replicas");
  EXPECT_NE(opened.error().message.find("store.replicas"), std::string::npos) << opened.error().message;
  EXPECT_NE(opened.error().message.find("3 replica"), std::string::npos) << opened.error().message;
  EXPECT_EQ(stream_replicas(cluster.urls_joined(), prefix), 3) << "the stream's replicas were changed";

  // The first instance goes on writing.
  EXPECT_TRUE(a->add_token(sdk::TokenRecord{"t", "web-01", "h", 1000, 1'000'000, false, {}, false}));
}

}  // namespace
}  // namespace mesh::stores::jetstream_kv::testing
