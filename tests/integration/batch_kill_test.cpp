// Issue 16 part 2 (decision 0106): a kill -9 at any point of a batched first apply leaves every
// file old or new, never torn, and ownership right after the restart: every file the mesh wrote
// is owned (so a later declaration that drops it prunes it), and a file that was there before and
// was never declared is never adopted, so never pruned. `mesh-host apply` as a process, no broker.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mesh/engine/state.h"
#include "mesh/testing/process.h"
#include "mesh/testing/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using mesh::testing::BackgroundProcess;
using mesh::testing::run_process;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string content_for(int round, int i) {
  return "round " + std::to_string(round) + " file " + std::to_string(i) + "\n" +
         std::string(2048 + round * 13, char('a' + round % 26)) + "\n";
}

class BatchKillTest : public ::testing::Test {
 protected:
  BatchKillTest() { fs::create_directories(dir()); }
  fs::path dir() const { return tmp.path() / "files"; }
  fs::path state() const { return tmp.path() / "state"; }
  fs::path name(int i) const { return dir() / ("f" + std::to_string(i)); }

  /// A declaration of files 0..n-1 with round `round`'s contents, written to a file.
  std::string declaration(int round, int n) {
    std::string json = R"({"resources": [)";
    for (int i = 0; i < n; ++i) {
      std::string c = content_for(round, i);
      std::string esc;
      for (char ch : c) esc += ch == '\n' ? std::string("\\n") : std::string(1, ch);
      json += std::string(i ? "," : "") + R"({"type": "file", "id": ")" + name(i).string() +
              R"(", "properties": {"content": ")" + esc + R"(", "mode": "0644"}})";
    }
    json += "]}";
    const fs::path file = tmp.path() / ("decl-" + std::to_string(round) + "-" + std::to_string(n) + ".json");
    std::ofstream(file) << json;
    return file.string();
  }
  std::vector<std::string> apply_argv(const std::string& decl) {
    const fs::path config = tmp.path() / "host.toml";
    std::ofstream(config) << "[node]\nname = \"batch-01\"\nstate_dir = \"" << state().string()
                          << "\"\n[plugins]\ndir = \"" << MESH_TEST_PLUGIN_DIR
                          << "\"\nload = [\"file\"]\n[limits]\nmax_message = 67108864\n";
    return {std::string(MESH_TEST_BIN_DIR) + "/mesh-host", "apply", decl, "--config", config.string()};
  }
  std::set<std::string> owned() {
    auto sd = mesh::engine::StateDir::open(state().string());
    EXPECT_TRUE(sd) << sd.error().message;
    std::set<std::string> out;
    if (sd)
      for (const auto& o : sd->state().owned) out.insert(o.resource);
    return out;
  }

  mesh::testing::TempDir tmp;
};

TEST_F(BatchKillTest, KillNineDuringBatchedAppliesLeavesNoTornFileAndOwnsWhatTheMeshWrote) {
  const int kFiles = 1200;  // several batches of 256
  // Undeclared, there before the mesh: never adopted, never pruned.
  std::ofstream(dir() / "mine") << "not the mesh's\n";
  std::set<std::string> valid;
  std::mt19937 rng(16);
  int killed_mid_apply = 0;
  // 8 rounds in the suite; NOX_MESH_KILL9_ROUNDS runs more (scripts/soak-kill9.sh sets it).
  // The window between a batch's intent and its settling line is short beside its syncfs, so
  // few kills land in it: the adoption itself is tested in StateDirIntentTest.
  const char* env_rounds = std::getenv("NOX_MESH_KILL9_ROUNDS");
  const int rounds = env_rounds && std::atoi(env_rounds) > 0 ? std::atoi(env_rounds) : 8;
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < kFiles; ++i) valid.insert(content_for(round, i));
    const std::string decl = declaration(round, kFiles);
    {
      BackgroundProcess host(apply_argv(decl));
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(20, 600)(rng)));
      if (host.running()) ++killed_mid_apply;
      host.stop(SIGKILL, 2000);
    }
    const std::set<std::string> own = owned();
    for (const auto& e : fs::directory_iterator(dir())) {
      const std::string base = e.path().filename().string();
      // A temporary file (".<name>.mesh-tmp-<hex>") may be left by the kill; never a target.
      if (base.find(".mesh-tmp-") != std::string::npos) continue;
      if (base == "mine") {
        EXPECT_EQ(read_text(e.path()), "not the mesh's\n");
        EXPECT_FALSE(own.count("file:" + e.path().string())) << "an undeclared file was adopted in round " << round;
        continue;
      }
      ASSERT_TRUE(valid.count(read_text(e.path()))) << "torn file " << e.path() << " after kill -9 in round " << round;
      // Every file the mesh wrote is owned once the state is read again.
      EXPECT_TRUE(own.count("file:" + e.path().string()))
          << e.path() << " exists (the mesh wrote it) but is not owned after kill -9 in round " << round;
    }
  }
  EXPECT_GT(killed_mid_apply, 0) << "no kill landed during an apply; the test proved nothing";
  // A declaration of the first ten: the rest the mesh wrote are pruned; `mine` stays.
  auto done = run_process(apply_argv(declaration(rounds, 10)), {}, 300000);
  ASSERT_EQ(done.exit_code, 0) << done.out << done.err;
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir()))
    if (e.path().filename().string().find(".mesh-tmp-") == std::string::npos) left.push_back(e.path().filename());
  std::sort(left.begin(), left.end());
  std::vector<std::string> want{"mine"};
  for (int i = 0; i < 10; ++i) want.push_back("f" + std::to_string(i));
  std::sort(want.begin(), want.end());
  EXPECT_EQ(left, want);
  EXPECT_EQ(read_text(dir() / "mine"), "not the mesh's\n");
  for (int i = 0; i < 10; ++i) EXPECT_EQ(read_text(name(i)), content_for(rounds, i));
  EXPECT_EQ(owned().size(), 10u);
}

}  // namespace
