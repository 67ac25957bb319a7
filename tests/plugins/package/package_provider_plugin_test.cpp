// Loads the built mesh-provider-package.so the way a host does (dlopen + the one exported
// symbol), without any host code, and checks the descriptor, the schemas and a pure plan.
// Needs neither root nor apt.
#include <dlfcn.h>

#include <gtest/gtest.h>

#include <string>

#include "mesh/sdk/sdk.h"

namespace {

using mesh::sdk::Value;

const std::string kPluginPath = std::string(MESH_TEST_PLUGIN_DIR) + "/mesh-provider-package.so";

struct Library {
  void* handle = nullptr;
  ~Library() {
    if (handle) ::dlclose(handle);
  }
};

TEST(PackageProviderPluginTest, LoadsCreatesAndDestroys) {
  Library lib;
  lib.handle = ::dlopen(kPluginPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib.handle, nullptr) << ::dlerror();
  using InfoFn = const mesh_plugin_info* (*)() noexcept;
  auto info_fn = reinterpret_cast<InfoFn>(::dlsym(lib.handle, MESH_PLUGIN_INFO_SYMBOL));
  ASSERT_NE(info_fn, nullptr) << ::dlerror();
  const mesh_plugin_info* info = info_fn();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->abi_major, MESH_SDK_ABI_MAJOR);
  EXPECT_LE(info->abi_minor, MESH_SDK_ABI_MINOR);
  EXPECT_EQ(info->struct_size, sizeof(mesh_plugin_info));
  EXPECT_STREQ(info->kind, "provider");
  EXPECT_STREQ(info->name, "package");
  ASSERT_NE(info->create, nullptr);
  ASSERT_NE(info->destroy, nullptr);

  mesh::sdk::NullLogger logger;
  mesh::sdk::HostContext host;
  host.logger = &logger;
  host.role = "tool";
  mesh::sdk::Plugin* plugin = info->create(&host);
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
  Library lib;
  lib.handle = ::dlopen(kPluginPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib.handle, nullptr) << ::dlerror();
  // Internal symbols stay hidden (the static library is built with hidden visibility).
  EXPECT_EQ(::dlsym(lib.handle, "_ZN4mesh7plugins7package16compare_versionsESt17basic_string_viewIcSt11char_traitsIcEES5_"),
            nullptr);
}

}  // namespace
