// Plugin search paths: `[plugins] dir` as a list of directories, searched in order; the first
// directory holding a plugin wins, and the same plugin in a later directory is a warning that
// names both files.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "mesh/common/logging.h"
#include "mesh/loader/loader.h"
#include "mesh/testing/temp_dir.h"

namespace mesh::loader {
namespace {

namespace fs = std::filesystem;
using sdk::ErrorCode;

const std::string kDir = LOADER_TEST_PLUGIN_DIR;

/// Copies the built test plugin mesh-provider-<name>.so into `dir` (made when missing).
std::string install(const std::string& name, const fs::path& dir) {
  fs::create_directories(dir);
  const std::string file = plugin_file_name("provider", name);
  fs::copy_file(kDir + "/" + file, dir / file, fs::copy_options::overwrite_existing);
  return (dir / file).string();
}

/// Captures what the process logger writes while it lives.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)) {
    common::logger()->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = common::logger()->sinks();
    for (auto it = sinks.begin(); it != sinks.end(); ++it)
      if (*it == sink_) {
        sinks.erase(it);
        break;
      }
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(PluginDirsTest, TheFirstDirectoryHoldingAPluginWins) {
  testing::TempDir tmp;
  const auto local = tmp.path() / "local", system = tmp.path() / "system";
  fs::create_directories(local);
  const std::string in_system = install("good", system);

  // Only the second directory holds it: found there.
  auto lp = load_plugin(PluginDirs{local.string(), system.string()}, "provider", "good");
  ASSERT_TRUE(lp) << lp.error().describe();
  EXPECT_EQ(lp->path, in_system);

  // Both hold it: the first one's file is loaded.
  const std::string in_local = install("good", local);
  lp = load_plugin(PluginDirs{local.string(), system.string()}, "provider", "good");
  ASSERT_TRUE(lp) << lp.error().describe();
  EXPECT_EQ(lp->path, in_local);
  lp = load_plugin(PluginDirs{system.string(), local.string()}, "provider", "good");
  ASSERT_TRUE(lp) << lp.error().describe();
  EXPECT_EQ(lp->path, in_system);
}

TEST(PluginDirsTest, TheSamePluginInTwoDirectoriesIsAWarningNamingBothFiles) {
  testing::TempDir tmp;
  const std::string first = install("good", tmp.path() / "a");
  const std::string second = install("good", tmp.path() / "b");
  const PluginDirs dirs{(tmp.path() / "a").string(), (tmp.path() / "b").string()};

  const PluginFile found = find_plugin_file(dirs, "provider", "good");
  EXPECT_EQ(found.path, first);
  EXPECT_EQ(found.shadowed, std::vector<std::string>{second});

  LogCapture log;
  auto lp = load_plugin(dirs, "provider", "good");
  ASSERT_TRUE(lp) << lp.error().describe();
  const std::string text = log.text();
  EXPECT_TRUE(contains(text, "warn")) << text;
  EXPECT_TRUE(contains(text, "loading " + first + ", not " + second)) << text;
  EXPECT_TRUE(contains(text, "outcome=shadowed")) << text;

  // A plugin in one directory only: no warning.
  install("abiminor", tmp.path() / "b");
  LogCapture quiet;
  (void)load_plugin(dirs, "provider", "abiminor");
  EXPECT_FALSE(contains(quiet.text(), "more than one plugin directory")) << quiet.text();
}

TEST(PluginDirsTest, APluginInNoDirectoryIsNotFoundNamingEveryDirectory) {
  testing::TempDir tmp;
  const PluginDirs dirs{(tmp.path() / "a").string(), (tmp.path() / "nosuch").string()};
  fs::create_directories(dirs[0]);
  auto lp = load_plugin(dirs, "provider", "good");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::NotFound);
  EXPECT_EQ(lp.error().message, "plugin file mesh-provider-good.so is in none of the plugin directories " +
                                    dirs[0] + ", " + dirs[1]);
  EXPECT_TRUE(find_plugin_file(dirs, "provider", "good").path.empty());
}

TEST(PluginDirsTest, AFileThatFailsToLoadIsReportedNotPassedOver) {
  // A broken file in the first directory is that plugin's error: the host does not silently load
  // another copy from a later directory.
  testing::TempDir tmp;
  fs::create_directories(tmp.path() / "a");
  std::ofstream(tmp.path() / "a" / "mesh-provider-good.so") << "not an ELF file";
  install("good", tmp.path() / "b");
  auto lp = load_plugin(PluginDirs{(tmp.path() / "a").string(), (tmp.path() / "b").string()}, "provider", "good");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::FailedPrecondition);
  EXPECT_TRUE(contains(lp.error().message, (tmp.path() / "a" / "mesh-provider-good.so").string()))
      << lp.error().message;
}

TEST(PluginDirsTest, OneDirectoryBehavesAsBefore) {
  auto lp = load_plugin(PluginDirs{kDir}, "provider", "nosuch");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::NotFound);
  EXPECT_EQ(lp.error().message, "plugin file " + kDir + "/mesh-provider-nosuch.so does not exist");
  EXPECT_EQ(load_all(PluginDirs{kDir}).size(), load_all(kDir).size());
}

TEST(PluginDirsTest, LoadAllListsEachPluginOnceFromItsFirstDirectory) {
  testing::TempDir tmp;
  const std::string good_a = install("good", tmp.path() / "a");
  install("good", tmp.path() / "b");
  const std::string other_b = install("abiminor", tmp.path() / "b");  // refused: an error entry
  const PluginDirs dirs{(tmp.path() / "a").string(), (tmp.path() / "missing").string(),
                        (tmp.path() / "b").string()};
  LogCapture log;
  auto all = load_all(dirs);
  ASSERT_EQ(all.size(), 2u);
  std::map<std::string, std::string> seen;  // path -> ok / error
  for (const auto& r : all) {
    if (r)
      seen[r->path] = "ok";
    else
      seen[contains(r.error().message, other_b) ? other_b : r.error().message] = "error";
  }
  EXPECT_EQ(seen[good_a], "ok");
  EXPECT_EQ(seen[other_b], "error");
  EXPECT_TRUE(contains(log.text(), "loading " + good_a + ", not " + (tmp.path() / "b" / "mesh-provider-good.so").string()))
      << log.text();

  EXPECT_EQ(plugin_names_in(dirs, "provider"), "abiminor, good");
  EXPECT_EQ(plugin_names_in(dirs, "transport"), "none");

  auto none = load_all(PluginDirs{(tmp.path() / "x").string(), (tmp.path() / "y").string()});
  ASSERT_EQ(none.size(), 1u);
  ASSERT_FALSE(none[0]);
  EXPECT_EQ(none[0].error().code, ErrorCode::NotFound);
  EXPECT_TRUE(contains(none[0].error().message, "none of the plugin directories exists")) << none[0].error().message;
}

}  // namespace
}  // namespace mesh::loader
