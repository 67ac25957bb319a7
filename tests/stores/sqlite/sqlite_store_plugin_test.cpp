// The built `mesh-store-sqlite.so`, loaded with dlopen as the host loads it: the descriptor, then
// create → configure → open → declare → destroy, in a temp directory.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "mesh/sdk/sdk.h"
#include "mesh/testing/plugins.h"

namespace {

using namespace mesh::sdk;

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/mesh-sqlite-plugin-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

TEST(SqliteStorePluginTest, LoadsConfiguresOpensAndDeclares) {
  mesh::testing::PluginLibrary lib("store", "sqlite");
  const mesh_plugin_info* info = lib.info();
  ASSERT_TRUE(mesh::testing::expect_descriptor(info, "store", "sqlite"));
  EXPECT_STREQ(info->version, "0.1.0");

  mesh::testing::TestHost host;
  TempDir dir;
  {
    Plugin* plugin = info->create(&host.context);
    ASSERT_NE(plugin, nullptr);
    auto* store = static_cast<Store*>(plugin);  // kind "store" says what it is

    Value config = Value::object();
    config.set("path", (dir.path() / "mesh.db").string());
    ASSERT_TRUE(validate_against(store->config_schema(), config, ""));
    config = apply_defaults(store->config_schema(), config);
    EXPECT_EQ(config.get_int("busy_timeout", -1), 5000);
    auto configured = store->configure(config);
    ASSERT_TRUE(configured) << configured.error().describe();
    auto opened = store->open();
    ASSERT_TRUE(opened) << opened.error().describe();

    TokenRecord token;
    token.id = "t1";
    token.node = "web-01";
    token.hash = std::string(64, 'a');
    token.created_at_ms = 1;
    token.expires_at_ms = 10'000;
    ASSERT_TRUE(store->add_token(token));
    auto node = store->enrol(token.hash, "web-01", "key", 2);
    ASSERT_TRUE(node) << node.error().describe();
    auto delivery = store->declare(
        {DeclarationWrite{
            "web-01",
            [](std::uint64_t rev) { return "{\"revision\":" + std::to_string(rev) + "}"; }}},
        3, 10);
    ASSERT_TRUE(delivery) << delivery.error().describe();
    EXPECT_EQ(delivery->id, 1u);
    ASSERT_EQ(delivery->targets.size(), 1u);
    EXPECT_EQ(delivery->targets[0].revision, 1u);
    auto rev = store->revision("web-01", 1);
    ASSERT_TRUE(rev) << rev.error().describe();
    EXPECT_EQ(rev->body, "{\"revision\":1}");
    EXPECT_EQ(rev->digest.size(), 64u);

    info->destroy(plugin);  // before the library goes
  }
  EXPECT_EQ(lib.close(), 0);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "mesh.db"));
}

}  // namespace
