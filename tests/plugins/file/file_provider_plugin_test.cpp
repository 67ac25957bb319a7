// Loads the built mesh-provider-file.so the way a host does (dlopen + the one exported symbol),
// without any host code: checks the descriptor and drives the provider through one round.
#include <dlfcn.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "mesh/sdk/sdk.h"
#include "mesh/testing/plugins.h"

namespace {

using mesh::sdk::CancelToken;
using mesh::sdk::Value;

TEST(FileProviderPluginTest, LoadsCreatesAndDestroys) {
  mesh::testing::PluginLibrary lib("provider", "file");
  const mesh_plugin_info* info = lib.info();
  ASSERT_TRUE(mesh::testing::expect_descriptor(info, "provider", "file"));
  EXPECT_STREQ(info->version, "0.1.0");

  mesh::testing::TestHost host;
  mesh::sdk::Plugin* plugin = info->create(&host.context);
  ASSERT_NE(plugin, nullptr);
  auto* provider = dynamic_cast<mesh::sdk::Provider*>(plugin);
  ASSERT_NE(provider, nullptr) << "the plugin is not a mesh::sdk::Provider";
  EXPECT_EQ(provider->schema().name, "file");
  EXPECT_NE(provider->config_schema().find("allowed_roots"), nullptr);

  // One engine round through the loaded code, in a private directory.
  std::string tmpl = std::filesystem::temp_directory_path().string() + "/mesh-file-plugin-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string path = tmpl + "/f";
  Value config = Value::object();
  config.set("allowed_roots", Value(Value::Array{Value(tmpl)}));
  ASSERT_TRUE(plugin->configure(config));
  mesh::sdk::Resource want;
  want.rid = {"file", path};
  want.properties.set("content", "loaded\n");
  want.properties.set("mode", "0600");
  want.properties = mesh::sdk::apply_defaults(provider->schema(), want.properties);
  EXPECT_TRUE(provider->validate(want));
  auto observed = provider->read(want.rid);
  ASSERT_TRUE(observed);
  EXPECT_FALSE(observed->has_value());
  auto plan = provider->plan(want, *observed);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->action, mesh::sdk::PlanAction::Create);
  CancelToken cancel;
  auto applied = provider->apply(*plan, cancel);
  ASSERT_TRUE(applied) << applied.error().describe();
  observed = provider->read(want.rid);
  ASSERT_TRUE(observed && observed->has_value());
  EXPECT_EQ((*observed)->properties.get_string("mode"), "0600");
  auto again = provider->plan(want, *observed);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->empty());
  EXPECT_TRUE(provider->remove(want.rid, cancel));

  info->destroy(plugin);
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
}

TEST(FileProviderPluginTest, ExportsOnlyTheInfoSymbol) {
  mesh::testing::PluginLibrary lib("provider", "file");
  // The provider's vtable and a constructor: hidden visibility keeps them out of the dynamic
  // symbol table, so two plugins can never bind to each other's copies.
  EXPECT_EQ(::dlsym(lib.handle(), "_ZTVN4mesh7plugins4file12FileProviderE"), nullptr);
  EXPECT_EQ(::dlsym(lib.handle(), "_ZN4mesh7plugins4file12FileProviderC1ERKNS_3sdk11HostContextE"),
            nullptr);
}

}  // namespace
