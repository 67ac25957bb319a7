// Loads the built mesh-provider-container.so the way a host does (dlopen + the one exported
// symbol), without any host code, and checks the descriptor and the schemas. No engine needed.
#include <dlfcn.h>

#include <gtest/gtest.h>

#include <string>

#include "mesh/sdk/sdk.h"

namespace {

const std::string kPluginPath = std::string(MESH_TEST_PLUGIN_DIR) + "/mesh-provider-container.so";

TEST(ContainerProviderPluginTest, LoadsCreatesAndDestroys) {
  void* handle = ::dlopen(kPluginPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  using InfoFn = const mesh_plugin_info* (*)() noexcept;
  auto info_fn = reinterpret_cast<InfoFn>(::dlsym(handle, MESH_PLUGIN_INFO_SYMBOL));
  ASSERT_NE(info_fn, nullptr) << ::dlerror();
  const mesh_plugin_info* info = info_fn();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->abi_major, MESH_SDK_ABI_MAJOR);
  EXPECT_LE(info->abi_minor, MESH_SDK_ABI_MINOR);
  EXPECT_EQ(info->struct_size, sizeof(mesh_plugin_info));
  EXPECT_STREQ(info->kind, "provider");
  EXPECT_STREQ(info->name, "container");
  ASSERT_NE(info->description, nullptr);

  mesh::sdk::NullLogger logger;
  mesh::sdk::HostContext host;
  host.logger = &logger;
  host.role = "tool";
  mesh::sdk::Plugin* plugin = info->create(&host);
  ASSERT_NE(plugin, nullptr);
  auto* provider = static_cast<mesh::sdk::Provider*>(plugin);  // kind "provider"
  EXPECT_EQ(provider->schema().name, "container");
  EXPECT_NE(provider->config_schema().find("global_args"), nullptr);
  mesh::sdk::Value config = mesh::sdk::apply_defaults(provider->config_schema(),
                                                      mesh::sdk::Value::object());
  EXPECT_TRUE(provider->configure(config));
  mesh::sdk::Resource r;
  r.rid = {"container", "bad name"};
  r.properties.set("image", "busybox");
  auto valid = provider->validate(r);
  ASSERT_FALSE(valid);
  EXPECT_EQ(valid.error().path, "id");
  info->destroy(plugin);
  EXPECT_EQ(::dlclose(handle), 0);
}

TEST(ContainerProviderPluginTest, ExportsOnlyTheEntryPoint) {
  // Boost.JSON and libsodium live inside the module; a symbol of theirs (or of std templates)
  // in the module's dynamic table could interpose with another module's copy. dlsym also
  // searches the module's dependencies, so ask dladdr which object a found symbol belongs to.
  void* handle = ::dlopen(kPluginPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  void* entry = ::dlsym(handle, MESH_PLUGIN_INFO_SYMBOL);
  ASSERT_NE(entry, nullptr);
  Dl_info own{};
  ASSERT_NE(::dladdr(entry, &own), 0);
  for (const char* name :
       {"_ZNK5boost6system14error_category10equivalentEiRKNS0_15error_conditionE",
        "_ZTISt18bad_variant_access"}) {
    void* sym = ::dlsym(handle, name);
    if (!sym) continue;
    Dl_info where{};
    ASSERT_NE(::dladdr(sym, &where), 0);
    EXPECT_STRNE(where.dli_fname, own.dli_fname) << name << " is exported by the plugin";
  }
  ::dlclose(handle);
}

}  // namespace
