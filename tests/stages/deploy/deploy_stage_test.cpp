// The deploy stage: the module at the run's version through StageContext::deploy with the
// stage's options; a refused, halted or failed deploy fails the stage naming the nodes.
#include <gtest/gtest.h>

#include "deploy_stage.h"

namespace {

using mesh::sdk::ErrorCode;
using mesh::sdk::Value;
using namespace mesh::stages::deploy;

struct FakeContext : mesh::sdk::StageContext {
  Value answer = Value::object();
  std::optional<mesh::sdk::Error> refuse;
  std::string module, version;
  Value options;
  std::vector<std::string> lines;
  Value none = Value::object();
  std::uint64_t run_id() const noexcept override { return 3; }
  std::string operator_name() const override { return "ci"; }
  std::string work_dir() const override { return "/nonexistent"; }
  const Value& artifacts() const override { return none; }
  void log(std::string_view line) override { lines.emplace_back(line); }
  mesh::sdk::Result<Value> deploy(const std::string& m, const std::string& v, const Value& o) override {
    module = m;
    version = v;
    options = o;
    if (refuse) return mesh::sdk::fail(*refuse);
    return answer;
  }
};

Value report(const std::string& json_failed, const std::string& json_outstanding, bool halted) {
  Value r = Value::object();
  r.set("deploy", 4);
  r.set("declared", 3);
  Value applied = Value::array();
  Value a = Value::object();
  a.set("node", "web-01");
  applied.as_array().push_back(a);
  r.set("applied", applied);
  Value failed = Value::array();
  if (!json_failed.empty()) {
    Value f = Value::object();
    f.set("node", json_failed);
    f.set("resource", "package:nginx");
    f.set("reason", "404 Not Found");
    failed.as_array().push_back(f);
  }
  r.set("failed", failed);
  Value outstanding = Value::array();
  if (!json_outstanding.empty()) {
    Value o = Value::object();
    o.set("node", json_outstanding);
    outstanding.as_array().push_back(o);
  }
  r.set("outstanding", outstanding);
  r.set("skipped", Value::array());
  if (halted) {
    Value h = Value::object();
    h.set("wave", 1);
    h.set("node", json_failed);
    h.set("reason", "package:nginx: 404 Not Found");
    r.set("halted", h);
  } else {
    r.set("halted", Value(nullptr));
  }
  return r;
}

struct DeployStageTest : ::testing::Test {
  mesh::sdk::NullLogger logger;
  mesh::sdk::HostContext host{};
  std::unique_ptr<DeployStage> stage;
  FakeContext context;
  mesh::sdk::CancelToken cancel;
  void SetUp() override {
    host.logger = &logger;
    host.role = "control";
    stage = std::make_unique<DeployStage>(host);
  }
  mesh::sdk::StageInput input(Value settings) {
    mesh::sdk::StageInput in;
    in.pipeline = "hello";
    in.params = std::move(settings);
    in.params.set("version", "1.4.2");
    in.params.set("build_user", "nobody");
    return in;
  }
};

TEST_F(DeployStageTest, DeploysTheModuleAtTheRunsVersionWithItsOptions) {
  context.answer = report("", "web-03", false);
  Value s = Value::object();
  s.set("module", "web");
  s.set("waves", "1,100%");
  s.set("wait", "1m");
  auto out = stage->run(input(s), context, cancel);
  ASSERT_TRUE(out) << out.error().describe();
  EXPECT_EQ(context.module, "web");
  EXPECT_EQ(context.version, "1.4.2");
  EXPECT_EQ(context.options.get_string("waves"), "1,100%");
  EXPECT_EQ(context.options.get_string("wait"), "1m");
  EXPECT_EQ(context.options.find("module"), nullptr);
  EXPECT_EQ(out->artifacts.find("deploy")->get_int("deploy", 0), 4);
  // Outstanding is not failure (decision record 7) unless asked.
  ASSERT_FALSE(context.lines.empty());
  EXPECT_NE(context.lines.back().find("web-03"), std::string::npos);
}

TEST_F(DeployStageTest, AFailedNodeOrAHaltFailsTheStageNamingIt) {
  context.answer = report("web-02", "", false);
  Value s = Value::object();
  s.set("module", "web");
  auto out = stage->run(input(s), context, cancel);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().code, ErrorCode::Failed);
  EXPECT_NE(out.error().message.find("web-02: package:nginx: 404 Not Found"), std::string::npos) << out.error().message;
  context.answer = report("web-01", "", true);
  out = stage->run(input(s), context, cancel);
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message.find("halted at wave 1"), std::string::npos) << out.error().message;
}

TEST_F(DeployStageTest, OutstandingFailsOnlyWhenAsked) {
  context.answer = report("", "web-04", false);
  Value s = Value::object();
  s.set("module", "web");
  s.set("fail_on_outstanding", true);
  auto out = stage->run(input(s), context, cancel);
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message.find("outstanding 1 — web-04"), std::string::npos) << out.error().message;
}

TEST_F(DeployStageTest, ARefusedDeployIsTheStagesError) {
  context.refuse = mesh::sdk::Error{ErrorCode::NotFound, "module web has no version 1.4.2", "version"};
  Value s = Value::object();
  s.set("module", "web");
  auto out = stage->run(input(s), context, cancel);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().code, ErrorCode::NotFound);
}

TEST_F(DeployStageTest, UnknownSettingsAreRefused) {
  Value s = Value::object();
  s.set("module", "web");
  s.set("wavez", "1");
  auto out = stage->run(input(s), context, cancel);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(out.error().message.find("wavez"), std::string::npos);
  EXPECT_TRUE(context.module.empty());
}

}  // namespace
