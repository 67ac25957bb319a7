// Loads mesh-transport-nats.so with dlopen, as the host's loader would, without the loader.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>

#include "mesh/sdk/sdk.h"
#include "mesh/testing/nats_server.h"
#include "mesh/testing/process.h"

namespace mesh::transports::nats::test {
namespace {

using namespace std::chrono_literals;

const std::string kPluginPath = std::string(MESH_TEST_PLUGIN_DIR) + "/mesh-transport-nats.so";

TEST(NatsTransportPluginTest, DescriptorAndRoundTripThroughTheLoadedLibrary) {
  void* lib = ::dlopen(kPluginPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << ::dlerror();
  using InfoFn = const mesh_plugin_info* (*)();
  auto info_fn = reinterpret_cast<InfoFn>(::dlsym(lib, MESH_PLUGIN_INFO_SYMBOL));
  ASSERT_NE(info_fn, nullptr) << ::dlerror();
  const mesh_plugin_info* info = info_fn();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->abi_major, MESH_SDK_ABI_MAJOR);
  EXPECT_LE(info->abi_minor, MESH_SDK_ABI_MINOR);
  EXPECT_EQ(info->struct_size, sizeof(mesh_plugin_info));
  EXPECT_STREQ(info->kind, "transport");
  EXPECT_STREQ(info->name, "nats");
  EXPECT_STREQ(info->version, "0.1.0");
  EXPECT_GT(std::strlen(info->description), 0u);
  ASSERT_NE(info->create, nullptr);
  ASSERT_NE(info->destroy, nullptr);

  mesh::testing::NatsServer server;
  sdk::NullLogger logger;
  sdk::HostContext host;
  host.logger = &logger;
  host.role = "tool";
  sdk::Plugin* plugin = info->create(&host);
  ASSERT_NE(plugin, nullptr);
  auto* transport = static_cast<sdk::Transport*>(plugin);  // kind says transport
  ASSERT_NE(transport->config_schema().find("servers"), nullptr);
  sdk::Value config = sdk::Value::object();
  config.set("servers", sdk::Value(sdk::Value::Array{sdk::Value(server.url())}));
  ASSERT_TRUE(transport->configure(config));
  std::atomic<int> closed{0};
  transport->on_link_event([&](sdk::LinkEvent e) { closed += e == sdk::LinkEvent::Closed; });
  ASSERT_TRUE(transport->connect(2s, false));
  std::atomic<int> received{0};
  auto sub = transport->subscribe("plugin.test", "", [&](sdk::Message&&) { ++received; });
  ASSERT_TRUE(sub);
  ASSERT_TRUE(transport->publish(sdk::Message{"plugin.test", "", {}, "x"}));
  EXPECT_TRUE(mesh::testing::eventually([&] { return received.load() == 1; }, 5000));
  sub->reset();
  info->destroy(plugin);  // closes: Closed delivered before destroy returns
  EXPECT_EQ(closed.load(), 1);

  ASSERT_EQ(::dlclose(lib), 0);
  // Linked with -z nodelete: libnats' threads may outlive the object, so the code stays mapped.
  void* again = ::dlopen(kPluginPath.c_str(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(again, nullptr);
  if (again) ::dlclose(again);
}

}  // namespace
}  // namespace mesh::transports::nats::test
