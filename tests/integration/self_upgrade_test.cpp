// Decision 0076 against real processes (nats-server, mesh-control, mesh-host, mesh), without apt
// or root: the host runs from a copy of mesh-host in the test's folder, and the test-only
// `hostprog` provider (may_replace_host) replaces that file as dpkg would. The host's own
// reactions — self-test, revert, exit 75, the state files, confirmation after the first
// reconcile offline, the rolled-back report and refusal — are the real ones. The packaged,
// systemd and apt version of the same story is HostUpgradeSystemTest (tests/upgrade).
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <sstream>

#include "mesh/common/clock.h"
#include "mesh/common/protocol.h"
#include "mesh_fixture.h"
#include "notify_socket.h"

namespace mesh::itest {
namespace {

using mesh::testing::eventually;
using mesh::testing::NotifySocket;

std::map<std::string, std::string> state_file(const fs::path& p) {
  std::map<std::string, std::string> out;
  std::istringstream in(read_text(p));
  for (std::string line; std::getline(in, line);)
    if (auto eq = line.find('='); eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  return out;
}

class SelfUpgradeTest : public MeshTest {
 protected:
  /// A host whose program is `<dir>/bin-<name>/mesh-host` (a copy of the build's), installed at
  /// "version" 1 for `hostprog`; prepared replacements: `.2` (another copy: a good new host) and
  /// `.bad` (its self-test fails; anything else runs the real host).
  Host& add_upgrade_host(const std::string& name) {
    const fs::path plugins = dir() / ("plugins-" + name);
    fs::create_directories(plugins);
    for (const char* so : {"mesh-provider-file.so", "mesh-transport-nats.so"})
      fs::create_symlink(fs::path(MESH_TEST_PLUGIN_DIR) / so, plugins / so);
    fs::create_symlink(fs::path(MESH_TEST_ONLY_PLUGIN_DIR) / "mesh-provider-hostprog.so",
                       plugins / "mesh-provider-hostprog.so");
    const fs::path bin_dir = dir() / ("bin-" + name);
    fs::create_directories(bin_dir);
    program = bin_dir / "mesh-host";
    for (const char* suffix : {"", ".1", ".2"}) fs::copy_file(bin("mesh-host"), program.string() + suffix);
    write_text(program.string() + ".version", "1\n");
    write_text(program.string() + ".bad",
               "#!/bin/sh\nif [ \"$1\" = self-test ]; then\n  echo 'fail  plugin file /usr/lib/nox-mesh/plugins/"
               "mesh-provider-x.so does not exist'\n  echo 'self-test failed'\n  exit 1\nfi\nexec " +
                   bin("mesh-host") + " \"$@\"\n");
    ::chmod((program.string() + ".bad").c_str(), 0755);
    Host& h = hosts_[name];
    h.name = name;
    h.state = dir() / ("host-" + name);
    h.config = dir() / (name + ".toml");
    write_text(h.config, "[node]\nname = \"" + name + "\"\nstate_dir = \"" + h.state.string() +
                             "\"\n\n[plugins]\ndir = \"" + plugins.string() +
                             "\"\nload = [\"file\", \"hostprog\"]\n\n[transport]\nplugin = \"nats\"\nservers = [\"" +
                             nats_->url() + "\"]\n\n[timers]\nheartbeat = \"1s\"\ndrift = \"1h\"\n");
    enrol(h, false);
    return h;
  }

  /// `mesh-host run` from the host's own program file.
  void start_program(Host& h, std::vector<std::string> env = {}) {
    h.proc = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{program.string(), "run", "--config", h.config.string(), "--log-level", "debug"}, env);
  }

  /// The host program at `version`, then a file written after it.
  std::string upgrade_declaration(const std::string& version, const fs::path& after) {
    return R"({"resources": [{"type": "hostprog", "id": ")" + program.string() + R"(", "properties": {"version": ")" +
           version + R"("}}, {"type": "file", "id": ")" + after.string() +
           R"(", "properties": {"content": "after\n", "mode": "0644"}}]})";
  }

  fs::path upgrade(const Host& h) const { return h.state / "upgrade"; }

  fs::path program;
};

TEST_F(SelfUpgradeTest, APassedSelfTestRestartsAndTheNewHostReportsAfterItsFirstReconcileOffline) {
  Host& h = add_upgrade_host("up-01");
  start_program(h);
  const fs::path after = dir() / "after.txt";
  auto d = declare("up-01", upgrade_declaration("2", after));
  const std::int64_t delivery = d.get_int("delivery", 0);
  const std::int64_t revision = d.get_int("revision", 0);

  // The old host self-tests the new program, leaves its state and exits 75, reporting nothing.
  ASSERT_TRUE(eventually([&] { return !h.proc->running(); }, 30000)) << h.proc->stderr_text();
  EXPECT_EQ(h.proc->exit_code(), 75) << h.proc->stderr_text();
  EXPECT_NE(h.proc->stderr_text().find("outcome=self_test_passed"), std::string::npos) << h.proc->stderr_text();
  auto pending = state_file(upgrade(h) / "pending");
  EXPECT_EQ(pending["revision"], std::to_string(revision));
  EXPECT_EQ(pending["from_version"], protocol::kHostVersion) << "not installed from a package: the build's version";
  EXPECT_EQ(pending["to_version"], protocol::kHostVersion);
  EXPECT_FALSE(pending["at_ms"].empty());
  EXPECT_TRUE(fs::exists(upgrade(h) / "declaration.json"));
  EXPECT_FALSE(fs::exists(after)) << "later resources are the new host's first reconcile";
  EXPECT_EQ(read_text(program.string() + ".version"), "2\n");
  auto during = report(delivery);
  EXPECT_EQ(count(during, "applied"), 0u) << "not applied while the new version has not run: " << during.to_json();
  EXPECT_EQ(count(during, "outstanding"), 1u) << during.to_json();

  // What systemd does on exit 75 (RestartForceExitStatus=75), with the broker down: the new
  // program is ready once its first reconcile is done, offline, and confirms.
  nats_->stop();
  NotifySocket sock(dir() / "notify.sock");
  start_program(h, {"NOTIFY_SOCKET=" + (dir() / "notify.sock").string()});
  ASSERT_TRUE(sock.wait_for("READY=1", 20000)) << h.proc->stderr_text();
  EXPECT_EQ(read_text(after), "after\n") << "READY=1 after the first reconcile";
  EXPECT_TRUE(eventually([&] { return fs::exists(upgrade(h) / "confirmed"); }, 5000));
  EXPECT_EQ(state_file(upgrade(h) / "confirmed")["version"], protocol::kHostVersion);
  EXPECT_FALSE(fs::exists(upgrade(h) / "pending"));
  EXPECT_FALSE(fs::exists(upgrade(h) / "declaration.json"));

  // Once the broker is back, the revision is reported applied by the host that runs it.
  nats_->start();
  ASSERT_TRUE(eventually([&] { return mesh({"nodes"}).exit_code == 0; }, 20000)) << "the control plane reconnects";
  auto rep = report(delivery, "40s");
  ASSERT_EQ(count(rep, "applied"), 1u) << rep.to_json() << h.proc->stderr_text();
  EXPECT_EQ(rep.find("applied")->as_array()[0].get_int("revision", 0), revision);
  EXPECT_TRUE(h.proc->running());
}

TEST_F(SelfUpgradeTest, AFailedSelfTestRevertsFailsTheApplyWithItsOutputAndTheHostNeverStops) {
  Host& h = add_upgrade_host("up-02");
  start_program(h);
  const fs::path after = dir() / "after.txt";
  auto d = declare("up-02", upgrade_declaration("bad", after));
  auto rep = report(d.get_int("delivery", 0), "40s");
  ASSERT_EQ(count(rep, "failed"), 1u) << rep.to_json() << h.proc->stderr_text();
  const auto& failed = rep.find("failed")->as_array()[0];
  EXPECT_EQ(failed.get_string("resource"), "hostprog:" + program.string());
  const std::string reason = failed.get_string("reason");
  EXPECT_EQ(reason.rfind("self-test of the new host failed: ", 0), 0u) << reason;
  EXPECT_NE(reason.find("plugin file /usr/lib/nox-mesh/plugins/mesh-provider-x.so does not exist"), std::string::npos)
      << reason;
  EXPECT_NE(reason.find("reverted to the state before the apply"), std::string::npos) << reason;
  EXPECT_TRUE(h.proc->running()) << "the running host never exits";
  EXPECT_EQ(read_text(program.string() + ".version"), "1\n") << "the previous version is back";
  EXPECT_EQ(read_text(program), read_text(program.string() + ".1"));
  EXPECT_FALSE(fs::exists(upgrade(h) / "pending"));
  EXPECT_FALSE(fs::exists(after));
}

TEST_F(SelfUpgradeTest, ARolledBackHostReportsTheFailureAndDoesNotApplyThatRevisionAgain) {
  Host& h = add_upgrade_host("up-03");
  const fs::path f = dir() / "f.txt";
  auto d = declare("up-03", file_declaration({{f.string(), "v9\n"}}));
  const std::string revision = std::to_string(d.get_int("revision", 0));
  // What the rollback script leaves after version 9.9.9 of revision R failed to start.
  const std::string at = std::to_string(common::now_ms());
  write_text(upgrade(h) / "pending", "package=nox-mesh-host\nfrom_version=" + std::string(protocol::kHostVersion) +
                                         "\nto_version=9.9.9\nrevision=" + revision + "\nat_ms=" + at + "\n");
  write_text(upgrade(h) / "rolled-back", "failed_version=9.9.9\nfailed_revision=" + revision +
                                             "\nrestored_version=" + protocol::kHostVersion + "\nat_ms=" + at + "\n");
  start_program(h);
  auto rep = report(d.get_int("delivery", 0), "40s");
  ASSERT_EQ(count(rep, "failed"), 1u) << rep.to_json() << h.proc->stderr_text();
  EXPECT_EQ(rep.find("failed")->as_array()[0].get_string("reason"),
            "host version 9.9.9 failed to start on this node; rolled back to " + std::string(protocol::kHostVersion));
  EXPECT_FALSE(fs::exists(f)) << "revision " << revision << " is not applied again";
  EXPECT_FALSE(fs::exists(upgrade(h) / "pending"));
  EXPECT_TRUE(fs::exists(upgrade(h) / "rolled-back"));
  EXPECT_TRUE(h.proc->wait_for_output("not applied again until a revision newer than " + revision, 10000))
      << h.proc->stderr_text();

  // A newer revision is applied as usual.
  auto d2 = declare("up-03", file_declaration({{f.string(), "v10\n"}}));
  ASSERT_EQ(count(report(d2.get_int("delivery", 0), "40s"), "applied"), 1u) << h.proc->stderr_text();
  EXPECT_EQ(read_text(f), "v10\n");
}

// A `rolled-back` that does not parse fails safe: taken for "no rollback", the revision it refuses
// would be applied again and reinstall the version that cannot start.
TEST_F(SelfUpgradeTest, ADamagedRolledBackFileMakesTheHostApplyNothingAndSayWhich) {
  Host& h = add_upgrade_host("up-06");
  const fs::path f = dir() / "f.txt";
  auto d = declare("up-06", file_declaration({{f.string(), "v9\n"}}));
  write_text(upgrade(h) / "rolled-back", "failed_version=9.9.9\ngarbage line\n");
  start_program(h);
  auto rep = report(d.get_int("delivery", 0), "40s");
  ASSERT_EQ(count(rep, "failed"), 1u) << rep.to_json() << h.proc->stderr_text();
  const std::string reason = rep.find("failed")->as_array()[0].get_string("reason");
  EXPECT_NE(reason.find("upgrade state " + (upgrade(h) / "rolled-back").string() + " is damaged"), std::string::npos)
      << reason;
  EXPECT_NE(reason.find("expected key=value, got 'garbage line'"), std::string::npos) << reason;
  EXPECT_FALSE(fs::exists(f)) << "nothing is applied while the upgrade state is damaged";
  EXPECT_TRUE(h.proc->running());
}

TEST_F(SelfUpgradeTest, ASecondFailureLeftStoppedIsReportedByTheNextStart) {
  Host& h = add_upgrade_host("up-04");
  const fs::path f = dir() / "f.txt";
  auto d = declare("up-04", file_declaration({{f.string(), "v9\n"}}));
  const std::string revision = std::to_string(d.get_int("revision", 0));
  const std::string at = std::to_string(common::now_ms());
  // An earlier rollback (of 8.8.8), then this revision's 9.9.9 failed too and was left stopped.
  write_text(upgrade(h) / "rolled-back", "failed_version=8.8.8\nfailed_revision=0\nrestored_version=" +
                                             std::string(protocol::kHostVersion) + "\nat_ms=" + at + "\n");
  write_text(upgrade(h) / "stopped", "failed_version=9.9.9\nfailed_revision=" + revision +
                                         "\nreason=the restored version failed to start too\nat_ms=" + at + "\n");
  // The script leaves `pending` as it was (it removes nothing): the host settles it.
  write_text(upgrade(h) / "pending", "package=nox-mesh-host\nfrom_version=" + std::string(protocol::kHostVersion) +
                                         "\nto_version=9.9.9\nrevision=" + revision + "\nat_ms=" + at + "\n");
  start_program(h);
  auto rep = report(d.get_int("delivery", 0), "40s");
  ASSERT_EQ(count(rep, "failed"), 1u) << rep.to_json() << h.proc->stderr_text();
  EXPECT_EQ(rep.find("failed")->as_array()[0].get_string("reason"),
            "host version 9.9.9 failed to start on this node after a rollback; the service was left stopped: the "
            "restored version failed to start too");
  EXPECT_TRUE(eventually([&] { return !fs::exists(upgrade(h) / "stopped"); }, 5000));
  EXPECT_FALSE(fs::exists(upgrade(h) / "pending"));
  // Started by hand on another version: the revision whose version failed is not applied again
  // (it would reinstall 9.9.9), now and after the next start, as rolled-back says.
  auto rb = state_file(upgrade(h) / "rolled-back");
  EXPECT_EQ(rb["failed_version"], "9.9.9");
  EXPECT_EQ(rb["failed_revision"], revision);
  EXPECT_EQ(rb["restored_version"], protocol::kHostVersion);
  EXPECT_TRUE(h.proc->wait_for_output("not applied again until a revision newer than " + revision, 15000))
      << h.proc->stderr_text();
  EXPECT_FALSE(fs::exists(f));
  auto again = report(d.get_int("delivery", 0));
  ASSERT_EQ(count(again, "failed"), 1u) << again.to_json();
  EXPECT_NE(again.find("failed")->as_array()[0].get_string("reason").find("the service was left stopped"),
            std::string::npos)
      << "the stopped report stays the revision's report: " << again.to_json();
}

// Decision 80: `pending` for another version with no rollback recorded means no upgrade took
// place; it is forgotten (a later start failure is then not taken for a bad release) and the
// node applies its declarations as usual.
TEST_F(SelfUpgradeTest, APendingUpgradeThatDidNotTakePlaceIsForgotten) {
  Host& h = add_upgrade_host("up-05");
  const fs::path f = dir() / "f.txt";
  auto d = declare("up-05", file_declaration({{f.string(), "v1\n"}}));
  write_text(upgrade(h) / "pending", "package=nox-mesh-host\nfrom_version=" + std::string(protocol::kHostVersion) +
                                         "\nto_version=9.9.9\nrevision=" + std::to_string(d.get_int("revision", 0)) +
                                         "\nat_ms=1\n");
  start_program(h);
  ASSERT_EQ(count(report(d.get_int("delivery", 0), "40s"), "applied"), 1u) << h.proc->stderr_text();
  EXPECT_EQ(read_text(f), "v1\n");
  EXPECT_FALSE(fs::exists(upgrade(h) / "pending"));
  EXPECT_FALSE(fs::exists(upgrade(h) / "confirmed"));
  EXPECT_NE(h.proc->stderr_text().find("upgrade not in place node=up-05"), std::string::npos) << h.proc->stderr_text();
}

}  // namespace
}  // namespace mesh::itest
