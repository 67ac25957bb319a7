// The host upgrades itself through the mesh and is rolled back once (issue 14, decision 76), with
// a real systemd, dpkg and apt (label `system`: root).
//
// A systemd sandbox whose /usr, /etc and /var are overlays (systemd-sandbox.sh --overlay), so
// dpkg inside never touches the machine's package database. Inside: nats-server, mesh-control
// (nox-mesh-control package, with the publish stage and its apt repository served over HTTP on
// 127.0.0.1) and nox-mesh-host V1, installed from the packages CPack builds in the test. The newer
// versions are the built package repacked (upgrade_harness.h) and published to the mesh's
// repository with `mesh publish`; the host gets them from there through apt, deployed as a module
// (the repository's key and sources `file`s and `package: nox-mesh-host` at a version).
//
//   V2  plain: runs, has reconciled, the delivery says applied, `mesh nodes` shows V2
//   V3  `run` exits at once: OnFailure= runs the rollback, V2 runs again and reports the
//       failure with the reason; the marker (rolled-back) is set
//   V4  `self-test` fails: the apply fails with its message; V2 is never stopped
//   V5  its postinst SIGKILLs dpkg mid-upgrade: the next host start leaves dpkg --audit empty
//   V6  `run` exits at once again, after a rollback: no loop, the unit stays stopped with its
//       reason (stopped); the host restored by hand reports it
// Three tests, each with its own sandbox: V2-V3-V4, V5 (from V1), V2-V3-V6.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <regex>
#include <string>
#include <thread>

#include "systemd_sandbox.h"
#include "upgrade_harness.h"
#include "mesh/testing/process.h"

namespace mesh::upgrade_test {
namespace {

namespace fs = std::filesystem;
using mesh::testing::SandboxRun;
using mesh::testing::SystemdSandbox;
using mesh::testing::SystemdSandboxOptions;
using std::chrono::seconds;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string show(const SandboxRun& r) {
  return "exit " + std::to_string(r.exit_code) + (r.timed_out ? " (timed out)" : "") + "\nstdout:\n" + r.out +
         "\nstderr:\n" + r.err;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += std::string("\\") + c;
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out + "\"";
}

// Polls `done` every 250 ms until it holds or `limit` passed; true when it held.
bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return done();
}

std::string dropin(const std::string& log) {
  return "[Unit]\nDefaultDependencies=no\n[Service]\nStandardOutput=append:" + log + "\nStandardError=append:" + log +
         "\n";
}

class HostUpgradeSystemTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = "/tmp/mesh-hostupgrade-XXXXXX";
    if (!::mkdtemp(tmpl.data())) return;
    ::chmod(tmpl.c_str(), 0755);
    dir_ = tmpl;
    try {
      pkgs_ = build_packages(dir_ + "/packages");
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "dpkg in a systemd sandbox needs root";
    if (run({"sh", "-c", "command -v nats-server && command -v apt-ftparchive && command -v gpg"}).exit_code != 0)
      GTEST_SKIP() << "needs nats-server, apt-ftparchive (apt-utils) and gpg";
    ASSERT_FALSE(dir_.empty()) << "cannot make a folder under /tmp";
    ASSERT_TRUE(error_.empty()) << error_;
    fs::remove_all(out_);
    fs::create_directories(out_);
  }

  SandboxRun in(const std::string& script, std::chrono::milliseconds timeout = seconds(120)) {
    return sb_->run({"/bin/sh", "-c", script}, timeout);
  }
  SandboxRun mesh(const std::string& args, std::chrono::milliseconds timeout = seconds(120)) {
    return in("mesh --identity /var/lib/nox-mesh-control/admin.identity --server " + nats_url_ + " " + args, timeout);
  }
  std::string dpkg_status() {
    return trim(in("dpkg-query -W -f='${db:Status-Abbrev}|${Version}' nox-mesh-host").out);
  }
  std::string prop(const std::string& unit, const std::string& p) {
    return trim(sb_->systemctl({"show", "-p", p, "--value", unit}).out);
  }
  std::string active() { return trim(sb_->systemctl({"is-active", "nox-mesh-host"}).out); }
  std::string state(const std::string& name, const std::string& key) {
    return state_value(sb_->overlay_dir() + "/var/upper/lib/nox-mesh/upgrade/" + name, key);
  }
  bool has_state(const std::string& name) {
    return in("test -f /var/lib/nox-mesh/upgrade/" + name).exit_code == 0;
  }
  std::string logs() {
    return "---- host.log\n" + read_file(host_log_) + "\n---- rollback.log\n" + read_file(rollback_log_) +
           "\n---- control.log (tail)\n" + trim(in("tail -n 30 " + control_log_).out) + "\n";
  }

  // Publishes `deb` to the mesh's repository.
  void publish(const std::string& deb) {
    auto r = mesh("publish " + deb, seconds(120));
    ASSERT_EQ(r.exit_code, 0) << show(r) << logs();
    std::cout << "[ observed ] " << r.out;
  }

  // Deploys the repository's key and sources and nox-mesh-host at `version` to web-01 as module
  // `nox-mesh-host` (a new module version each time; the node is assigned at the first); returns
  // the delivery id.
  std::string declare_host(const std::string& version) {
    const std::string key = "/etc/apt/keyrings/nox-mesh.asc";
    const std::string list = "/etc/apt/sources.list.d/nox-mesh.list";
    const std::string module_version = "1.0." + std::to_string(++module_versions_);
    const std::string text =
        "{\"module\": \"nox-mesh-host\", \"version\": \"" + module_version + "\", \"resources\": [\n"
        "  {\"type\": \"file\", \"id\": \"" + key + "\", \"properties\": {\"content\": " + json_string(repo_key_) +
        ", \"mode\": \"0644\"}},\n"
        "  {\"type\": \"file\", \"id\": \"" + list + "\", \"requires\": [\"file:" + key +
        "\"], \"properties\": {\"content\": " +
        json_string("deb [signed-by=" + key + "] http://127.0.0.1:" + std::to_string(repo_port_) + "/ mesh main\n") +
        ", \"mode\": \"0644\"}},\n"
        "  {\"type\": \"package\", \"id\": \"nox-mesh-host\", \"requires\": [\"file:" + list +
        "\"], \"properties\": {\"version\": \"" + version + "\", \"source\": \"" + list + "\"}}\n]}\n";
    const std::string file = sb_->dir() + "/module-" + module_version + ".json";
    write_file(file, text);
    auto r = mesh("module push " + file);
    EXPECT_EQ(r.exit_code, 0) << show(r);
    if (module_versions_ == 1) {
      r = mesh("node label web-01 role=node");
      EXPECT_EQ(r.exit_code, 0) << show(r);
      r = mesh("assign nox-mesh-host role=node");
      EXPECT_EQ(r.exit_code, 0) << show(r);
    }
    r = mesh("deploy nox-mesh-host " + module_version + " --output json");
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << show(r);
    std::smatch m;
    if (!std::regex_search(r.out, m, std::regex("\"delivery\":\\s*([0-9]+)"))) {
      ADD_FAILURE() << "no delivery in " << show(r);
      return "";
    }
    return m[1];
  }

  // `mesh report ID --wait`, text.
  SandboxRun report(const std::string& delivery, const std::string& wait = "4m") {
    auto r = mesh("report " + delivery + " --wait " + wait, seconds(300));
    std::cout << "[ observed ] mesh report " << delivery << ":\n" << r.out << std::endl;
    return r;
  }

  // Boots the sandbox, installs V1 and the control plane, enrols web-01 and starts its unit.
  void boot_and_enrol() {
    SystemdSandboxOptions options;
    options.name = "mesh-hostupgrade";
    options.overlay = true;
    options.keep_paths = {dir_};
    options.boot_timeout = std::chrono::milliseconds(60000);
    sb_ = std::make_unique<SystemdSandbox>(options);
    host_log_ = sb_->dir() + "/host.log";
    rollback_log_ = sb_->dir() + "/rollback.log";
    control_log_ = sb_->dir() + "/control.log";
    for (const auto& [unit, log] : {std::pair{std::string("nox-mesh-host"), host_log_},
                                    {"nox-mesh-host-rollback", rollback_log_},
                                    {"nox-mesh-control", control_log_}}) {
      fs::create_directories(sb_->unit_dir() + "/" + unit + ".service.d");
      sb_->write_unit(unit + ".service.d/sandbox.conf", dropin(log));
    }
    if (!sb_->start()) GTEST_SKIP() << sb_->skipped_reason();

    // V1: dpkg -i, as an operator installs it.
    auto r = in("dpkg -i " + pkgs_.common + " " + pkgs_.control + " " + pkgs_.cli + " " + pkgs_.host, seconds(300));
    ASSERT_EQ(r.exit_code, 0) << show(r);
    ASSERT_EQ(dpkg_status(), "ii |" + v1_);

    const int nats_port = mesh::testing::free_tcp_port();
    repo_port_ = mesh::testing::free_tcp_port();
    ASSERT_GT(nats_port, 0);
    ASSERT_GT(repo_port_, 0);
    nats_url_ = "nats://127.0.0.1:" + std::to_string(nats_port);
    r = in("sed -i 's|nats://127.0.0.1:4222|" + nats_url_ + "|' /etc/nox-mesh/control.toml /etc/nox-mesh/host.toml && "
           "printf '\\n[stages]\\nload = [\"publish\"]\\n\\n[stages.publish]\\narchitectures = [\"amd64\"]\\n\\n"
           "[repository]\\ndir = \"/var/lib/nox-mesh-control/apt\"\\nlisten = \"127.0.0.1:" + std::to_string(repo_port_) +
           "\"\\n' >> /etc/nox-mesh/control.toml && mkdir -p /var/lib/nox-mesh-control/apt && "
           "systemd-run --unit mesh-hostupgrade-nats -p DefaultDependencies=no -p StandardOutput=append:" + sb_->dir() +
           "/nats.log -p StandardError=append:" + sb_->dir() + "/nats.log nats-server -a 127.0.0.1 -p " +
           std::to_string(nats_port));
    ASSERT_EQ(r.exit_code, 0) << show(r);
    r = sb_->systemctl({"enable", "--now", "nox-mesh-control"});
    ASSERT_EQ(r.exit_code, 0) << show(r) << read_file(control_log_);
    std::string token;
    ASSERT_TRUE(eventually(
        [&] {
          r = mesh("token issue web-01 --ttl 24h | awk '$1 == \"token\" { print $2 }' > " + sb_->dir() + "/token.txt");
          token = trim(read_file(sb_->dir() + "/token.txt"));
          return r.exit_code == 0 && !token.empty();
        },
        seconds(30)))
        << show(r) << read_file(control_log_);
    r = in("sed -i 's/^# name = .*/name = \"web-01\"/' /etc/nox-mesh/host.toml && "
           "mesh-host enrol --config /etc/nox-mesh/host.toml --token-file " + sb_->dir() + "/token.txt");
    ASSERT_EQ(r.exit_code, 0) << show(r) << read_file(control_log_);
    r = sb_->systemctl({"enable", "--now", "nox-mesh-host"});
    ASSERT_EQ(r.exit_code, 0) << show(r) << logs();
    ASSERT_EQ(active(), "active") << logs();
    r = mesh("repository key");
    ASSERT_EQ(r.exit_code, 0) << show(r);
    repo_key_ = r.out;
    ASSERT_NE(repo_key_.find("BEGIN PGP PUBLIC KEY BLOCK"), std::string::npos) << repo_key_;
  }

  void TearDown() override {
    if (sb_) {
      if (HasFailure()) std::cerr << logs() << "---- sandbox\n" << sb_->log() << "\n";
      sb_->stop();
      sb_.reset();
    }
  }

  static inline std::string dir_;
  static inline std::string error_;
  static inline Packages pkgs_;
  std::unique_ptr<SystemdSandbox> sb_;
  std::string host_log_, rollback_log_, control_log_;
  std::string nats_url_;
  int repo_port_ = 0;
  int module_versions_ = 0;
  std::string repo_key_;
  void deploy_v2();
  void deploy_v3_rolled_back();

  std::string v1_ = pkgs_.version;
  std::string v2_ = v1_ + "+t2", v3_ = v1_ + "+t3", v4_ = v1_ + "+t4", v5_ = v1_ + "+t5", v6_ = v1_ + "+t6";
  std::string out_ = dir_ + "/versions";
};

// The steps each test is made of; each stops its test at its first fatal failure.

// V2 through the mesh: runs, has reconciled, applied, shown by mesh nodes.
void HostUpgradeSystemTest::deploy_v2() {
  SCOPED_TRACE("V2");
  const std::string pid1 = prop("nox-mesh-host", "MainPID");
  const std::string d = declare_host(v2_);
  auto r = report(d);
  ASSERT_EQ(r.exit_code, 0) << show(r) << logs();
  EXPECT_NE(r.out.find("applied      1 of 1"), std::string::npos) << r.out;
  EXPECT_EQ(dpkg_status(), "ii |" + v2_);
  EXPECT_EQ(active(), "active");
  EXPECT_NE(prop("nox-mesh-host", "MainPID"), pid1) << "the host did not restart into V2";
  EXPECT_EQ(state("confirmed", "version"), v2_);
  EXPECT_FALSE(has_state("pending"));
  r = in("mesh-host --version");
  EXPECT_NE(r.out.find(v2_), std::string::npos) << show(r);
  ASSERT_TRUE(eventually([&] { return mesh("nodes").out.find(v2_) != std::string::npos; }, seconds(60)))
      << mesh("nodes").out;
  std::cout << "[ observed ] mesh nodes:\n" << mesh("nodes").out << std::endl;
}

// V3 exits at once: OnFailure= rolls back to V2, which reports the failure; marker set.
void HostUpgradeSystemTest::deploy_v3_rolled_back() {
  SCOPED_TRACE("V3");
  const std::string d = declare_host(v3_);
  auto r = report(d);
  EXPECT_EQ(r.exit_code, 1) << show(r) << logs();
  const std::string reason = "host version " + v3_ + " failed to start on this node; rolled back to " + v2_;
  ASSERT_NE(r.out.find(reason), std::string::npos) << r.out << logs();
  EXPECT_EQ(dpkg_status(), "ii |" + v2_);
  ASSERT_TRUE(eventually([&] { return active() == "active"; }, seconds(60))) << logs();
  EXPECT_EQ(state("rolled-back", "failed_version"), v3_);
  EXPECT_EQ(state("rolled-back", "restored_version"), v2_);
  EXPECT_FALSE(has_state("pending"));
  EXPECT_NE(read_file(rollback_log_).find("outcome=rolled-back"), std::string::npos) << logs();
  EXPECT_NE(read_file(host_log_).find("test build that exits at once"), std::string::npos);
}

TEST_F(HostUpgradeSystemTest, DeployedV2RunsAndReportsV3ThatCannotStartIsRolledBackV4WhoseSelfTestFailsNeverStopsV2) {
  ASSERT_NO_FATAL_FAILURE(boot_and_enrol());
  const std::string deb2 = repack_host(pkgs_.host, v2_, out_);
  const std::string deb3 = repack_host(pkgs_.host, v3_, out_, HostBuild::ExitsAtOnce);
  const std::string deb4 = repack_host(pkgs_.host, v4_, out_, HostBuild::SelfTestFails);
  for (const auto& deb : {deb2, deb3, deb4}) ASSERT_NO_FATAL_FAILURE(publish(deb));
  ASSERT_NO_FATAL_FAILURE(deploy_v2());
  ASSERT_NO_FATAL_FAILURE(deploy_v3_rolled_back());

  // V4's self-test fails: the apply fails with its message; V2 is never stopped.
  SCOPED_TRACE("V4");
  const std::string pid = prop("nox-mesh-host", "MainPID");
  const std::string restarts = prop("nox-mesh-host", "NRestarts");
  const std::string d = declare_host(v4_);
  auto r = report(d);
  EXPECT_EQ(r.exit_code, 1) << show(r) << logs();
  EXPECT_NE(r.out.find("self-test of the new host failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("self-test of test build " + v4_ + ": the plugins directory cannot be read"), std::string::npos)
      << r.out;
  EXPECT_EQ(dpkg_status(), "ii |" + v2_);
  EXPECT_EQ(active(), "active");
  EXPECT_EQ(prop("nox-mesh-host", "MainPID"), pid) << "V2 was stopped";
  EXPECT_EQ(prop("nox-mesh-host", "NRestarts"), restarts);
}

TEST_F(HostUpgradeSystemTest, AKilledDpkgMidUpgradeIsRepairedByTheNextHostStart) {
  ASSERT_NO_FATAL_FAILURE(boot_and_enrol());
  const std::string trigger = dir_ + "/kill-dpkg-once";
  const std::string deb5 = repack_host(pkgs_.host, v5_, out_, HostBuild::KillsDpkgOnce, trigger);
  ASSERT_NO_FATAL_FAILURE(publish(deb5));
  write_file(trigger, "once\n");
  const std::string d = declare_host(v5_);
  auto r = report(d);
  EXPECT_EQ(r.exit_code, 1) << show(r) << logs();
  ASSERT_FALSE(fs::exists(trigger)) << "the postinst did not run";
  ASSERT_NE(trim(in("dpkg --audit").out), "") << "dpkg is not left interrupted";
  std::cout << "[ observed ] dpkg --audit after the kill:\n" << in("dpkg --audit").out << std::endl;
  r = sb_->systemctl({"restart", "nox-mesh-host"});
  EXPECT_EQ(r.exit_code, 0) << show(r) << logs();
  EXPECT_TRUE(eventually([&] { return trim(in("dpkg --audit").out).empty(); }, seconds(120)))
      << in("dpkg --audit").out << logs();
  EXPECT_EQ(dpkg_status(), "ii |" + v5_);
  EXPECT_NE(read_file(host_log_).find("step=repair"), std::string::npos) << logs();
  EXPECT_TRUE(eventually([&] { return active() == "active"; }, seconds(60))) << logs();
}

TEST_F(HostUpgradeSystemTest, ASecondStartFailureAfterARollbackDoesNotLoopAndLeavesTheUnitStoppedWithItsReason) {
  ASSERT_NO_FATAL_FAILURE(boot_and_enrol());
  const std::string deb2 = repack_host(pkgs_.host, v2_, out_);
  const std::string deb3 = repack_host(pkgs_.host, v3_, out_, HostBuild::ExitsAtOnce);
  const std::string deb6 = repack_host(pkgs_.host, v6_, out_, HostBuild::ExitsAtOnce);
  for (const auto& deb : {deb2, deb3, deb6}) ASSERT_NO_FATAL_FAILURE(publish(deb));
  ASSERT_NO_FATAL_FAILURE(deploy_v2());
  ASSERT_NO_FATAL_FAILURE(deploy_v3_rolled_back());

  SCOPED_TRACE("V6 second failure");
  const std::string d = declare_host(v6_);
  ASSERT_TRUE(eventually([&] { return has_state("stopped"); }, seconds(240))) << logs();
  EXPECT_TRUE(eventually([&] { return prop("nox-mesh-host-rollback", "ActiveState") != "activating"; }, seconds(60)));
  const std::string reason = state("stopped", "reason");
  EXPECT_NE(reason.find("no second rollback"), std::string::npos) << reason;
  EXPECT_EQ(state("stopped", "failed_version"), v6_);
  EXPECT_NE(read_file(rollback_log_).find("outcome=stopped"), std::string::npos) << logs();
  EXPECT_EQ(dpkg_status(), "ii |" + v6_) << "a second failure is not rolled back";
  // No loop: the unit stays failed and is not started again.
  EXPECT_EQ(active(), "failed") << logs();
  std::this_thread::sleep_for(seconds(12));  // more than RestartSec=5s twice
  EXPECT_EQ(active(), "failed") << logs();
  EXPECT_EQ(prop("nox-mesh-host", "ActiveState"), "failed");
  // By hand (docs/operations.md): reinstall the good version, start; the host reports the reason.
  auto r = in("apt-get install -y -q --allow-downgrades nox-mesh-host=" + v2_, seconds(300));
  EXPECT_EQ(r.exit_code, 0) << show(r);
  r = in("systemctl reset-failed nox-mesh-host && systemctl start nox-mesh-host");
  EXPECT_EQ(r.exit_code, 0) << show(r) << logs();
  r = report(d, "2m");
  EXPECT_NE(r.out.find("failed to start on this node after a rollback; the service was left stopped"),
            std::string::npos)
      << r.out << logs();
  EXPECT_NE(r.out.find("no second rollback"), std::string::npos) << r.out;
  EXPECT_FALSE(has_state("stopped")) << "the host that reported it removes it";
}

}  // namespace
}  // namespace mesh::upgrade_test
