// mesh-control's start-up and its messages: a refused store writes no trust material, a missing
// plugin names its config key and what is there, and a clock refusal says the real skew.
#include <unistd.h>

#include <fstream>
#include <regex>

#include "control_fixture.h"

namespace mesh::control::test {
namespace {

using ControlStartupTest = ControlTest;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(ControlStartupTest, AMissingPluginNamesItsConfigKeyAndThePluginsThere) {
  const fs::path cfg = dir() / "bad.toml";
  std::string text = control_config(dir() / "s2", nats_->url());
  text.replace(text.find("\"sqlite\""), 8, "\"sqlit\"");
  write_text(cfg, text);
  auto r = mesh::testing::run_process({bin("mesh-control"), "run", "--config", cfg.string()}, {}, 10000);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(cfg.string() + ":"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("store.plugin: no store plugin 'sqlit'"), std::string::npos) << r.err;
  // The store plugins built here, sorted: jetstream-kv (unless left out of the build) and sqlite.
  EXPECT_NE(r.err.find("(store plugins in " MESH_TEST_PLUGIN_DIR ": "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sqlite)"), std::string::npos) << r.err;

  text = control_config(dir() / "s2", nats_->url());
  text.replace(text.find("\"nats\""), 6, "\"natz\"");
  write_text(cfg, text);
  r = mesh::testing::run_process({bin("mesh-control"), "run", "--config", cfg.string()}, {}, 10000);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("transport.plugin: no transport plugin 'natz'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nats"), std::string::npos) << r.err;
}

// Builds never run as root: a root control plane with pipelines and no build_user, or a
// build_user that does not exist, does not start (exit 2, naming file and key) — rather than start
// and fail every run.
TEST_F(ControlStartupTest, PipelinesWithoutAUsableBuildUserStopTheStart) {
  const fs::path cfg = dir() / "pipelines.toml";
  const std::string base = control_config(dir() / "s4", nats_->url()) + "\n[pipelines]\ndir = \"" +
                           (dir() / "pipelines").string() + "\"\n";
  write_text(cfg, base + "build_user = \"no-such-user-nox-mesh\"\n");
  auto r = mesh::testing::run_process({bin("mesh-control"), "run", "--config", cfg.string()}, {}, 10000);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(cfg.string() + ":"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pipelines.build_user: 'no-such-user-nox-mesh': no such user"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir() / "s4" / "control.key")) << "refused before any key is written";
  if (::geteuid() == 0) {
    write_text(cfg, base);
    r = mesh::testing::run_process({bin("mesh-control"), "run", "--config", cfg.string()}, {}, 10000);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("pipelines: mesh-control runs as root and builds never do: set build_user"),
              std::string::npos)
        << r.err;
  }
}

TEST_F(ControlStartupTest, AStoreThatCannotOpenLeavesNoKeyOrIdentityBehind) {
  const fs::path state = dir() / "s3";
  fs::create_directories(state);
  write_text(state / "not-a-db", std::string(8192, 'x'));
  const fs::path cfg = dir() / "store.toml";
  std::string text = control_config(state, nats_->url());
  text.replace(text.find("plugin = \"sqlite\"\n"), 18,
               "plugin = \"sqlite\"\npath = \"" + (state / "not-a-db").string() + "\"\n");
  write_text(cfg, text);
  auto r = mesh::testing::run_process({bin("mesh-control"), "run", "--config", cfg.string()}, {}, 10000);
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("not-a-db"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(state / "control.key")) << "the store is checked before any key is written";
  EXPECT_FALSE(fs::exists(state / "admin.identity"));
  EXPECT_FALSE(fs::exists(state / "operators.json"));
}

TEST_F(ControlStartupTest, ASecondRunOnTheSameStateDirIsRefusedNamingItAndTheOtherPid) {
  // newuser finding 14: a copy of instance 1's config on its own state_dir started silently as the
  // same instance id. The running one (SetUp's) holds <state_dir>/control.lock.
  const std::string lock = read_text(dir() / "state" / "control.lock");
  const std::string pid = std::to_string(control_->pid());
  EXPECT_EQ(lock, pid + "\n");
  const fs::path cfg = dir() / "same-state.toml";
  write_text(cfg, control_config(dir() / "state", nats_->url()));
  auto r = mesh::testing::run_process({bin("mesh-control"), "run", "--config", cfg.string()}, {}, 10000);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("state_dir " + (dir() / "state").string() + " is in use by another mesh-control (pid " + pid),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("control started"), std::string::npos) << r.err;
  EXPECT_EQ(read_text(dir() / "state" / "control.lock"), pid + "\n") << "the running instance's lock is untouched";
  EXPECT_EQ(mesh({"nodes"}).exit_code, 0) << "the running instance goes on";
  // Once it stopped, the directory is free again.
  control_.reset();
  BackgroundProcess again({bin("mesh-control"), "run", "--config", cfg.string()});
  EXPECT_TRUE(again.wait_for_output("control started", 15000)) << again.stderr_text();
}

TEST_F(ControlStartupTest, AClockRefusalSaysTheSkewPreciselyEnough) {
  auto id = trust::load_operator_identity(admin_identity());
  ASSERT_TRUE(id) << id.error().message;
  // 60.6 s ahead with a tolerance of 60 s: whole seconds would print "60 s ... tolerance 60 s".
  auto m = protocol::make_message(protocol::api_subject("nodes"), "{}");
  trust::sign_request(m, trust::kHeaderOperator, id->name, id->secret_key, common::now_ms() + 60'600);
  auto reply = raw()->request(m, 5s);
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(status_of(*reply), "error") << reply->body;
  const std::string message = json(reply->body).find("error")->get_string("message");
  EXPECT_TRUE(std::regex_search(message, std::regex("its timestamp is 60\\.[0-9]+ s from the control plane's clock "
                                                    "\\(tolerance 60 s\\)")))
      << message;
}

}  // namespace
}  // namespace mesh::control::test
