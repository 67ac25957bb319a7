// A local mesh whose mesh-control loads the publish stage and serves its repository on a free
// loopback port: the fixture of the publish integration and system tests.
#pragma once

#include "mesh/cli/client.h"
#include "mesh/common/trust.h"
#include "mesh_fixture.h"
#include "publish_test_util.h"

namespace mesh::stages::publish::test {

class PublishMeshTest : public itest::MeshTest {
 public:
  void SetUp() override {
    nats_ = std::make_unique<mesh::testing::NatsServer>();
    port_ = mesh::testing::free_tcp_port();
    const fs::path cfg = dir() / "control.toml";
    itest::write_text(cfg, "[control]\nstate_dir = \"" + (dir() / "control").string() +
                               "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\n\n[store]\nplugin = \"sqlite\"\n\n"
                               "[transport]\nplugin = \"nats\"\nservers = [\"" + nats_->url() +
                               "\"]\n\n[stages]\nload = [\"publish\"]\n\n[stages.publish]\narchitectures = [\"amd64\"]\n\n"
                               "[repository]\ndir = \"" + repo().string() + "\"\nlisten = \"127.0.0.1:" +
                               std::to_string(port_) + "\"\n");
    restart_control();
  }

  /// (Re)starts mesh-control with the config SetUp wrote.
  void restart_control() {
    control_.reset();
    control_ = std::make_unique<mesh::testing::BackgroundProcess>(std::vector<std::string>{
        itest::bin("mesh-control"), "run", "--config", (dir() / "control.toml").string(), "--log-level", "debug"});
    ASSERT_TRUE(mesh::testing::eventually([&] { return mesh({"nodes"}).exit_code == 0; }, 30000))
        << control_->stderr_text();
  }

  fs::path repo() const { return dir() / "repo"; }
  int port() const { return port_; }

  /// A client of the operator API in this process, as `mesh` is (the admin identity).
  std::unique_ptr<cli::Client> client(const std::string& identity_file = "") {
    auto id = trust::load_operator_identity(identity_file.empty() ? admin_identity() : identity_file);
    EXPECT_TRUE(id) << id.error().message;
    cli::ClientOptions o;
    o.plugin_dir = MESH_TEST_PLUGIN_DIR;
    o.transport_config = sdk::Value::object();
    o.transport_config.set("servers", sdk::Value(sdk::Value::Array{sdk::Value(nats_->url())}));
    o.servers = nats_->url();
    o.timeout = std::chrono::seconds(30);
    o.identity = *id;
    o.control_key = id->control_key;
    auto c = cli::Client::connect(o);
    EXPECT_TRUE(c) << c.error().message;
    return c ? std::move(*c) : nullptr;
  }

  int port_ = 0;
};

}  // namespace mesh::stages::publish::test
