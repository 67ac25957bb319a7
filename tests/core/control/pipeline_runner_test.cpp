// The pipeline runner in-process, with the real sqlite store and the real build and deploy stage
// code (registered, not loaded) and a fake deploy: stages in order, the record written as they
// run, a failed stage stops the run, a deploy's report and its JUnit rendering kept as artifacts,
// an interrupted run marked failed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>

#include "build_stage.h"
#include "deploy_stage.h"
#include "mesh/control/stages.h"
#include "mesh/testing/plugins.h"
#include "mesh/testing/temp_dir.h"
#include "pipeline_runner.h"

namespace {

namespace fs = std::filesystem;
using mesh::control::StageRegistry;
using mesh::control::detail::PipelineRunner;
using mesh::sdk::ErrorCode;
using mesh::sdk::Value;

struct RunnerTest : ::testing::Test {
  mesh::testing::TempDir tmp;
  mesh::sdk::NullLogger logger;
  mesh::sdk::HostContext host{};
  mesh::loader::LoadedPlugin store_plugin;
  std::shared_ptr<mesh::sdk::Store> store;
  std::shared_ptr<StageRegistry> stages = std::make_shared<StageRegistry>();
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Value> finished;
  Value deploy_answer;
  std::vector<std::string> deployed;
  std::vector<std::string> checked;  ///< the dry runs of Stage::check
  std::optional<mesh::sdk::Error> check_refusal;

  void SetUp() override {
    host.logger = &logger;
    host.role = "control";
    host.state_dir = (tmp.path() / "build-state").string();
    fs::create_directories(host.state_dir);
    fs::permissions(tmp.path(), fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    auto loaded = mesh::testing::load_plugin("store", "sqlite");
    ASSERT_TRUE(loaded) << loaded.error().describe();
    store_plugin = *loaded;
    store = store_plugin.as<mesh::sdk::Store>();
    ASSERT_TRUE(store);
    Value config = Value::object();
    config.set("path", (tmp.path() / "mesh.db").string());
    ASSERT_TRUE(store->configure(mesh::sdk::apply_defaults(store->config_schema(), config)));
    ASSERT_TRUE(store->open());

    auto build = std::make_shared<mesh::stages::build::BuildStage>(host);
    Value bc = Value::object();
    bc.set("work_root", tmp.path().string());
    ASSERT_TRUE(build->configure(mesh::sdk::apply_defaults(build->config_schema(), bc)));
    ASSERT_TRUE(stages->add("build", build));
    ASSERT_TRUE(stages->add("deploy", std::make_shared<mesh::stages::deploy::DeployStage>(host)));
    fs::create_directories(tmp.path() / "pipelines");
    fs::permissions(tmp.path() / "pipelines", fs::perms(0755));  // pipeline files no one else may write
  }

  std::unique_ptr<PipelineRunner> runner() {
    PipelineRunner::Options o;
    o.dir = (tmp.path() / "pipelines").string();
    o.build_user = ::geteuid() == 0 ? "nobody" : "";
    o.work_base = (tmp.path() / "work").string();
    o.stages = stages;
    o.report_plugin_dirs = {mesh::testing::plugin_dir()};
    o.deploy = [this](const std::string& who, const std::string& module, const std::string& version,
                      const Value& opts, const PipelineRunner::DeployWrittenFn& written) -> mesh::sdk::Result<Value> {
      if (opts.get_bool("dry_run", false)) {
        checked.push_back(who + " " + module + " " + version + (opts.find("wait") ? " wait" : ""));
        if (check_refusal) return mesh::sdk::fail(*check_refusal);
        return deploy_answer;
      }
      deployed.push_back(who + " " + module + " " + version);
      if (written && deploy_answer.is_object() && deploy_answer.find("deploy")) written(deploy_answer);
      return deploy_answer;
    };
    o.on_finished = [this](const Value& record) {
      std::lock_guard lock(mu);
      finished.push_back(record);
      cv.notify_all();
    };
    return std::make_unique<PipelineRunner>(store, std::move(o));
  }

  Value wait_finished(std::size_t n) {
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return finished.size() >= n; }));
    return finished.empty() ? Value::object() : finished.back();
  }

  void pipeline(const std::string& name, const std::string& text) {
    std::ofstream(tmp.path() / "pipelines" / (name + ".toml")) << text;
    fs::permissions(tmp.path() / "pipelines" / (name + ".toml"), fs::perms(0644));
  }
};

Value deploy_report(bool with_failure) {
  Value r = Value::object();
  r.set("deploy", 4);
  r.set("module", "web");
  r.set("version", "1.4.2");
  r.set("declared", 2);
  r.set("delivery", 9);
  Value applied = Value::array();
  Value a = Value::object();
  a.set("node", "web-01");
  a.set("revision", 3);
  a.set("at", "2026-12-01T16:00:00Z");
  applied.as_array().push_back(a);
  r.set("applied", applied);
  Value failed = Value::array();
  if (with_failure) {
    Value f = Value::object();
    f.set("node", "web-02");
    f.set("revision", 3);
    f.set("resource", "package:nginx");
    f.set("reason", "E: 404 Not Found");
    failed.as_array().push_back(f);
  }
  r.set("failed", failed);
  r.set("outstanding", Value::array());
  r.set("skipped", Value::array());
  r.set("waves", Value::array());
  r.set("halted", Value(nullptr));
  return r;
}

TEST_F(RunnerTest, StagesRunInOrderAndTheDeployReportIsKeptWithItsJUnitRendering) {
  deploy_answer = deploy_report(false);
  pipeline("web", "[[stage]]\nplugin = \"build\"\ncommand = [\"/bin/sh\", \"-c\", \"echo v={{version}} > out.txt\"]\n"
                  "artifacts = [\"out.txt\"]\n\n[[stage]]\nplugin = \"deploy\"\nmodule = \"web\"\n");
  auto r = runner();
  auto first = r->start("web", "1.4.2", "ci", 1000);
  ASSERT_TRUE(first) << first.error().describe();
  EXPECT_EQ(first->get_string("state"), "running");
  const Value run = wait_finished(1);
  EXPECT_EQ(run.get_string("state"), "succeeded") << run.to_json();
  ASSERT_EQ(deployed.size(), 1u);
  EXPECT_EQ(deployed[0], "ci web 1.4.2");
  // Checked first, as a dry run with nothing to wait for.
  ASSERT_EQ(checked.size(), 1u);
  EXPECT_EQ(checked[0], "ci web 1.4.2");
  const auto& stages = run.find("stages")->as_array();
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].get_string("state"), "succeeded");
  const Value& art = *stages[1].find("artifacts");
  EXPECT_EQ(art.find("deploy")->get_int("deploy", 0), 4);
  const std::string junit = art.get_string("junit");
  EXPECT_NE(junit.find("<testsuite"), std::string::npos) << art.to_json();
  EXPECT_NE(junit.find("web-01"), std::string::npos) << junit;
  // What show() answers is what was written last.
  auto shown = r->show(static_cast<std::uint64_t>(run.get_int("run", 0)));
  ASSERT_TRUE(shown) << shown.error().describe();
  EXPECT_EQ(shown->get_string("state"), "succeeded");
}

TEST_F(RunnerTest, AFailedDeployFailsItsStageAndKeepsItsJUnitReport) {
  deploy_answer = deploy_report(true);
  pipeline("web", "[[stage]]\nplugin = \"deploy\"\nmodule = \"web\"\n\n[[stage]]\nplugin = \"build\"\n"
                  "command = [\"/usr/bin/touch\", \"x\"]\n");
  auto r = runner();
  ASSERT_TRUE(r->start("web", "1.4.2", "ci", 1000));
  const Value run = wait_finished(1);
  EXPECT_EQ(run.get_string("state"), "failed");
  const auto& stages = run.find("stages")->as_array();
  EXPECT_EQ(stages[0].get_string("state"), "failed");
  EXPECT_NE(stages[0].get_string("error").find("web-02: package:nginx: E: 404 Not Found"), std::string::npos)
      << stages[0].get_string("error");
  const std::string junit = stages[0].find("artifacts")->get_string("junit");
  EXPECT_NE(junit.find("<failure"), std::string::npos) << junit;
  EXPECT_EQ(stages[1].get_string("state"), "not_started");
}

TEST_F(RunnerTest, BadInputWritesNothing) {
  auto r = runner();
  pipeline("typo", "[[stage]]\nplugin = \"deploy\"\nmodul = \"web\"\n");
  auto typo = r->start("typo", "1", "ci", 1000);
  ASSERT_FALSE(typo);
  EXPECT_EQ(typo.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(typo.error().message.find("typo.toml:3: stage[0].modul: unknown key 'modul'"), std::string::npos)
      << typo.error().message;
  auto version = r->start("typo", "1 2", "ci", 1000);
  ASSERT_FALSE(version);
  EXPECT_EQ(version.error().path, "version");
  // A version goes into build commands and file names: never a path, never an option.
  for (const char* bad : {"../../x", "a/b", "-rf", ".hidden"}) {
    auto refused = r->start("typo", bad, "ci", 1000);
    ASSERT_FALSE(refused) << bad;
    EXPECT_EQ(refused.error().code, ErrorCode::InvalidArgument) << bad;
    EXPECT_EQ(refused.error().path, "version") << bad;
    EXPECT_NE(refused.error().message.find("is not a version"), std::string::npos) << refused.error().message;
  }
  auto none = store->records("pipeline_run", "");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

TEST_F(RunnerTest, ARunLeftRunningIsMarkedFailedByRecover) {
  Value v = Value::object();
  v.set("run", 7);
  v.set("state", "running");
  Value s = Value::object();
  s.set("name", "build");
  s.set("state", "running");
  Value stages = Value::array();
  stages.as_array().push_back(s);
  v.set("stages", stages);
  ASSERT_TRUE(store->put_records({mesh::sdk::RecordWrite{"pipeline_run", "000000000007", v.to_json(), 0}}, 1));
  auto r = runner();
  ASSERT_TRUE(r->recover(2000));
  auto shown = r->show(7);
  ASSERT_TRUE(shown) << shown.error().describe();
  EXPECT_EQ(shown->get_string("state"), "failed");
  EXPECT_NE(shown->get_string("error").find("interrupted"), std::string::npos);
  EXPECT_EQ(shown->find("stages")->as_array()[0].get_string("state"), "failed");
}

// A stage's check() refuses the run before anything runs or is written (decision record 72): a
// deploy the control plane would refuse (here: no such module) stops a build → deploy pipeline
// before the build, and a build whose program does not exist is refused the same way.
TEST_F(RunnerTest, AStageThatRefusesInItsCheckStopsTheRunBeforeAnyStageRunsAndNothingIsWritten) {
  check_refusal = mesh::sdk::Error{ErrorCode::NotFound, "no module 'nosuchmod'", "module"};
  pipeline("ship", "[[stage]]\nplugin = \"build\"\ncommand = [\"/usr/bin/touch\", \"built\"]\n"
                   "artifacts = [\"built\"]\n\n[[stage]]\nplugin = \"deploy\"\nmodule = \"nosuchmod\"\nwait = \"1m\"\n");
  auto r = runner();
  auto refused = r->start("ship", "2.0", "ci", 1000);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::NotFound);
  EXPECT_NE(refused.error().message.find("ship.toml: stage[1] 'deploy' refuses the run before any stage started: "
                                         "module: no module 'nosuchmod'"),
            std::string::npos)
      << refused.error().message;
  ASSERT_EQ(checked.size(), 1u);
  EXPECT_EQ(checked[0], "ci nosuchmod 2.0") << "a check is a dry run without a wait";
  EXPECT_TRUE(deployed.empty());
  EXPECT_FALSE(fs::exists(fs::path(host.state_dir) / "artifacts")) << "the build must not have run";
  auto none = store->records("pipeline_run", "");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());

  pipeline("nocmd", "[[stage]]\nplugin = \"build\"\ncommand = [\"no-such-build-tool-xyz\"]\n");
  auto nocmd = r->start("nocmd", "2.0", "ci", 1000);
  ASSERT_FALSE(nocmd);
  EXPECT_NE(nocmd.error().message.find("nocmd.toml: stage[0] 'build' refuses the run"), std::string::npos)
      << nocmd.error().message;
  EXPECT_NE(nocmd.error().message.find("no-such-build-tool-xyz"), std::string::npos) << nocmd.error().message;
  none = store->records("pipeline_run", "");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

}  // namespace
