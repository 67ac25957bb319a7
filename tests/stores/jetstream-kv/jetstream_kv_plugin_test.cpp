// The built `mesh-store-jetstream-kv.so`, loaded with dlopen as the control plane loads it: the
// descriptor, then create → configure (the schema's defaults) → open on a real nats-server with
// JetStream → enrol → declare → destroy, its local file in the plugin's state directory.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "mesh/sdk/sdk.h"
#include "mesh/testing/nats_server.h"
#include "mesh/testing/plugins.h"
#include "mesh/testing/temp_dir.h"

namespace {

using namespace mesh::sdk;

TEST(JetStreamKvStorePluginTest, LoadsConfiguresOpensEnrolsAndDeclares) {
  mesh::testing::NatsServer server({}, true);
  mesh::testing::TempDir dir;
  mesh::testing::PluginLibrary lib("store", "jetstream-kv");
  const mesh_plugin_info* info = lib.info();
  ASSERT_TRUE(mesh::testing::expect_descriptor(info, "store", "jetstream-kv"));

  mesh::testing::TestHost host;
  host.context.state_dir = dir.path().string();
  Plugin* plugin = info->create(&host.context);
  ASSERT_NE(plugin, nullptr);
  auto* store = static_cast<Store*>(plugin);
  Value config = Value::object();
  Value servers = Value::array();
  servers.as_array().push_back(Value(server.url()));
  config.set("servers", servers);
  ASSERT_TRUE(validate_against(store->config_schema(), config, ""));
  config = apply_defaults(store->config_schema(), config);
  EXPECT_EQ(config.get_string("prefix"), "MESH_STORE");
  EXPECT_EQ(config.get_int("replicas", -1), 1);
  auto configured = store->configure(config);
  ASSERT_TRUE(configured) << configured.error().describe();
  auto opened = store->open();
  ASSERT_TRUE(opened) << opened.error().describe();
  ASSERT_TRUE(store->add_token(TokenRecord{"t1", "web-01", std::string(64, 'a'), 1, 10'000, false, {}, false}));
  auto node = store->enrol(std::string(64, 'a'), "web-01", "key", 2);
  ASSERT_TRUE(node) << node.error().describe();
  auto delivery = store->declare({DeclarationWrite{"web-01", [](std::uint64_t rev) { return std::to_string(rev); }}}, 3, 10);
  ASSERT_TRUE(delivery) << delivery.error().describe();
  EXPECT_EQ(delivery->targets.at(0).revision, 1u);
  info->destroy(plugin);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "jetstream-kv-MESH_STORE.db"));
}

}  // namespace
