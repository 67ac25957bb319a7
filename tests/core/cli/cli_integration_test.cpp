// `mesh` against a real broker: unreachable broker and absent control plane exit 3 quickly and
// say which server; servers and plugins are found through the environment and --config.
#include <gtest/gtest.h>

#include <chrono>

#include "../control/control_fixture.h"

namespace mesh::control::test {
namespace {

using CliIntegrationTest = ControlTest;

// An identity of an operator no control plane knows: enough for `mesh` to send a request.
std::string throwaway_identity(const TempDir& tmp) {
  auto kp = common::generate_keypair();
  const fs::path p = tmp.path() / "someone.identity";
  write_text(p, trust::operator_identity_json(trust::OperatorIdentity{"someone", "admin", kp.public_key, kp.secret_key, kp.public_key}));
  fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write);
  return p.string();
}

TEST(CliUnreachableTest, BrokerDownExitsThreeQuicklyNamingTheServer) {
  const int port = mesh::testing::free_tcp_port();
  const std::string url = "nats://127.0.0.1:" + std::to_string(port);
  TempDir tmp;
  const auto start = std::chrono::steady_clock::now();
  auto r = mesh::testing::run_process(
      {bin("mesh"), "--server", url, "--plugin-dir", MESH_TEST_PLUGIN_DIR, "--identity", throwaway_identity(tmp), "nodes"},
      {}, 20000);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find(url), std::string::npos) << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(CliUnreachableTest, NoControlPlaneExitsThreeSayingSo) {
  NatsServer nats;
  TempDir tmp;
  const auto start = std::chrono::steady_clock::now();
  auto r = mesh::testing::run_process(
      {bin("mesh"), "--server", nats.url(), "--plugin-dir", MESH_TEST_PLUGIN_DIR, "--identity", throwaway_identity(tmp),
       "--timeout", "2s", "nodes"},
      {}, 20000);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find(nats.url()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("control plane"), std::string::npos) << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST_F(CliIntegrationTest, ServersAndPluginsFromEnvironmentAndConfig) {
  // NOX_MESH_SERVER (comma-separated; a dead server first) and NOX_MESH_PLUGIN_DIR.
  const std::string dead = "nats://127.0.0.1:" + std::to_string(mesh::testing::free_tcp_port());
  auto env = mesh::testing::run_process({bin("mesh"), "nodes", "--output", "json"},
                                        {"NOX_MESH_SERVER=" + dead + "," + nats_->url(),
                                         "NOX_MESH_PLUGIN_DIR=" MESH_TEST_PLUGIN_DIR,
                                         "NOX_MESH_IDENTITY=" + admin_identity()},
                                        20000);
  EXPECT_EQ(env.exit_code, 0) << env.err;
  EXPECT_EQ(env.out, "[]\n");

  // --config: the control plane's own config works (its [transport] and [plugins] dir are used,
  // the other tables are ignored).
  const std::string id = "NOX_MESH_IDENTITY=" + admin_identity();
  auto cfg = mesh::testing::run_process({bin("mesh"), "--config", (dir() / "control.toml").string(), "nodes"}, {id},
                                        20000);
  EXPECT_EQ(cfg.exit_code, 0) << cfg.err;
  // A host config too.
  write_text(dir() / "host.toml", "[node]\nname = \"web-01\"\nstate_dir = \"/x\"\n\n[transport]\nplugin = \"nats\"\n"
                                  "servers = [\"" + nats_->url() + "\"]\n");
  auto host = mesh::testing::run_process({bin("mesh"), "--config", (dir() / "host.toml").string(), "--plugin-dir",
                                          MESH_TEST_PLUGIN_DIR, "token", "list"},
                                         {id}, 20000);
  EXPECT_EQ(host.exit_code, 0) << host.err;
  EXPECT_EQ(host.out, "no outstanding tokens\n");
  // NOX_MESH_CONFIG stands for --config (what CI sets once for every call).
  auto via_env = mesh::testing::run_process(
      {bin("mesh"), "--plugin-dir", MESH_TEST_PLUGIN_DIR, "token", "list"},
      {id, "NOX_MESH_CONFIG=" + (dir() / "host.toml").string()}, 20000);
  EXPECT_EQ(via_env.exit_code, 0) << via_env.err;
  EXPECT_EQ(via_env.out, "no outstanding tokens\n");
  // A key the transport does not know: exit 2, naming the file and the line.
  write_text(dir() / "typo.toml", "[transport]\nservers = [\"" + nats_->url() + "\"]\nservres = 1\n");
  auto typo = mesh::testing::run_process({bin("mesh"), "--config", (dir() / "typo.toml").string(), "--plugin-dir",
                                          MESH_TEST_PLUGIN_DIR, "nodes"},
                                         {id}, 20000);
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("typo.toml:3: transport.servres: unknown"), std::string::npos) << typo.err;
  // A plugin folder without the transport: exit 2, naming the file looked for.
  auto noplug = mesh::testing::run_process(
      {bin("mesh"), "--server", nats_->url(), "--plugin-dir", dir().string(), "nodes"}, {id}, 20000);
  EXPECT_EQ(noplug.exit_code, 2);
  EXPECT_NE(noplug.err.find("mesh-transport-nats.so"), std::string::npos) << noplug.err;
}

}  // namespace
}  // namespace mesh::control::test
