// Decision 0076: a provider that declares may_replace_host and replaces the running host's
// program makes the engine run the new program's self-test; a failure reverts and fails the
// apply with the self-test's output, a pass stops the apply for a restart. The "program" is a
// real executable (a shell script) the test writes at the path the engine is told the host runs
// from; the provider's apply replaces it as dpkg would (a new file renamed over it).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "engine_results.h"
#include "mem_provider.h"
#include "mesh/common/fs.h"
#include "mesh/engine/engine.h"

namespace mesh::engine {
namespace {

namespace fs = std::filesystem;
using testing::CaptureLogger;
using testing::outcomes;
using testing::MemProvider;
using testing::TempDir;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class EngineHostUpgradeTest : public ::testing::Test {
 protected:
  EngineHostUpgradeTest() {
    EXPECT_TRUE(registry.add("file", file));
    EXPECT_TRUE(registry.add("package", package));
    package->may_replace_host = true;
    auto sd = StateDir::open(tmp.path() + "/state");
    EXPECT_TRUE(sd);
    state = std::make_unique<StateDir>(std::move(*sd));
    engine = std::make_unique<Engine>(registry, *state, log);
    fs::create_directories(tmp.path() + "/bin");
    install_program(kOld);
    package->objects["/nox-mesh-host"] = sdk::Value::object();
    package->objects["/nox-mesh-host"].set("content", "1.0");
    HostProgram p;
    p.executable = exe;
    p.config = tmp.path() + "/host.toml";
    p.at_start = FileIdentity::of(exe);
    engine->set_host_program(p);
  }

  /// Writes the program as a package manager does: a new file renamed over the old one.
  void install_program(const std::string& script) {
    const std::string next = exe + ".dpkg-new";
    {
      std::ofstream out(next);
      out << script;
    }
    ::chmod(next.c_str(), 0755);
    fs::rename(next, exe);
  }

  /// The package's apply installs `new_program`; a second apply (the revert) the old one again.
  void replace_with(std::string new_program) {
    package->on_apply = [this, new_program](const std::string&) {
      install_program(package->applies == 1 ? new_program : kOld);
    };
  }

  ApplyResult run(const std::string& version, bool dry_run = false) {
    text = R"({"node": "web-01", "revision": 7, "resources": [)"
           R"({"type": "package", "id": "/nox-mesh-host", "properties": {"content": ")" + version + R"("}},)"
           R"({"type": "file", "id": "/etc/after", "properties": {"content": "x"}}]})";
    ParseOptions opts;
    opts.allow_revision = true;
    auto d = parse_declaration(text, registry, opts);
    EXPECT_TRUE(d) << d.error().message;
    return engine->apply(*d, text, cancel, dry_run);
  }

  static constexpr const char* kOld = "#!/bin/sh\necho old program\nexit 0\n";
  TempDir tmp;
  const std::string exe = tmp.path() + "/bin/mesh-host";
  std::shared_ptr<MemProvider> file = std::make_shared<MemProvider>("file");
  std::shared_ptr<MemProvider> package = std::make_shared<MemProvider>("package");
  ProviderRegistry registry;
  std::unique_ptr<StateDir> state;
  CaptureLogger log;
  std::unique_ptr<Engine> engine;
  sdk::CancelToken cancel;
  std::string text;
};

using Strings = std::vector<std::string>;

TEST_F(EngineHostUpgradeTest, APassedSelfTestStopsTheApplyForARestart) {
  ::setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1);  // the child must not inherit it
  const std::string args = tmp.path() + "/args";
  replace_with("#!/bin/sh\necho \"$@\" > " + args + "\necho \"notify=${NOTIFY_SOCKET:-none}\" >> " + args +
               "\necho self-test passed\nexit 0\n");
  auto r = run("2.0");
  ::unsetenv("NOTIFY_SOCKET");
  EXPECT_EQ(r.outcome, "restart") << r.reason;
  EXPECT_EQ(r.replaced_by, "package:/nox-mesh-host");
  EXPECT_EQ(r.self_test_output, "self-test passed");
  EXPECT_EQ(outcomes(r), (Strings{"package:/nox-mesh-host=changed", "file:/etc/after=not_attempted"}));
  EXPECT_EQ(file->applies, 0) << "later resources are the new host's first reconcile";
  EXPECT_EQ(slurp(args), "self-test --config " + tmp.path() + "/host.toml\nnotify=none\n");
  // Not applied yet: the new host applies and reports it; the package is owned at its new state.
  EXPECT_EQ(state->state().applied_revision, 0u);
  EXPECT_NE(state->state().last_outcome, "applied");
  ASSERT_EQ(r.owned, (Strings{"package:/nox-mesh-host"}));
}

TEST_F(EngineHostUpgradeTest, AFailedSelfTestRevertsAndFailsTheApplyWithItsOutput) {
  replace_with("#!/bin/sh\necho 'plugin file /usr/lib/nox-mesh/plugins/x.so does not exist' >&2\nexit 1\n");
  auto r = run("2.0");
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.failed_resource, "package:/nox-mesh-host");
  EXPECT_EQ(r.reason, "self-test of the new host failed: plugin file /usr/lib/nox-mesh/plugins/x.so does not exist "
                      "(exit status 1); reverted to the state before the apply");
  EXPECT_EQ(outcomes(r), (Strings{"package:/nox-mesh-host=failed", "file:/etc/after=not_attempted"}));
  EXPECT_EQ(package->applies, 2) << "the apply, then the revert";
  EXPECT_EQ(package->objects["/nox-mesh-host"].get_string("content"), "1.0") << "the previous version is back";
  EXPECT_EQ(slurp(exe), kOld);
  EXPECT_EQ(file->applies, 0);
  EXPECT_EQ(state->state().last_outcome, "failed");
  EXPECT_TRUE(r.owned.empty()) << "the failed state is not recorded as owned";
}

TEST_F(EngineHostUpgradeTest, ASelfTestThatHangsIsKilledAndFails) {
  HostProgram p;
  p.executable = exe;
  p.config = tmp.path() + "/host.toml";
  p.at_start = FileIdentity::of(exe);
  p.self_test_timeout = std::chrono::milliseconds(300);
  engine->set_host_program(p);
  replace_with("#!/bin/sh\necho starting\nexec sleep 30\n");
  auto r = run("2.0");
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.reason, "self-test of the new host failed: starting (did not finish within 300 ms); reverted to the "
                      "state before the apply");
}

TEST_F(EngineHostUpgradeTest, ARevertThatFailsIsSaid) {
  replace_with("#!/bin/sh\nexit 3\n");
  package->on_apply = [this](const std::string& id) {
    if (package->applies == 1) return install_program("#!/bin/sh\nexit 3\n");
    package->fail_apply.insert(id);  // the revert's apply
  };
  auto r = run("2.0");
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.reason, "self-test of the new host failed: exit status 3; the revert failed too: write /nox-mesh-host: "
                      "No space left on device");
}

TEST_F(EngineHostUpgradeTest, AnUnchangedProgramIsNotSelfTested) {
  package->on_apply = nullptr;  // the package changed, the host's program did not
  auto r = run("2.0");
  EXPECT_EQ(r.outcome, "applied") << r.reason;
  EXPECT_EQ(file->applies, 1);
  for (const auto& l : log.lines) EXPECT_EQ(l.find("self-test"), std::string::npos) << l;
}

TEST_F(EngineHostUpgradeTest, AProviderWithoutTheCapabilityIsNeverFollowedByASelfTest) {
  package->may_replace_host = false;
  replace_with("#!/bin/sh\nexit 1\n");
  auto r = run("2.0");
  EXPECT_EQ(r.outcome, "applied") << r.reason;
}

TEST_F(EngineHostUpgradeTest, ADryRunNeverSelfTests) {
  replace_with("#!/bin/sh\nexit 1\n");
  auto r = run("2.0", /*dry_run=*/true);
  EXPECT_EQ(r.outcome, "planned");
  EXPECT_EQ(package->applies, 0);
}

}  // namespace
}  // namespace mesh::engine
