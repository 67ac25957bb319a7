// mesh-host with `[plugins] dir` as a list (a system and a local directory, as a third party's
// plugin is deployed): run as a process on a real config file, it loads each plugin from the
// first directory holding it, and warns, naming both files, about a plugin in two directories.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "mesh/testing/process.h"
#include "mesh/testing/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using mesh::testing::run_process;

const std::string kHost = MESH_TEST_BIN_DIR "/mesh-host";

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

class PluginDirsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // local: a third party's plugin (the test-only sleep provider) and a copy of the built-in
    // file provider, shadowing the one in the build's plugin folder (the "system" directory).
    local_ = tmp_.path() / "local";
    fs::create_directories(local_);
    fs::create_directories(tmp_.path() / "managed");
    fs::copy_file(MESH_TEST_ONLY_PLUGIN_DIR "/mesh-provider-sleep.so", local_ / "mesh-provider-sleep.so");
    fs::copy_file(MESH_TEST_PLUGIN_DIR "/mesh-provider-file.so", local_ / "mesh-provider-file.so");
    config_ = tmp_.path() / "host.toml";
    write_text(config_, "[node]\nname = \"dirs-01\"\nstate_dir = \"" + (tmp_.path() / "state").string() +
                            "\"\n\n[plugins]\ndir = [\"" + (tmp_.path() / "not-made-yet").string() + "\", \"" +
                            local_.string() + "\", \"" MESH_TEST_PLUGIN_DIR "\"]\nload = [\"file\", \"sleep\"]\n\n"
                            "[transport]\nservers = [\"nats://127.0.0.1:1\"]\n\n[provider.file]\nallowed_roots = [\"" +
                            (tmp_.path() / "managed").string() + "\"]\n");
  }

  mesh::testing::TempDir tmp_;
  fs::path local_, config_;
};

TEST_F(PluginDirsTest, ThePluginsCommandListsEachPluginFromTheFirstDirectoryHoldingIt) {
  auto r = run_process({kHost, "plugins", "--config", config_.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string local_file = (local_ / "mesh-provider-file.so").string();
  const std::string system_file = MESH_TEST_PLUGIN_DIR "/mesh-provider-file.so";
  EXPECT_TRUE(contains(r.out, local_file)) << r.out;
  EXPECT_FALSE(contains(r.out, system_file)) << "a shadowed file is not listed: " << r.out;
  EXPECT_TRUE(contains(r.out, (local_ / "mesh-provider-sleep.so").string())) << r.out;
  EXPECT_TRUE(contains(r.out, MESH_TEST_PLUGIN_DIR "/mesh-transport-nats.so")) << r.out;
  // The warning names both files.
  EXPECT_TRUE(contains(r.err, "warn")) << r.err;
  EXPECT_TRUE(contains(r.err, "loading " + local_file + ", not " + system_file)) << r.err;
}

TEST_F(PluginDirsTest, ApplyLoadsProvidersFromEveryDirectoryAndWarnsAboutTheShadowedOne) {
  const std::string target = (tmp_.path() / "managed" / "greeting").string();
  const fs::path decl = tmp_.path() / "decl.json";
  write_text(decl, "{\"resources\": [{\"type\": \"file\", \"id\": \"" + target +
                       "\", \"properties\": {\"content\": \"hello\\n\"}}, {\"type\": \"sleep\", \"id\": \"" +
                       (tmp_.path() / "managed" / "slept").string() +
                       "\", \"properties\": {\"value\": \"v1\", \"sleep_ms\": 0}}]}\n");
  auto r = run_process({kHost, "apply", decl.string(), "--config", config_.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::ifstream in(target);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "hello\n");
  EXPECT_TRUE(fs::exists(tmp_.path() / "managed" / "slept"));
  EXPECT_TRUE(contains(r.err, "loading " + (local_ / "mesh-provider-file.so").string() +
                                  ", not " MESH_TEST_PLUGIN_DIR "/mesh-provider-file.so"))
      << r.err;
}

TEST_F(PluginDirsTest, AProviderInNoDirectoryNamesTheKeyAndEveryDirectory) {
  write_text(config_, "[node]\nname = \"dirs-01\"\nstate_dir = \"" + (tmp_.path() / "state").string() +
                          "\"\n\n[plugins]\ndir = [\"" + local_.string() + "\", \"" MESH_TEST_PLUGIN_DIR
                          "\"]\nload = [\"nosuch\"]\n");
  auto r = run_process({kHost, "self-test", "--config", config_.string()});
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  const std::string all = r.out + r.err;
  EXPECT_TRUE(contains(all, "plugins.load")) << all;
  EXPECT_TRUE(contains(all, "mesh-provider-nosuch.so is in none of the plugin directories " + local_.string() +
                                ", " MESH_TEST_PLUGIN_DIR))
      << all;
}

}  // namespace
