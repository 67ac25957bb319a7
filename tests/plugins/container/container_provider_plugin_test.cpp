// Loads the built mesh-provider-container.so the way a host does (dlopen + the one exported
// symbol), without any host code, and checks the descriptor and the schemas. No engine needed.
#include <dlfcn.h>

#include <gtest/gtest.h>

#include <string>

#include "mesh/sdk/sdk.h"
#include "mesh/testing/plugins.h"

namespace {

TEST(ContainerProviderPluginTest, LoadsCreatesAndDestroys) {
  mesh::testing::PluginLibrary lib("provider", "container");
  const mesh_plugin_info* info = lib.info();
  ASSERT_TRUE(mesh::testing::expect_descriptor(info, "provider", "container"));

  mesh::testing::TestHost host;
  mesh::sdk::Plugin* plugin = info->create(&host.context);
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
  EXPECT_EQ(lib.close(), 0);
}

TEST(ContainerProviderPluginTest, ExportsOnlyTheEntryPoint) {
  // Boost.JSON and libsodium live inside the module; a symbol of theirs (or of std templates)
  // in the module's dynamic table could interpose with another module's copy. dlsym also
  // searches the module's dependencies, so ask dladdr which object a found symbol belongs to.
  mesh::testing::PluginLibrary lib("provider", "container");
  void* handle = lib.handle();
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
}

}  // namespace
