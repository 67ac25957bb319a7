// Measures the jetstream-kv store against a real nats-server (replicas 1) or the 3-node cluster
// of tests/support (replicas 3). Not a test (timings depend on the machine); run by hand:
//
//   cmake --build BUILD --target jetstream_kv_throughput
//   BUILD/tests/stores/jetstream-kv/jetstream_kv_throughput [REPLICAS] [NODES] [BATCH] [BATCHES]
//
// Enrols NODES nodes, then times: BATCHES touch() calls of BATCH heartbeats each; NODES/10 reads
// of node(); one declare() to every node (a deploy, bodies of 1 KiB); and a second instance
// opening on the stream (replaying every operation into its own file). Prints one line per figure.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "jetstream_kv_store.h"
#include "mesh/sdk/logger.h"
#include "mesh/testing/nats_server.h"
#include "mesh/testing/temp_dir.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::unique_ptr<mesh::stores::jetstream_kv::JetStreamKvStore> open(const mesh::sdk::HostContext& host,
                                                                   const std::vector<std::string>& urls, int replicas,
                                                                   const std::string& local) {
  auto s = std::make_unique<mesh::stores::jetstream_kv::JetStreamKvStore>(host);
  mesh::sdk::Value c = mesh::sdk::Value::object();
  mesh::sdk::Value list = mesh::sdk::Value::array();
  for (const auto& u : urls) list.as_array().push_back(mesh::sdk::Value(u));
  c.set("servers", list);
  c.set("replicas", std::int64_t{replicas});
  c.set("local_path", local);
  if (auto r = s->configure(c); !r) {
    std::fprintf(stderr, "configure: %s\n", r.error().describe().c_str());
    return nullptr;
  }
  if (auto r = s->open(); !r) {
    std::fprintf(stderr, "open: %s\n", r.error().describe().c_str());
    return nullptr;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mesh;
  const int replicas = argc > 1 ? std::atoi(argv[1]) : 1;
  const int nodes = argc > 2 ? std::atoi(argv[2]) : 1000;
  const int batch = argc > 3 ? std::atoi(argv[3]) : 100;
  const int batches = argc > 4 ? std::atoi(argv[4]) : 200;
  sdk::NullLogger logger;
  sdk::HostContext host;
  host.logger = &logger;
  testing::TempDir dir;
  std::unique_ptr<testing::NatsServer> server;
  std::unique_ptr<testing::NatsCluster> cluster;
  std::vector<std::string> urls;
  if (replicas == 1) {
    server = std::make_unique<testing::NatsServer>(std::vector<std::string>{}, true);
    urls = {server->url()};
  } else {
    cluster = std::make_unique<testing::NatsCluster>(static_cast<std::size_t>(replicas));
    if (!cluster->wait_for_meta_leader(60000)) {
      std::fprintf(stderr, "no JetStream meta leader\n");
      return 1;
    }
    urls = cluster->urls();
  }
  auto store = open(host, urls, replicas, (dir.path() / "a.db").string());
  if (!store) return 1;
  auto t = Clock::now();
  for (int i = 0; i < nodes; ++i) {
    const std::string name = "node-" + std::to_string(i);
    if (!store->add_token(sdk::TokenRecord{"t" + std::to_string(i), name, "h" + name, 0, 1'000'000, false, {}, false}) ||
        !store->enrol("h" + name, name, "key", 1)) {
      std::fprintf(stderr, "enrol %s failed\n", name.c_str());
      return 1;
    }
  }
  const double enrol_s = seconds_since(t);
  std::printf("replicas=%d enrol (add_token + enrol) of %d nodes: %.2f s, %.0f writes/s\n", replicas, nodes, enrol_s,
              2 * nodes / enrol_s);

  t = Clock::now();
  for (int b = 0; b < batches; ++b) {
    std::vector<sdk::ContactUpdate> updates;
    for (int i = 0; i < batch; ++i) {
      const std::string name = "node-" + std::to_string((b * batch + i) % nodes);
      updates.push_back(sdk::ContactUpdate{name, 1000 + b, 0, "1.0.0", "idle", 1000 + b, 1});
    }
    if (auto r = store->touch(updates); !r) {
      std::fprintf(stderr, "touch: %s\n", r.error().describe().c_str());
      return 1;
    }
  }
  const double touch_s = seconds_since(t);
  std::printf("replicas=%d touch: %d batches of %d: %.2f s, %.0f batches/s, %.0f heartbeats/s\n", replicas, batches,
              batch, touch_s, batches / touch_s, batches * batch / touch_s);

  t = Clock::now();
  const int reads = nodes / 10 > 0 ? nodes / 10 : 1;
  for (int i = 0; i < reads; ++i)
    if (!store->node("node-" + std::to_string(i))) return 1;
  const double read_s = seconds_since(t);
  std::printf("replicas=%d node() reads: %d in %.2f s, %.2f ms each\n", replicas, reads, read_s, 1000 * read_s / reads);

  std::vector<sdk::DeclarationWrite> writes;
  const std::string body(1024, 'b');
  for (int i = 0; i < nodes; ++i)
    writes.push_back(sdk::DeclarationWrite{"node-" + std::to_string(i), [&](std::uint64_t) { return body; }});
  t = Clock::now();
  if (auto r = store->declare(writes, 2000, 0); !r) {
    std::fprintf(stderr, "declare: %s\n", r.error().describe().c_str());
    return 1;
  }
  const double declare_s = seconds_since(t);
  std::printf("replicas=%d declare to %d nodes (1 KiB bodies, in parts beyond 1 MiB): %.2f s\n", replicas, nodes,
              declare_s);

  t = Clock::now();
  auto second = open(host, urls, replicas, (dir.path() / "b.db").string());
  if (!second) return 1;
  const double replay_s = seconds_since(t);
  std::printf("replicas=%d a second instance replaying %llu operations: %.2f s\n", replicas,
              static_cast<unsigned long long>(second->applied_sequence()), replay_s);
  return 0;
}
