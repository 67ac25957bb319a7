// StageRegistry (loading and configuring stage plugins from control.toml) and
// ControlStageContext (work directory, log, deploy), with the test-only `echo` stage plugin.
#include <gtest/gtest.h>

#include <filesystem>

#include "mesh/common/config.h"
#include "mesh/control/config.h"
#include "mesh/control/stages.h"

#ifndef MESH_TEST_STAGE_PLUGIN_DIR
#error "MESH_TEST_STAGE_PLUGIN_DIR must be defined"
#endif

namespace mesh::control {
namespace {

namespace fs = std::filesystem;
using sdk::ErrorCode;
using sdk::Value;

class StagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stages-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  sdk::Result<std::shared_ptr<StageRegistry>> load(const std::string& extra) {
    std::string text = "[control]\nstate_dir = \"" + dir_.string() + "/state\"\n[plugins]\ndir = \"" +
                       MESH_TEST_STAGE_PLUGIN_DIR + "\"\n" + extra;
    auto file = common::ConfigFile::parse(text, "control.toml");
    if (!file) return sdk::fail(file.error());
    auto config = load_control_config(*file);
    if (!config) return sdk::fail(config.error());
    loader::LoadOptions options;
    options.role = "control";
    options.state_base = config->state_dir;
    return StageRegistry::load(*config, options);
  }

  fs::path dir_;
};

TEST_F(StagesTest, NoStagesTableLoadsNothing) {
  auto r = load("");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE((*r)->names().empty());
  EXPECT_EQ((*r)->describe(), "none");
  EXPECT_EQ((*r)->find("echo"), nullptr);
}

TEST_F(StagesTest, LoadsConfiguresAndRunsAStage) {
  auto r = load("[stages]\nload = [\"echo\"]\n[stages.echo]\ngreeting = \"hello\"\n[repository]\ndir = \"" +
                dir_.string() + "/repo\"\n");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ((*r)->names(), std::vector<std::string>{"echo"});
  EXPECT_EQ((*r)->version("echo"), "0.1.0");
  auto stage = (*r)->find("echo");
  ASSERT_NE(stage, nullptr);

  ControlStageContext::Options o;
  o.run_id = 7;
  o.operator_name = "alice";
  o.work_base = (dir_ / "state" / "work").string();
  o.artifacts.set("build", Value::object());
  std::vector<std::string> seen;
  o.on_log = [&](std::string_view l) { seen.emplace_back(l); };
  std::string work;
  {
    auto ctx = ControlStageContext::create(o);
    ASSERT_TRUE(ctx) << ctx.error().message;
    work = (*ctx)->work_dir();
    EXPECT_TRUE(fs::is_directory(work));
    EXPECT_TRUE(fs::is_empty(work));
    EXPECT_EQ(fs::status(work).permissions() & fs::perms::all, fs::perms::owner_all);
    sdk::StageInput in;
    in.pipeline = "web";
    in.params.set("x", 1);
    sdk::CancelToken cancel;
    auto out = stage->run(in, **ctx, cancel);
    ASSERT_TRUE(out) << out.error().describe();
    EXPECT_EQ(out->artifacts.get_int("run_id", -1), 7);
    EXPECT_EQ(out->artifacts.get_string("operator"), "alice");
    EXPECT_EQ(out->artifacts.get_string("work_dir"), work);
    EXPECT_EQ(out->artifacts.find("params")->get_int("x", -1), 1);
    EXPECT_NE(out->artifacts.find("earlier")->find("build"), nullptr);
    // [repository] dir fills the stage's `repository` key the table leaves out.
    EXPECT_EQ(out->artifacts.get_string("repository"), dir_.string() + "/repo");
    EXPECT_EQ((*ctx)->log_lines(), std::vector<std::string>{"hello from web"});
    EXPECT_EQ(seen, std::vector<std::string>{"hello from web"});
    EXPECT_TRUE(fs::exists(work + "/touched"));
  }
  EXPECT_FALSE(fs::exists(work)) << "the work directory is removed with the context";
}

TEST_F(StagesTest, AStageFailureIsItsError) {
  auto r = load("[stages]\nload = \"echo\"\n[stages.echo]\ngreeting = \"hello\"\n");
  ASSERT_TRUE(r) << r.error().message;
  ControlStageContext::Options o;
  o.work_base = (dir_ / "work").string();
  auto ctx = ControlStageContext::create(o);
  ASSERT_TRUE(ctx);
  sdk::StageInput in;
  in.params.set("fail", "the tool said no");
  sdk::CancelToken cancel;
  auto out = (*r)->find("echo")->run(in, **ctx, cancel);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().code, ErrorCode::Failed);
  EXPECT_EQ(out.error().message, "the tool said no");
}

TEST_F(StagesTest, BadStageTablesNameFileLineAndKey) {
  auto unknown = load("[stages]\nload = [\"echo\"]\n[stages.echo]\ngreeting = \"hi\"\ngreting = \"x\"\n");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("control.toml:9: stages.echo.greting: unknown key"), std::string::npos)
      << unknown.error().message;

  auto missing = load("[stages]\nload = [\"echo\"]\n");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("stages.echo.greeting"), std::string::npos) << missing.error().message;

  auto refused = load("[stages]\nload = [\"echo\"]\n[stages.echo]\ngreeting = \"refuse\"\n");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("control.toml:8: stages.echo.greeting: greeting 'refuse' refused"),
            std::string::npos)
      << refused.error().message;

  auto not_loaded = load("[stages]\nload = [\"echo\"]\n[stages.echo]\ngreeting = \"hi\"\n[stages.publsh]\nx = 1\n");
  ASSERT_FALSE(not_loaded);
  EXPECT_NE(not_loaded.error().message.find("stages.publsh: [stages.publsh] is for stage 'publsh', which is not in stages.load"),
            std::string::npos)
      << not_loaded.error().message;

  auto no_plugin = load("[stages]\nload = [\"nope\"]\n");
  ASSERT_FALSE(no_plugin);
  EXPECT_NE(no_plugin.error().message.find("control.toml:6: stages.load: no stage plugin 'nope'"), std::string::npos)
      << no_plugin.error().message;
  EXPECT_NE(no_plugin.error().message.find("stage plugins in "), std::string::npos) << no_plugin.error().message;
  EXPECT_NE(no_plugin.error().message.find(": echo)"), std::string::npos) << no_plugin.error().message;

  auto bad_key = load("[stages]\nlod = [\"echo\"]\n");
  ASSERT_FALSE(bad_key);
  EXPECT_NE(bad_key.error().message.find("stages.lod: unknown key"), std::string::npos) << bad_key.error().message;
}

TEST_F(StagesTest, RepositoryTable) {
  auto file = common::ConfigFile::parse("[control]\nstate_dir = \"/s\"\n[plugins]\ndir = \"/p\"\n[repository]\nlisten = \"127.0.0.1:8080\"\n",
                                        "control.toml");
  ASSERT_TRUE(file);
  auto c = load_control_config(*file);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("repository.listen: needs repository.dir"), std::string::npos) << c.error().message;
  auto ok = common::ConfigFile::parse(
      "[control]\nstate_dir = \"/s\"\n[plugins]\ndir = \"/p\"\n[repository]\ndir = \"/r\"\nlisten = \"127.0.0.1:8080\"\n",
      "control.toml");
  ASSERT_TRUE(ok);
  auto c2 = load_control_config(*ok);
  ASSERT_TRUE(c2) << c2.error().message;
  EXPECT_EQ(c2->repository.dir, "/r");
  EXPECT_EQ(c2->repository.listen, "127.0.0.1:8080");
}

TEST_F(StagesTest, ContextLogSplitsLinesAndKeepsTheLast) {
  ControlStageContext::Options o;
  o.work_base = (dir_ / "work").string();
  o.max_log_lines = 3;
  auto ctx = ControlStageContext::create(o);
  ASSERT_TRUE(ctx);
  (*ctx)->log("one\ntwo");
  (*ctx)->log("three");
  (*ctx)->log("four\n");
  EXPECT_EQ((*ctx)->log_lines(), (std::vector<std::string>{"two", "three", "four"}));
  EXPECT_EQ((*ctx)->dropped_lines(), 1u);
}

TEST_F(StagesTest, ContextDeployForwardsWithTheOperatorOrIsUnsupported) {
  ControlStageContext::Options o;
  o.work_base = (dir_ / "work").string();
  o.operator_name = "ci";
  {
    auto ctx = ControlStageContext::create(o);
    ASSERT_TRUE(ctx);
    auto r = (*ctx)->deploy("web", "1.0", Value::object());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
  }
  o.deploy = [](const std::string& who, const std::string& module, const std::string& version, const Value&) {
    Value v = Value::object();
    v.set("who", who);
    v.set("what", module + "@" + version);
    return sdk::Result<Value>(v);
  };
  auto ctx = ControlStageContext::create(o);
  ASSERT_TRUE(ctx);
  auto r = (*ctx)->deploy("web", "1.4.2", Value::object());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_string("who"), "ci");
  EXPECT_EQ(r->get_string("what"), "web@1.4.2");
}

}  // namespace
}  // namespace mesh::control
