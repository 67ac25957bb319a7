// The service provider against a real systemd: the built plugin runs inside a systemd sandbox
// (private PID/mount/cgroup namespaces) through service_provider_probe, one operation per process
// (so every read-back comes from a fresh provider with nothing cached), and reaches that systemd
// exactly as on a host: over /run/systemd/private. Each test process boots its own sandbox.
//
// Why a probe rather than the provider in this process: systemd's private socket refuses a client
// from outside its PID namespace (the connection is closed: "Broken pipe"), and the whole gtest
// binary inside nsenter would have to boot its own sandbox from inside.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <string>
#include <thread>

#include "systemd_sandbox.h"

namespace mesh::testing {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

struct ProbeResult {
  int exit_code = -1;
  json::object out;  ///< the probe's JSON answer
  std::string raw;
  std::string err;   ///< the probe's stderr (provider log lines)

  bool ok() const { return out.contains("ok") && out.at("ok").as_bool(); }
  std::string code() const {
    return out.contains("error") ? std::string(out.at("error").at("code").as_string()) : "";
  }
  std::string message() const {
    return out.contains("error") ? std::string(out.at("error").at("message").as_string()) : "";
  }
  std::string path() const {
    return out.contains("error") ? std::string(out.at("error").at("path").as_string()) : "";
  }
  const json::value& get(const char* key) const { return out.at(key); }
  std::int64_t elapsed_ms() const { return out.at("elapsed_ms").as_int64(); }
};

::testing::AssertionResult has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << part << "' not in: " << text;
}

class ServiceProviderSystemTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    SystemdSandboxOptions options;
    options.name = "mesh-service";
    options.keep_paths = {MESH_TEST_BUILD_DIR};  // the probe and the plugin, when under /tmp
    sandbox_ = new SystemdSandbox(options);
    const auto unit = [](const std::string& name, const std::string& service,
                         bool install = true) {
      sandbox_->write_unit(
          name + ".service",
          "[Unit]\nDescription=Nox Mesh test " + name + "\nDefaultDependencies=no\n\n[Service]\n" +
              service + "StandardOutput=append:" + sandbox_->dir() + "/" + name + ".log\n" +
              (install ? "\n[Install]\nWantedBy=" + sandbox_->target() + "\n" : ""));
    };
    for (const char* name : {"ok-start", "ok-stop", "ok-remove", "ok-restart", "ok-prune"})
      unit(name, "ExecStart=/bin/sleep infinity\n");
    unit("exit3", "ExecStart=/bin/sh -c 'echo \"exit3: config file missing\"; exit 3'\n");
    unit("dies",
         "ExecStart=/bin/sh -c 'echo \"dies: up\"; sleep 0.5; echo \"dies: lost the database\"; "
         "exit 1'\n");
    unit("notready", "Type=notify\nExecStart=/bin/sleep infinity\n");
    unit("flapping", "Restart=always\nRestartSec=100ms\nExecStart=/bin/sh -c 'sleep 0.3; exit 1'\n");
    unit("oneshot", "Type=oneshot\nExecStart=/bin/true\n");
    unit("static", "ExecStart=/bin/sleep infinity\n", false);
    started_ = sandbox_->start();
  }

  static void TearDownTestSuite() {
    delete sandbox_;
    sandbox_ = nullptr;
  }

  void SetUp() override {
    if (!started_) GTEST_SKIP() << sandbox_->skipped_reason();
  }

  // Runs the probe inside the sandbox: OP UNIT [PROPERTIES_JSON] [--restart].
  static ProbeResult probe(const std::string& op, const std::string& unit,
                           const std::string& properties = "", bool restart = false) {
    std::vector<std::string> argv = {MESH_TEST_SERVICE_PROBE, op, unit};
    if (!properties.empty()) argv.push_back(properties);
    if (restart) argv.push_back("--restart");
    auto run = sandbox_->run(argv, std::chrono::seconds(60));
    ProbeResult r;
    r.exit_code = run.exit_code;
    r.raw = run.out;
    r.err = run.err;
    try {
      r.out = json::parse(run.out).as_object();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "probe printed no JSON (exit " << run.exit_code << "): " << run.out << "\n"
                    << run.err;
    }
    return r;
  }

  static std::string wants_link(const std::string& unit) {
    return sandbox_->unit_dir() + "/" + sandbox_->target() + ".wants/" + unit;
  }

  static SystemdSandbox* sandbox_;
  static bool started_;
};

SystemdSandbox* ServiceProviderSystemTest::sandbox_ = nullptr;
bool ServiceProviderSystemTest::started_ = false;

TEST_F(ServiceProviderSystemTest, StartsAndEnablesAUnitAndReadsItBack) {
  auto first = probe("apply", "ok-start.service",
                     R"({"running":true,"enabled":true,"settle":"500ms"})");
  ASSERT_TRUE(first.ok()) << first.raw << first.err;
  EXPECT_EQ(first.exit_code, 0);
  const auto& plan = first.get("plan").as_object();
  EXPECT_EQ(plan.at("action").as_string(), "update");
  EXPECT_EQ(plan.at("changes").as_array().size(), 2u);
  const auto& state = first.get("state").as_object();
  EXPECT_EQ(state.at("running"), json::value(true));
  EXPECT_EQ(state.at("enabled"), json::value(true));
  EXPECT_EQ(state.at("active_state").as_string(), "active");
  EXPECT_EQ(state.at("sub_state").as_string(), "running");
  EXPECT_GT(state.at("main_pid").as_int64(), 1);
  // Read back by the same process after apply: matches, and the plan is empty.
  EXPECT_EQ(first.get("read_back"), first.get("state"));
  EXPECT_EQ(first.get("read_back_plan").at("action").as_string(), "none");
  // The settle window was waited for, not skipped.
  EXPECT_GE(first.elapsed_ms(), 500);
  // Enabling wrote into the sandbox's unit folder, never the host's /etc/systemd/system.
  EXPECT_TRUE(fs::is_symlink(wants_link("ok-start.service")));
  EXPECT_FALSE(fs::exists("/etc/systemd/system/" + sandbox_->target() + ".wants"));
  EXPECT_EQ(sandbox_->systemctl({"is-enabled", "ok-start.service"}).out, "enabled\n");

  // A fresh provider (a new process) plans nothing and changes nothing.
  auto again = probe("apply", "ok-start.service",
                     R"({"running":true,"enabled":true,"settle":"500ms"})");
  ASSERT_TRUE(again.ok()) << again.raw;
  EXPECT_EQ(again.get("plan").at("action").as_string(), "none");
  EXPECT_FALSE(again.out.contains("state")) << "an empty plan was applied";
  EXPECT_EQ(again.get("read_back").at("main_pid"), state.at("main_pid"));
  EXPECT_EQ(again.get("read_back_plan").at("action").as_string(), "none");
}

TEST_F(ServiceProviderSystemTest, StopsAndDisables) {
  ASSERT_TRUE(probe("apply", "ok-stop.service", R"({"running":true,"enabled":true,"settle":"0ms"})").ok());
  ASSERT_TRUE(fs::is_symlink(wants_link("ok-stop.service")));
  auto r = probe("apply", "ok-stop.service", R"({"running":false,"enabled":false})");
  ASSERT_TRUE(r.ok()) << r.raw << r.err;
  const auto& state = r.get("state").as_object();
  EXPECT_EQ(state.at("running"), json::value(false));
  EXPECT_EQ(state.at("enabled"), json::value(false));
  EXPECT_EQ(state.at("active_state").as_string(), "inactive");
  EXPECT_EQ(state.at("unit_file_state").as_string(), "disabled");
  EXPECT_EQ(r.get("read_back_plan").at("action").as_string(), "none");
  EXPECT_FALSE(fs::exists(wants_link("ok-stop.service")));
  EXPECT_EQ(sandbox_->systemctl({"is-active", "ok-stop.service"}).out, "inactive\n");
}

TEST_F(ServiceProviderSystemTest, RemoveTwiceSucceeds) {
  ASSERT_TRUE(probe("apply", "ok-remove.service", R"({"running":true,"enabled":true,"settle":"0ms"})").ok());
  auto first = probe("remove", "ok-remove.service");
  ASSERT_TRUE(first.ok()) << first.raw << first.err;
  auto second = probe("remove", "ok-remove.service");
  ASSERT_TRUE(second.ok()) << second.raw << second.err;
  // Stopped and disabled; the unit file stays (it belongs to whoever installed it).
  auto read = probe("read", "ok-remove.service");
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read.get("state").at("running"), json::value(false));
  EXPECT_EQ(read.get("state").at("enabled"), json::value(false));
  EXPECT_FALSE(fs::exists(wants_link("ok-remove.service")));
  auto plan = probe("plan", "ok-remove.service", R"({"running":true})");
  EXPECT_EQ(plan.get("plan").at("action").as_string(), "update");
  // A unit that does not exist: removed already.
  EXPECT_TRUE(probe("remove", "missing.service").ok());
  EXPECT_TRUE(probe("remove", "missing.service").ok());
}

TEST_F(ServiceProviderSystemTest, UnitThatExitsAtOnceFailsWithResultStatusAndLog) {
  auto r = probe("apply", "exit3.service", R"({"running":true})");
  ASSERT_FALSE(r.ok()) << r.raw;
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.get("stage").as_string(), "apply");
  EXPECT_EQ(r.code(), "failed");
  EXPECT_TRUE(has(r.message(), "service:exit3.service"));
  EXPECT_TRUE(has(r.message(), "result=exit-code status=3"));
  // No journald in the sandbox: the lines come from StandardOutput=append:FILE.
  EXPECT_TRUE(has(r.message(), "exit3: config file missing"));
  auto read = probe("read", "exit3.service");
  EXPECT_EQ(read.get("state").at("running"), json::value(false));
  EXPECT_EQ(read.get("state").at("active_state").as_string(), "failed");
  EXPECT_EQ(read.get("state").at("result").as_string(), "exit-code");
}

TEST_F(ServiceProviderSystemTest, UnitThatDiesWithinTheSettleWindowFails) {
  // Type=simple: systemd calls it started the moment it forks; it dies 0.5 s later.
  auto r = probe("apply", "dies.service", R"({"running":true,"settle":"3s"})");
  ASSERT_FALSE(r.ok()) << r.raw;
  EXPECT_EQ(r.code(), "failed");
  EXPECT_TRUE(has(r.message(), "did not stay active"));
  EXPECT_TRUE(has(r.message(), "of the 3s settle window"));
  EXPECT_TRUE(has(r.message(), "result=exit-code status=1"));
  EXPECT_TRUE(has(r.message(), "dies: lost the database"));
  // Reported as soon as it left active, not at the end of the window.
  EXPECT_GE(r.elapsed_ms(), 400);
  EXPECT_LT(r.elapsed_ms(), 2500);
}

TEST_F(ServiceProviderSystemTest, UnitThatNeverBecomesReadyTimesOut) {
  // Type=notify without READY=1: activating until the 2 s timeout, then stopped.
  auto r = probe("apply", "notready.service", R"({"running":true,"timeout":"2s"})");
  ASSERT_FALSE(r.ok()) << r.raw;
  EXPECT_EQ(r.code(), "timeout");
  EXPECT_TRUE(has(r.message(), "did not become active within 2s"));
  EXPECT_TRUE(has(r.message(), "active_state=activating sub_state=start"));
  EXPECT_TRUE(has(r.message(), "the unit was stopped"));
  EXPECT_GE(r.elapsed_ms(), 2000);
  EXPECT_LT(r.elapsed_ms(), 10000);
  auto read = probe("read", "notready.service");
  EXPECT_EQ(read.get("state").at("running"), json::value(false));
  EXPECT_NE(read.get("state").at("active_state").as_string(), "activating");
}

TEST_F(ServiceProviderSystemTest, RestartingUnitFailsAndIsStopped) {
  // Restart=always: it keeps coming back, so "active" at some instant proves nothing.
  auto r = probe("apply", "flapping.service", R"({"running":true,"settle":"2s"})");
  ASSERT_FALSE(r.ok()) << r.raw;
  EXPECT_EQ(r.code(), "failed");
  // Seen between two runs (auto-restart: the failed run's result and status), or, when a poll
  // falls on the next run, as a new invocation.
  EXPECT_TRUE(r.message().find("sub_state=auto-restart result=exit-code status=1") !=
                  std::string::npos ||
              r.message().find("restarted within") != std::string::npos)
      << r.message();
  EXPECT_TRUE(has(r.message(), "the unit was stopped"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto read = probe("read", "flapping.service");
  EXPECT_EQ(read.get("state").at("running"), json::value(false));
  EXPECT_TRUE(read.get("state").at("active_state") == json::value("inactive") ||
              read.get("state").at("active_state") == json::value("failed"))
      << read.raw;
}

TEST_F(ServiceProviderSystemTest, OneshotWithoutRemainAfterExitIsNotRunning) {
  auto r = probe("apply", "oneshot.service", R"({"running":true})");
  ASSERT_FALSE(r.ok()) << r.raw;
  EXPECT_EQ(r.code(), "failed");
  EXPECT_TRUE(has(r.message(), "active_state=inactive sub_state=dead result=success"));
  EXPECT_TRUE(has(r.message(), "RemainAfterExit=yes"));
}

TEST_F(ServiceProviderSystemTest, StaticUnitHasNoEnabledState) {
  auto read = probe("read", "static.service");
  ASSERT_TRUE(read.ok()) << read.raw;
  EXPECT_TRUE(read.get("state").at("enabled").is_null());
  EXPECT_EQ(read.get("state").at("unit_file_state").as_string(), "static");
  auto enable = probe("apply", "static.service", R"({"enabled":true})");
  ASSERT_FALSE(enable.ok());
  EXPECT_EQ(enable.code(), "failed");
  EXPECT_TRUE(has(enable.message(), "no [Install] section"));
  auto disable = probe("apply", "static.service", R"({"enabled":false})");
  ASSERT_FALSE(disable.ok());
  EXPECT_TRUE(has(disable.message(), "cannot be disabled"));
  // Running is managed all the same.
  auto run = probe("apply", "static.service", R"({"running":true,"settle":"200ms"})");
  ASSERT_TRUE(run.ok()) << run.raw;
  EXPECT_EQ(run.get("read_back_plan").at("action").as_string(), "none");
}

TEST_F(ServiceProviderSystemTest, MissingUnitReadsAbsentAndCannotStart) {
  auto read = probe("read", "missing.service");
  ASSERT_TRUE(read.ok()) << read.raw;
  EXPECT_TRUE(read.get("state").is_null());
  auto plan = probe("plan", "missing.service", R"({"running":true})");
  EXPECT_EQ(plan.get("plan").at("action").as_string(), "create");
  auto apply = probe("apply", "missing.service", R"({"running":true})");
  ASSERT_FALSE(apply.ok());
  EXPECT_EQ(apply.code(), "failed");
  EXPECT_TRUE(has(apply.message(), "not found"));
  auto stopped = probe("apply", "missing.service", R"({"running":false,"enabled":false})");
  ASSERT_TRUE(stopped.ok()) << stopped.raw;
  EXPECT_EQ(stopped.get("plan").at("action").as_string(), "none");
}

TEST_F(ServiceProviderSystemTest, RestartChangeRestartsTheUnit) {
  auto up = probe("apply", "ok-restart.service", R"({"running":true,"settle":"300ms"})");
  ASSERT_TRUE(up.ok()) << up.raw;
  const auto pid_before = up.get("state").at("main_pid").as_int64();
  // What the engine sends when a restart_on resource changed: the plan plus Change{"restart"}.
  auto restarted = probe("apply", "ok-restart.service",
                         R"({"running":true,"settle":"300ms","restart_on":["file:/etc/demo.conf"]})",
                         true);
  ASSERT_TRUE(restarted.ok()) << restarted.raw << restarted.err;
  const auto& changes = restarted.get("plan").at("changes").as_array();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].at("path").as_string(), "restart");
  const auto pid_after = restarted.get("state").at("main_pid").as_int64();
  EXPECT_GT(pid_after, 1);
  EXPECT_NE(pid_after, pid_before) << "MainPID unchanged: not restarted";
  EXPECT_TRUE(has(restarted.err, "action=RestartUnit outcome=active"));
  EXPECT_EQ(restarted.get("read_back_plan").at("action").as_string(), "none");
  // `running` undeclared: a running unit is restarted (TryRestartUnit) ...
  auto try_restart = probe("apply", "ok-restart.service", R"({"settle":"300ms"})", true);
  ASSERT_TRUE(try_restart.ok()) << try_restart.raw;
  EXPECT_NE(try_restart.get("state").at("main_pid").as_int64(), pid_after);
  EXPECT_TRUE(has(try_restart.err, "action=TryRestartUnit outcome=active"));
  // ... and a stopped one is left stopped.
  ASSERT_TRUE(probe("apply", "ok-restart.service", R"({"running":false})").ok());
  auto skipped = probe("apply", "ok-restart.service", R"({"settle":"300ms"})", true);
  ASSERT_TRUE(skipped.ok()) << skipped.raw;
  EXPECT_EQ(skipped.get("state").at("running"), json::value(false));
  EXPECT_TRUE(has(skipped.err, "action=restart skipped: not running"));
}

// #12.1: a service is pruned through the real engine (`mesh-host apply`): declared and applied,
// then a declaration without it. The provider's removal is Release: the unit is stopped and
// disabled, its unit file stays (it belongs to whoever installed it), and the engine's read-back
// checks what the provider says it left instead of demanding that nothing reads back. Under ABI 1
// the second apply failed "read-back does not match: still present after removal", and so did
// every later one.
TEST_F(ServiceProviderSystemTest, APrunedServiceIsReleasedAndItsUnitFileStays) {
  const std::string dir = sandbox_->dir() + "/prune";
  fs::create_directories(dir);
  const auto write = [&](const std::string& name, const std::string& text) {
    const std::string path = dir + "/" + name;
    std::FILE* f = std::fopen(path.c_str(), "w");
    EXPECT_NE(f, nullptr) << path;
    if (f) {
      std::fputs(text.c_str(), f);
      std::fclose(f);
    }
    return path;
  };
  const std::string with = write("with.json", R"({"resources": [{"type": "service", "id": "ok-prune.service",
      "properties": {"running": true, "enabled": true, "settle": "300ms"}}]})");
  const std::string without = write("without.json", R"({"resources": []})");
  const auto apply = [&](const std::string& decl) {
    return sandbox_->run({std::string(MESH_TEST_BIN_DIR) + "/mesh-host", "apply", decl, "--state-dir", dir + "/state",
                          "--plugin-dir", MESH_TEST_PLUGIN_DIR, "--load", "service"},
                         std::chrono::seconds(90));
  };

  auto first = apply(with);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_TRUE(has(first.out + first.err, "service:ok-prune.service")) << first.out;
  ASSERT_TRUE(fs::exists(wants_link("ok-prune.service")));
  auto up = probe("read", "ok-prune.service");
  ASSERT_TRUE(up.ok()) << up.raw;
  EXPECT_EQ(up.get("state").at("active_state").as_string(), "active");

  auto pruned = apply(without);
  ASSERT_EQ(pruned.exit_code, 0) << pruned.out << pruned.err;
  EXPECT_TRUE(has(pruned.out, "removed")) << pruned.out;
  EXPECT_FALSE(has(pruned.out + pruned.err, "still present after removal").operator bool());
  // Released as the provider defines it: stopped, disabled, unit file in place.
  EXPECT_TRUE(fs::exists(sandbox_->unit_dir() + "/ok-prune.service"));
  EXPECT_FALSE(fs::exists(wants_link("ok-prune.service")));
  auto down = probe("read", "ok-prune.service");
  ASSERT_TRUE(down.ok()) << down.raw;
  EXPECT_FALSE(down.get("state").is_null()) << "the unit still exists";
  EXPECT_EQ(down.get("state").at("running").as_bool(), false);
  EXPECT_EQ(down.get("state").at("enabled").as_bool(), false);

  // No longer owned: the same declaration again has nothing to prune, and succeeds.
  auto again = apply(without);
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_FALSE(has(again.out, "ok-prune.service").operator bool()) << again.out;
}

TEST_F(ServiceProviderSystemTest, BadPropertiesAreRefusedWithPaths) {
  struct Case {
    const char* unit;
    const char* properties;
    const char* path;
  };
  for (const auto& c : {Case{"ok-start.service", R"({"colour":"red"})", "properties.colour"},
                        Case{"etc/passwd", R"({"running":true})", "id"},
                        Case{"nginx", R"({})", "id"},
                        Case{"ok-start.service", R"({"restart_on":["nginx"]})",
                             "properties.restart_on[0]"},
                        Case{"ok-start.service", R"({"settle":"soon"})", "properties.settle"},
                        Case{"ok-start.service", R"({"running":"yes"})", "properties.running"}}) {
    auto r = probe("apply", c.unit, c.properties);
    ASSERT_FALSE(r.ok()) << c.unit << " " << c.properties << ": " << r.raw;
    EXPECT_EQ(r.get("stage").as_string(), "validate") << r.raw;
    EXPECT_EQ(r.code(), "invalid_argument") << r.raw;
    EXPECT_EQ(r.path(), c.path) << r.raw;
  }
}

}  // namespace
}  // namespace mesh::testing
