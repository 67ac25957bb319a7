// mesh-control run on the jetstream-kv store: the store takes its servers from [transport], the
// control plane answers `mesh` through it, and another instance of the store (a second control
// plane's) sees what it wrote at once.
#include <chrono>
#include <filesystem>
#include <fstream>

#include "jetstream_kv_fixture.h"
#include "mesh/testing/process.h"

namespace mesh::stores::jetstream_kv::testing {
namespace {

TEST(JetStreamKvControlTest, MeshControlRunsOnTheStreamAndASecondInstanceSeesItsWrites) {
  sdk::NullLogger logger;
  sdk::HostContext host;
  host.logger = &logger;
  host.role = "tool";
  mesh::testing::TempDir dir;
  mesh::testing::NatsServer server({}, true);
  const std::string state = (dir.path() / "state").string();
  const std::string config = (dir.path() / "control.toml").string();
  std::ofstream(config) << "[control]\nstate_dir = \"" << state << "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR
                        << "\"\n\n[store]\nplugin = \"jetstream-kv\"\nprefix = \"CONTROL\"\n\n[transport]\n"
                           "plugin = \"nats\"\nservers = [\""
                        << server.url() << "\"]\n";
  mesh::testing::BackgroundProcess control({MESH_TEST_BIN_DIR "/mesh-control", "run", "--config", config});
  ASSERT_TRUE(control.wait_for_output("control started", 30000)) << control.stderr_text();
  EXPECT_TRUE(control.wait_for_output("jetstream-kv store opened stream=CONTROL", 1000)) << control.stderr_text();
  // No [broker] and no store credentials: the open stream is named as a risk (decision 0116).
  EXPECT_TRUE(control.wait_for_output("SECURITY: the jetstream-kv store's stream CONTROL is open to every client", 1000))
      << control.stderr_text();

  auto r = mesh::testing::run_process({MESH_TEST_BIN_DIR "/mesh", "--identity", state + "/admin.identity", "--server",
                                       server.url(), "--timeout", "10s", "token", "issue", "web-01"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  auto other = open_store(host, store_config({server.url()}, "CONTROL", 1, (dir.path() / "other.db").string()));
  ASSERT_TRUE(other);
  const std::int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto tokens = other->tokens(now);
  ASSERT_TRUE(tokens) << tokens.error().describe();
  ASSERT_EQ(tokens->size(), 1u);
  EXPECT_EQ((*tokens)[0].node, "web-01");
  EXPECT_EQ(control.stop(), 0) << control.stderr_text();
}

// A typo in [transport] is named there, not as a key the store misses (the store takes its
// servers from [transport]); with no servers anywhere, the refusal says where they may be set.
TEST(JetStreamKvControlTest, ATransportTypoIsNamedInItsOwnTable) {
  mesh::testing::TempDir dir;
  const std::string state = (dir.path() / "state").string();
  const std::string head = "[control]\nstate_dir = \"" + state + "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR
                           "\"\n\n[store]\nplugin = \"jetstream-kv\"\n\n[transport]\nplugin = \"nats\"\n";
  const std::string typo = (dir.path() / "typo.toml").string();
  std::ofstream(typo) << head << "server = [\"nats://127.0.0.1:1\"]\n";
  for (const char* command : {"run", "backup"}) {
    std::vector<std::string> args{MESH_TEST_BIN_DIR "/mesh-control", command, "--config", typo};
    if (std::string(command) == "backup") args.push_back((dir.path() / "b.db").string());
    auto r = mesh::testing::run_process(args, {}, 20000);
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.err;
    if (std::string(command) == "run") {
      EXPECT_NE(r.err.find("transport.server"), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("store.servers"), std::string::npos) << r.err;
    } else {  // backup loads no transport: the store's refusal says where servers come from
      EXPECT_NE(r.err.find("[transport] servers"), std::string::npos) << r.err;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(state + "/control.key")) << "a refused start wrote key material";
}

// N5/N12 of issue 15 (decision record 187): a store refusal that names one of [store]'s keys is a
// configuration error, exit 2 (systemd's Restart=on-failure should not retry it), naming the key:
// replicas the servers cannot place, replicas other than the stream's.
TEST(JetStreamKvControlTest, ReplicasTheStreamOrTheServersCannotHaveExit2NamingStoreReplicas) {
  mesh::testing::TempDir dir;
  mesh::testing::NatsServer server({}, true);  // one server, no cluster: 1 replica only
  const std::string state = (dir.path() / "state").string();
  auto config = [&](int replicas) {
    const std::string path = (dir.path() / ("r" + std::to_string(replicas) + ".toml")).string();
    std::ofstream(path) << "[control]\nstate_dir = \"" << state << "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR
                        << "\"\n\n[store]\nplugin = \"jetstream-kv\"\nprefix = \"REPL\"\nreplicas = " << replicas
                        << "\ntimeout = 1000\n\n[transport]\nplugin = \"nats\"\nservers = [\"" << server.url() << "\"]\n";
    return path;
  };
  auto three = mesh::testing::run_process({MESH_TEST_BIN_DIR "/mesh-control", "run", "--config", config(3)}, {}, 30000);
  EXPECT_EQ(three.exit_code, 2) << three.err;
  EXPECT_NE(three.err.find("store.replicas"), std::string::npos) << three.err;
  EXPECT_NE(three.err.find("cannot be placed"), std::string::npos) << three.err;
  // The stream made with 1 replica; then an instance configured with 2.
  {
    mesh::testing::BackgroundProcess control({MESH_TEST_BIN_DIR "/mesh-control", "run", "--config", config(1)});
    ASSERT_TRUE(control.wait_for_output("control started", 30000)) << control.stderr_text();
    EXPECT_EQ(control.stop(), 0);
  }
  auto two = mesh::testing::run_process({MESH_TEST_BIN_DIR "/mesh-control", "backup", "--config", config(2),
                                         (dir.path() / "b.db").string()},
                                        {}, 30000);
  EXPECT_EQ(two.exit_code, 2) << two.err;
  EXPECT_NE(two.err.find("store.replicas"), std::string::npos) << two.err;
}

}  // namespace
}  // namespace mesh::stores::jetstream_kv::testing
