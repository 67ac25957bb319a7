// The service provider's pure logic: unit names, durations, property rules, the read-back state,
// plans, failure wording, and the log-line helpers. No systemd needed.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "service_rules.h"
#include "unit_logs.h"

namespace mesh::plugins::service::test {
namespace {

using namespace std::chrono_literals;
using sdk::Value;

sdk::Resource resource(const std::string& id,
                       std::initializer_list<std::pair<std::string, Value>> props = {}) {
  sdk::Resource r;
  r.rid = {"service", id};
  for (const auto& [k, v] : props) r.properties.set(k, v);
  return r;
}

TEST(ServiceProviderRulesTest, AcceptsUnitNames) {
  for (const std::string name :
       {"nginx.service", "getty@tty1.service", "foo-bar_baz.socket", "a.timer", "x.target",
        "p.path", "mnt-data.mount", "a:b.service", "dev-disk-by\\x2dlabel.mount",
        "systemd-fsck@dev-disk.service", "with.dots.in.name.service"}) {
    EXPECT_EQ(unit_name_problem(name), std::nullopt) << name;
  }
  EXPECT_EQ(unit_name_problem(std::string(247, 'a') + ".service"), std::nullopt);  // 255 bytes
}

TEST(ServiceProviderRulesTest, RefusesBadUnitNames) {
  std::string nul = "a";
  nul.push_back('\0');
  nul += "b.service";
  for (const std::string& name :
       {std::string(), std::string("nginx"), std::string("nginx.conf"),
        std::string("/etc/systemd/system/x.service"), std::string("a/b.service"), nul,
        std::string(".service"), std::string("getty@.service"), std::string("a b.service"),
        std::string(248, 'a') + ".service", std::string("@x.service"),
        std::string("x.slice"), std::string("x.scope"), std::string("x.device"),
        std::string("caf\xc3\xa9.service"), std::string("x.service.bak")}) {
    EXPECT_NE(unit_name_problem(name), std::nullopt) << "accepted: " << name;
  }
  EXPECT_NE(unit_name_problem("a/b.service")->find("contains '/'"), std::string::npos);
  EXPECT_NE(unit_name_problem("getty@.service")->find("template"), std::string::npos);
  EXPECT_NE(unit_name_problem("nginx")->find("does not end in .service"), std::string::npos);
}

TEST(ServiceProviderRulesTest, TypeInterfaces) {
  EXPECT_EQ(type_interface("a.service"), "org.freedesktop.systemd1.Service");
  EXPECT_EQ(type_interface("a.socket"), "org.freedesktop.systemd1.Socket");
  EXPECT_EQ(type_interface("a.timer"), "org.freedesktop.systemd1.Timer");
  EXPECT_EQ(type_interface("a.path"), "org.freedesktop.systemd1.Path");
  EXPECT_EQ(type_interface("a.mount"), "org.freedesktop.systemd1.Mount");
  EXPECT_EQ(type_interface("a.target"), "");
}

TEST(ServiceProviderRulesTest, ParsesDurations) {
  EXPECT_EQ(*parse_duration("500ms"), 500ms);
  EXPECT_EQ(*parse_duration("2s"), 2s);
  EXPECT_EQ(*parse_duration("90s"), 90s);
  EXPECT_EQ(*parse_duration("2m"), 2min);
  EXPECT_EQ(*parse_duration("1h"), 1h);
  EXPECT_EQ(*parse_duration("1d"), 24h);
  EXPECT_EQ(*parse_duration("0s"), 0ms);
  for (const char* bad : {"", "s", "2", "2 s", "-1s", "1.5s", "2sec", "1234567890123s", "2S"}) {
    auto d = parse_duration(bad);
    ASSERT_FALSE(d) << bad;
    EXPECT_EQ(d.error().code, sdk::ErrorCode::InvalidArgument);
    EXPECT_NE(d.error().message.find("is not a duration"), std::string::npos);
  }
  EXPECT_EQ(format_duration(1500ms), "1500ms");
  EXPECT_EQ(format_duration(2000ms), "2s");
  EXPECT_EQ(format_duration(90s), "90s");
  EXPECT_EQ(format_duration(120s), "2m");
  EXPECT_EQ(format_duration(0ms), "0ms");
}

TEST(ServiceProviderRulesTest, BoundsSettleAndTimeout) {
  EXPECT_EQ(*parse_settle("0ms", "p"), 0ms);
  EXPECT_EQ(*parse_settle("1h", "p"), 1h);
  auto long_settle = parse_settle("2h", "properties.settle");
  ASSERT_FALSE(long_settle);
  EXPECT_EQ(long_settle.error().path, "properties.settle");
  EXPECT_EQ(*parse_timeout("100ms", "p"), 100ms);
  EXPECT_FALSE(parse_timeout("50ms", "p"));
  EXPECT_FALSE(parse_timeout("0s", "p"));
  EXPECT_FALSE(parse_timeout("2d", "p"));
  auto bad = parse_timeout("soon", "properties.timeout");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().path, "properties.timeout");
}

void expect_refused(const sdk::Resource& r, const std::string& path) {
  auto ok = validate_resource(r);
  ASSERT_FALSE(ok) << r.rid.str() << " " << r.properties.to_json();
  EXPECT_EQ(ok.error().code, sdk::ErrorCode::InvalidArgument);
  EXPECT_EQ(ok.error().path, path) << ok.error().describe();
  EXPECT_FALSE(ok.error().message.empty());
}

TEST(ServiceProviderRulesTest, ValidatesResources) {
  EXPECT_TRUE(validate_resource(resource("nginx.service")));
  EXPECT_TRUE(validate_resource(resource(
      "nginx.service",
      {{"running", true},
       {"enabled", false},
       {"settle", "500ms"},
       {"timeout", "5m"},
       {"restart_on", Value(Value::Array{"file:/etc/nginx/nginx.conf", "package:nginx",
                                          "service:other.service"})}})));
  expect_refused(resource("nginx"), "id");
  expect_refused(resource("a/b.service"), "id");
  expect_refused(resource("x.service", {{"settle", "fast"}}), "properties.settle");
  expect_refused(resource("x.service", {{"settle", "2h"}}), "properties.settle");
  expect_refused(resource("x.service", {{"timeout", "0s"}}), "properties.timeout");
  expect_refused(resource("x.service", {{"running", "yes"}}), "properties.running");
  expect_refused(resource("x.service", {{"restart_on", "file:/x"}}), "properties.restart_on");
  expect_refused(resource("x.service", {{"restart_on", Value(Value::Array{"nocolon"})}}),
                 "properties.restart_on[0]");
  expect_refused(resource("x.service", {{"restart_on", Value(Value::Array{"file:/x", ":x"})}}),
                 "properties.restart_on[1]");
  expect_refused(resource("x.service", {{"restart_on", Value(Value::Array{"file:"})}}),
                 "properties.restart_on[0]");
  expect_refused(resource("x.service", {{"restart_on", Value(Value::Array{"File:/x"})}}),
                 "properties.restart_on[0]");
  expect_refused(resource("x.service", {{"restart_on", Value(Value::Array{1})}}),
                 "properties.restart_on[0]");
  expect_refused(
      resource("x.service", {{"restart_on", Value(Value::Array{"service:x.service"})}}),
      "properties.restart_on[0]");
}

TEST(ServiceProviderRulesTest, EnabledFromUnitFileState) {
  EXPECT_EQ(enabled_from("enabled"), true);
  EXPECT_EQ(enabled_from("enabled-runtime"), true);
  EXPECT_EQ(enabled_from("disabled"), false);
  EXPECT_EQ(enabled_from("masked"), false);
  EXPECT_EQ(enabled_from("masked-runtime"), false);
  for (const char* na : {"static", "indirect", "generated", "transient", "alias", "linked",
                         "linked-runtime", "bad", ""})
    EXPECT_EQ(enabled_from(na), std::nullopt) << na;
}

UnitStatus running_status() {
  UnitStatus s;
  s.load_state = "loaded";
  s.active_state = "active";
  s.sub_state = "running";
  s.result = "success";
  s.unit_file_state = "enabled";
  s.main_pid = 42;
  return s;
}

TEST(ServiceProviderRulesTest, StateFromStatus) {
  auto state = state_from("a.service", running_status());
  EXPECT_EQ(state.properties.to_json(),
            R"({"running":true,"enabled":true,"active_state":"active","sub_state":"running",)"
            R"("result":"success","load_state":"loaded","unit_file_state":"enabled","main_pid":42})");
  UnitStatus s = running_status();
  s.active_state = "activating";
  s.unit_file_state = "static";
  auto target = state_from("a.target", s);
  EXPECT_EQ(target.properties.get_bool("running", true), false);
  ASSERT_NE(target.properties.find("enabled"), nullptr);
  EXPECT_TRUE(target.properties.find("enabled")->is_null());
  EXPECT_EQ(target.properties.find("main_pid"), nullptr);
}

TEST(ServiceProviderRulesTest, PlansAgainstObservedState) {
  const auto observed = state_from("a.service", running_status());
  // In the declared state.
  auto none = make_plan(resource("a.service", {{"running", true}, {"enabled", true}}), observed);
  EXPECT_EQ(none.action, sdk::PlanAction::None);
  EXPECT_TRUE(none.changes.empty());
  EXPECT_EQ(none.rid.str(), "service:a.service");
  EXPECT_EQ(none.desired.rid.str(), "service:a.service");
  // Undeclared properties are not managed; settle/timeout/restart_on are never compared.
  EXPECT_TRUE(make_plan(resource("a.service", {{"settle", "9s"},
                                               {"restart_on", Value(Value::Array{"file:/x"})}}),
                        observed)
                  .empty());
  auto stop = make_plan(resource("a.service", {{"running", false}}), observed);
  EXPECT_EQ(stop.action, sdk::PlanAction::Update);
  ASSERT_EQ(stop.changes.size(), 1u);
  EXPECT_EQ(stop.changes[0].path, "properties.running");
  EXPECT_EQ(stop.changes[0].observed, Value(true));
  EXPECT_EQ(stop.changes[0].declared, Value(false));
  auto both = make_plan(resource("a.service", {{"running", false}, {"enabled", false}}), observed);
  ASSERT_EQ(both.changes.size(), 2u);
  EXPECT_EQ(both.changes[0].path, "properties.enabled");  // enable/disable is applied first
  // A static unit declared enabled: a change (apply then explains why it cannot).
  UnitStatus st = running_status();
  st.unit_file_state = "static";
  auto static_plan = make_plan(resource("a.service", {{"enabled", true}}), state_from("a.service", st));
  ASSERT_EQ(static_plan.changes.size(), 1u);
  EXPECT_TRUE(static_plan.changes[0].observed.is_null());
}

TEST(ServiceProviderRulesTest, PlansForAMissingUnit) {
  auto create = make_plan(resource("gone.service", {{"running", true}, {"enabled", false}}),
                          std::nullopt);
  EXPECT_EQ(create.action, sdk::PlanAction::Create);
  ASSERT_EQ(create.changes.size(), 1u);
  EXPECT_EQ(create.changes[0].path, "properties.running");
  EXPECT_TRUE(create.changes[0].observed.is_null());
  // Missing is stopped and not enabled: declaring exactly that needs nothing.
  EXPECT_TRUE(make_plan(resource("gone.service", {{"running", false}, {"enabled", false}}),
                        std::nullopt)
                  .empty());
  EXPECT_TRUE(make_plan(resource("gone.service"), std::nullopt).empty());
}

TEST(ServiceProviderRulesTest, DescribesStatus) {
  UnitStatus s;
  s.load_state = "loaded";
  s.active_state = "failed";
  s.sub_state = "failed";
  s.result = "exit-code";
  s.exec_main_code = CLD_EXITED;
  s.exec_main_status = 3;
  EXPECT_EQ(describe_status("a.service", s),
            "active_state=failed sub_state=failed result=exit-code status=3");
  s.result = "signal";
  s.exec_main_code = CLD_KILLED;
  s.exec_main_status = SIGKILL;
  EXPECT_EQ(describe_status("a.service", s),
            "active_state=failed sub_state=failed result=signal signal=SIGKILL");
  s.exec_main_code = 0;
  s.load_state = "masked";
  s.result = "";
  EXPECT_EQ(describe_status("a.target", s), "active_state=failed sub_state=failed load_state=masked");
}

TEST(ServiceProviderRulesTest, RecognisesTheRestartChange) {
  sdk::Plan plan;
  EXPECT_FALSE(wants_restart(plan));
  plan.changes.push_back({"properties.running", false, true});
  EXPECT_FALSE(wants_restart(plan));
  plan.changes.push_back({"restart", Value(), Value()});
  EXPECT_TRUE(wants_restart(plan));
}

class ServiceProviderLogsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "mesh-service-logs-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(ServiceProviderLogsTest, FindsTheOutputFile) {
  const auto unit = write("a.service",
                          "[Service]\nExecStart=/bin/true\n# StandardOutput=append:/commented\n"
                          "StandardOutput = append:/var/log/a.log\n");
  EXPECT_EQ(output_file_of({unit}), "/var/log/a.log");
  const auto dropin = write("override.conf", "[Service]\nStandardOutput=file:/var/log/b.log\n");
  EXPECT_EQ(output_file_of({unit, dropin}), "/var/log/b.log");
  const auto reset = write("reset.conf", "[Service]\nStandardOutput=journal\n");
  EXPECT_EQ(output_file_of({unit, reset}), std::nullopt);
  const auto err_only = write("e.service", "[Service]\nStandardError=truncate:/var/log/e.log\n");
  EXPECT_EQ(output_file_of({err_only}), "/var/log/e.log");
  const auto specifier = write("s.service", "[Service]\nStandardOutput=append:/var/log/%n.log\n");
  EXPECT_EQ(output_file_of({specifier}), std::nullopt);
  EXPECT_EQ(output_file_of({dir_ + "/missing.service"}), std::nullopt);
}

TEST_F(ServiceProviderLogsTest, TailsAFile) {
  std::string text;
  for (int i = 1; i <= 30; ++i) text += "line " + std::to_string(i) + "\n";
  const auto path = write("out.log", text + "\n\n");
  auto lines = tail_file(path, 10);
  ASSERT_TRUE(lines);
  ASSERT_EQ(lines->size(), 10u);
  EXPECT_EQ(lines->front(), "line 21");
  EXPECT_EQ(lines->back(), "line 30");
  EXPECT_EQ(tail_file(dir_ + "/none.log", 10), std::nullopt);
  // Big files: only the end is read, and the cut first line is dropped.
  const auto big = write("big.log", std::string(200 * 1024, 'x') + "\nlast\n");
  auto big_lines = tail_file(big, 10);
  ASSERT_TRUE(big_lines);
  ASSERT_EQ(big_lines->size(), 1u);
  EXPECT_EQ(big_lines->front(), "last");
}

TEST_F(ServiceProviderLogsTest, LastLogLinesFallsBackToTheOutputFile) {
  const auto log = write("u.log", "starting\nboom: config missing\n");
  const auto unit = write("u.service", "[Service]\nStandardOutput=append:" + log + "\n");
  // A unit name no journal knows.
  const std::string text = last_log_lines("mesh-test-no-such-unit-4711.service", {unit},
                                          std::chrono::system_clock::now());
  EXPECT_EQ(text, "last log lines (" + log + "): starting | boom: config missing");
  const std::string none = last_log_lines("mesh-test-no-such-unit-4711.service", {},
                                          std::chrono::system_clock::now());
  EXPECT_EQ(none.rfind("no journal available (", 0), 0u) << none;
}

TEST(ServiceProviderProcessTest, RunCapture) {
  EXPECT_EQ(run_capture({"/bin/echo", "hi"}, 5s), "hi\n");
  EXPECT_EQ(run_capture({"/bin/false"}, 5s), std::nullopt);
  EXPECT_EQ(run_capture({"/nonexistent/binary"}, 5s), std::nullopt);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(run_capture({"/bin/sleep", "10"}, 200ms), std::nullopt);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

}  // namespace
}  // namespace mesh::plugins::service::test
