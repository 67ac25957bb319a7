// Loads mesh-transport-nats.so with dlopen, as the host's loader would, without the loader.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>

#include "mesh/sdk/sdk.h"
#include "mesh/testing/nats_server.h"
#include "mesh/testing/plugins.h"
#include "mesh/testing/process.h"

namespace mesh::transports::nats::test {
namespace {

using namespace std::chrono_literals;

TEST(NatsTransportPluginTest, DescriptorAndRoundTripThroughTheLoadedLibrary) {
  mesh::testing::PluginLibrary lib("transport", "nats");
  const mesh_plugin_info* info = lib.info();
  ASSERT_TRUE(mesh::testing::expect_descriptor(info, "transport", "nats"));
  EXPECT_STREQ(info->version, "0.1.0");

  mesh::testing::NatsServer server;
  mesh::testing::TestHost host;
  sdk::Plugin* plugin = info->create(&host.context);
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

  ASSERT_EQ(lib.close(), 0);
  // Linked with -z nodelete: libnats' threads may outlive the object, so the code stays mapped.
  void* again = ::dlopen(lib.path().c_str(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(again, nullptr);
  if (again) ::dlclose(again);
}

}  // namespace
}  // namespace mesh::transports::nats::test
