// `mesh-host plugins` run as a process over a folder holding a good plugin and one built for
// libstdc++'s old string ABI: the old-ABI one is listed as refused, with both fingerprints,
// and nothing crashes (before the fingerprint check the listing aborted in that plugin's code).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "mesh/testing/process.h"
#include "mesh/testing/temp_dir.h"

namespace {

namespace fs = std::filesystem;

const std::string kHost = std::string(MESH_TEST_BIN_DIR) + "/mesh-host";
const fs::path kPlugins = LOADER_TEST_PLUGIN_DIR;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(PluginsListingTest, AnOldAbiPluginIsListedAsRefused) {
  mesh::testing::TempDir dir;
  for (const char* so : {"mesh-provider-good.so", "mesh-provider-oldabi.so"})
    fs::create_symlink(kPlugins / so, dir.path() / so);
  const std::string oldabi = (dir.path() / "mesh-provider-oldabi.so").string();

  auto text = mesh::testing::run_process({kHost, "plugins", "--plugin-dir", dir.path().string()});
  EXPECT_EQ(text.exit_code, 1) << text.out << text.err;  // a plugin failed to load
  EXPECT_TRUE(contains(text.out, "provider   good ")) << text.out;
  EXPECT_TRUE(contains(text.out, "error      plugin " + oldabi +
                                     " ('oldabi' 9.9.9) was built for another C++ ABI "
                                     "(_GLIBCXX_USE_CXX11_ABI 0, this program 1; "))
      << text.out;
  EXPECT_TRUE(contains(text.out, "Plugin: libstdc++ ")) << text.out;
  EXPECT_TRUE(contains(text.out, "This program: libstdc++ ")) << text.out;
  EXPECT_FALSE(contains(text.out + text.err, "plugin=oldabi test provider created"))
      << "create() ran in a refused plugin: " << text.out << text.err;

  auto json = mesh::testing::run_process(
      {kHost, "plugins", "--plugin-dir", dir.path().string(), "--output", "json"});
  EXPECT_EQ(json.exit_code, 1) << json.out << json.err;
  EXPECT_TRUE(contains(json.out, "\"error\":\"plugin " + oldabi)) << json.out;
  // The loaded plugin's fingerprint is shown, compiler included.
  EXPECT_TRUE(contains(json.out, "\"cxx_abi\":\"libstdc++ ")) << json.out;
  EXPECT_TRUE(contains(json.out, ", compiler ")) << json.out;
}

}  // namespace
