// Loads the built mesh-provider-package.so the way a host does (dlopen + the one exported
// symbol), without any host code, and checks the descriptor, the schemas and a pure plan.
// Needs neither root nor apt.
#include <dlfcn.h>

#include <gtest/gtest.h>

#include <string>

#include "mesh/sdk/sdk.h"
#include "mesh/testing/plugins.h"

namespace {

using mesh::sdk::Value;

TEST(PackageProviderPluginTest, LoadsCreatesAndDestroys) {
  mesh::testing::PluginLibrary lib("provider", "package");
  const mesh_plugin_info* info = lib.info();
  ASSERT_TRUE(mesh::testing::expect_descriptor(info, "provider", "package"));

  mesh::testing::TestHost host;
  mesh::sdk::Plugin* plugin = info->create(&host.context);
  ASSERT_NE(plugin, nullptr);
  auto* provider = dynamic_cast<mesh::sdk::Provider*>(plugin);
  ASSERT_NE(provider, nullptr) << "the plugin is not a mesh::sdk::Provider";
  EXPECT_EQ(provider->schema().name, "package");
  for (const char* attr : {"version", "ensure", "hold", "source"})
    EXPECT_NE(provider->schema().find(attr), nullptr) << attr;
  EXPECT_NE(provider->config_schema().find("lock_timeout"), nullptr);
  EXPECT_NE(provider->config_schema().find("command_timeout"), nullptr);
  EXPECT_TRUE(plugin->configure(
      mesh::sdk::apply_defaults(plugin->config_schema(), Value::object())));

  mesh::sdk::Resource want;
  want.rid = {"package", "nox-mesh-test-loaded"};
  want.properties.set("version", "1.0");
  want.properties = mesh::sdk::apply_defaults(provider->schema(), want.properties);
  EXPECT_TRUE(provider->validate(want));
  auto plan = provider->plan(want, std::nullopt);
  ASSERT_TRUE(plan) << plan.error().describe();
  EXPECT_EQ(plan->action, mesh::sdk::PlanAction::Create);
  info->destroy(plugin);
}

TEST(PackageProviderPluginTest, ExportsOnlyTheDescriptor) {
  mesh::testing::PluginLibrary lib("provider", "package");
  // Internal symbols stay hidden (the static library is built with hidden visibility).
  EXPECT_EQ(::dlsym(lib.handle(), "_ZN4mesh7plugins7package16compare_versionsESt17basic_string_viewIcSt11char_traitsIcEES5_"),
            nullptr);
}

}  // namespace
