// The store conformance suite (sdk/testing) against the jetstream-kv store: at replicas 1 on one
// nats-server with JetStream, and at replicas 3 on a 3-node cluster (routes and JetStream on
// loopback, tests/support NatsCluster). Each test gets a fresh stream; each instance its own local
// SQLite file (two control planes on one stream).
#include <mesh/sdk/testing/store_conformance.h>

#include "jetstream_kv_fixture.h"

namespace {

namespace mt = mesh::sdk::testing;
namespace jt = mesh::stores::jetstream_kv::testing;

mt::StoreConformance on(std::shared_ptr<void> servers, std::vector<std::string> urls, int replicas) {
  auto dir = std::make_shared<mesh::testing::TempDir>();
  const std::string prefix = jt::fresh_prefix();
  mt::StoreConformance c;
  c.open_store = [dir, urls, prefix, replicas](const mesh::sdk::HostContext& host,
                                               int instance) -> std::unique_ptr<mesh::sdk::Store> {
    const std::string local = (dir->path() / ("instance-" + std::to_string(instance) + ".db")).string();
    return jt::open_store(host, jt::store_config(urls, prefix, replicas, local));
  };
  c.keep_alive = std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<void>>>(servers, dir);
  return c;
}

mt::StoreConformance replicas_1() {
  auto server = std::make_shared<mesh::testing::NatsServer>(std::vector<std::string>{}, true);
  return on(server, {server->url()}, 1);
}

mt::StoreConformance replicas_3() {
  // One cluster per test process (each test runs in its own under ctest); a fresh stream per test.
  static std::shared_ptr<mesh::testing::NatsCluster> cluster = [] {
    auto c = std::make_shared<mesh::testing::NatsCluster>(3);
    if (!c->wait_for_meta_leader(60000)) throw std::runtime_error("the 3-node cluster elected no JetStream meta leader");
    return c;
  }();
  return on(cluster, cluster->urls(), 3);
}

}  // namespace

MESH_INSTANTIATE_STORE_CONFORMANCE(JetStreamKvReplicas1, replicas_1);
MESH_INSTANTIATE_STORE_CONFORMANCE(JetStreamKvReplicas3, replicas_3);
