// The rollback script as the nox-mesh-host package installs it (/usr/libexec/nox-mesh/host-rollback)
// against the real dpkg and apt, each state of decision 76's table (label `system`).
//
// The binary runs under overlay-exec.sh (ctest's emulator): /usr, /etc and /var are overlays in a
// private mount namespace, so dpkg -i, the reinstall, a killed dpkg and the purge change only the
// test's own folder. The packages are built by CPack from this build tree; the newer versions are
// the built one repacked (upgrade_harness.h). systemctl is a stand-in on PATH that records its
// arguments (the real unit, with systemd, is HostUpgradeSystemTest's business).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "apt_repo_fixture.h"
#include "upgrade_harness.h"

namespace mesh::upgrade_test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kScript = "/usr/libexec/nox-mesh/host-rollback";
constexpr const char* kUpgrade = "/var/lib/nox-mesh/upgrade";

class HostUpgradeRollbackScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* overlay = getenv("NOX_MESH_TEST_OVERLAY");
    if (overlay == nullptr) {
      const char* why = getenv("NOX_MESH_TEST_OVERLAY_SKIP");
      GTEST_SKIP() << "not in an overlay of /usr, /etc, /var (run through tests/upgrade/overlay-exec.sh): "
                   << (why ? why : "not started by it");
    }
    const std::string why = mesh::testing::apt_repo_skip_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    dir_ = std::string(overlay) + "/test";
    fs::create_directories(dir_ + "/bin");
    pkgs_ = build_packages(std::string(overlay) + "/packages");
    v1_ = pkgs_.version;
    v2_ = v1_ + "+t2";
    // From a clean slate (the tests of one run share the overlay).
    run({"dpkg", "--purge", "nox-mesh-host", "nox-mesh-common"});
    fs::remove_all("/var/lib/nox-mesh");
    for (const auto& e : fs::directory_iterator("/var/cache/apt/archives"))
      if (e.path().extension() == ".deb") fs::remove(e.path());
    check({"dpkg", "-i", pkgs_.common, pkgs_.host}, "dpkg -i V1");
    ASSERT_EQ(installed(), "ii |" + v1_);
    // apt without the machine's sources (a test adds its own), lists in the test's folder.
    const std::string apt = dir_ + "/apt";
    fs::create_directories(apt + "/sources.list.d");
    fs::create_directories(apt + "/lists/partial");
    write_file(apt + "/sources.list", "");
    write_file(apt + "/apt.conf", "Dir::Etc::sourcelist \"" + apt + "/sources.list\";\n"
               "Dir::Etc::sourceparts \"" + apt + "/sources.list.d\";\n"
               "Dir::State::lists \"" + apt + "/lists\";\nAcquire::Retries \"0\";\n");
    for (const auto& e : fs::directory_iterator(apt + "/sources.list.d")) fs::remove(e.path());
    // A fake systemctl that records what it was asked.
    write_file(dir_ + "/bin/systemctl", "#!/bin/sh\necho \"$*\" >> '" + dir_ + "/systemctl.log'\n", 0755);
    fs::remove(dir_ + "/systemctl.log");
  }

  void TearDown() override {
    if (HasFailure()) std::cerr << "---- script output\n" << last_.out << "\n";
  }

  static std::string installed() {
    return run({"dpkg-query", "-W", "-f=${db:Status-Abbrev}|${Version}", "nox-mesh-host"}).out;
  }

  // The host's upgrade to V2, as the old host leaves it just before it exits 75.
  void upgrade_to(const std::string& deb, const std::string& to, const std::string& revision = "7") {
    check({"dpkg", "-i", deb}, "dpkg -i " + to);
    fs::create_directories(kUpgrade);
    write_file(std::string(kUpgrade) + "/pending",
               "package=nox-mesh-host\nfrom_version=" + v1_ + "\nto_version=" + to +
                   "\nrevision=" + revision + "\nat_ms=1764630000000\n",
               0600);
  }

  CommandRun rollback(std::vector<std::string> args = {}) {
    std::vector<std::string> argv{"env", "PATH=" + dir_ + "/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                  "NOX_MESH_ROLLBACK_LOCK_WAIT=5",
                                  "APT_CONFIG=" + dir_ + "/apt/apt.conf", kScript};
    argv.insert(argv.end(), args.begin(), args.end());
    last_ = run(argv, 300000);
    std::cout << "[ observed ] host-rollback exit " << last_.exit_code << ":\n" << last_.out << std::endl;
    return last_;
  }

  std::string systemctl_calls() const { return read_file(dir_ + "/systemctl.log"); }

  std::string dir_;
  Packages pkgs_;
  std::string v1_, v2_;
  CommandRun last_;
};

TEST_F(HostUpgradeRollbackScriptTest, NoPendingUpgradeRollsNothingBack) {
  const std::string v2 = repack_host(pkgs_.host, v2_, dir_);
  check({"dpkg", "-i", v2}, "dpkg -i V2");
  CommandRun r = rollback();
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("no unconfirmed upgrade is pending: not a bad release, nothing rolled back"),
            std::string::npos);
  EXPECT_EQ(installed(), "ii |" + v2_) << "a failure that is not an upgrade must not downgrade";
  EXPECT_FALSE(fs::exists(std::string(kUpgrade) + "/rolled-back"));
  EXPECT_FALSE(fs::exists(std::string(kUpgrade) + "/stopped"));
  EXPECT_EQ(systemctl_calls(), "") << "nothing is started";
}

TEST_F(HostUpgradeRollbackScriptTest, PendingUpgradeIsRolledBackFromTheAptCacheAndStarted) {
  upgrade_to(repack_host(pkgs_.host, v2_, dir_), v2_, "7");
  // apt keeps what it downloaded here; the script prefers it (no network needed).
  fs::copy_file(pkgs_.host, "/var/cache/apt/archives/" + fs::path(pkgs_.host).filename().string());
  CommandRun r = rollback();
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(installed(), "ii |" + v1_);
  const std::string rb = std::string(kUpgrade) + "/rolled-back";
  EXPECT_EQ(state_value(rb, "failed_version"), v2_);
  EXPECT_EQ(state_value(rb, "failed_revision"), "7");
  EXPECT_EQ(state_value(rb, "restored_version"), v1_);
  EXPECT_FALSE(state_value(rb, "at_ms").empty());
  EXPECT_EQ(fs::status(rb).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_TRUE(fs::exists(std::string(kUpgrade) + "/pending")) << "the restored host removes it when it reports";
  EXPECT_NE(r.out.find("from=/var/cache/apt/archives/"), std::string::npos);
  EXPECT_NE(r.out.find("host version " + v2_ + " failed to start on this node; rolled back to " + v1_),
            std::string::npos);
  EXPECT_EQ(systemctl_calls(),
            "reset-failed nox-mesh-host.service\nstart --no-block nox-mesh-host.service\n");
  EXPECT_EQ(run({"dpkg", "--audit"}).out, "");
}

TEST_F(HostUpgradeRollbackScriptTest, WithoutTheCachedDebTheRollbackInstallsFromAptsSources) {
  // A local repository holding V1 (the mesh's repository, in the real case, over HTTP).
  const std::string repo = dir_ + "/repo";
  fs::create_directories(repo);
  fs::copy_file(pkgs_.host, repo + "/" + fs::path(pkgs_.host).filename().string());
  check({"sh", "-c", "cd '" + repo + "' && dpkg-scanpackages -m . /dev/null > Packages"},
        "dpkg-scanpackages");
  write_file(dir_ + "/apt/sources.list.d/nox-mesh-test.list", "deb [trusted=yes] file:" + repo + " ./\n");
  upgrade_to(repack_host(pkgs_.host, v2_, dir_), v2_, "8");
  CommandRun r = rollback();
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(installed(), "ii |" + v1_);
  EXPECT_NE(r.out.find("from=apt"), std::string::npos);
  EXPECT_EQ(state_value(std::string(kUpgrade) + "/rolled-back", "restored_version"), v1_);
  EXPECT_NE(systemctl_calls().find("start --no-block nox-mesh-host.service"), std::string::npos);
}

TEST_F(HostUpgradeRollbackScriptTest, ASecondFailureLeavesTheHostStoppedWithItsReason) {
  upgrade_to(repack_host(pkgs_.host, v2_, dir_), v2_, "9");
  write_file(std::string(kUpgrade) + "/rolled-back",
             "failed_version=" + v1_ + "+t1\nfailed_revision=5\nrestored_version=" + v1_ +
                 "\nat_ms=1764620000000\n",
             0600);
  CommandRun r = rollback();
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(installed(), "ii |" + v2_) << "no second rollback";
  const std::string stopped = std::string(kUpgrade) + "/stopped";
  ASSERT_TRUE(fs::exists(stopped));
  EXPECT_EQ(state_value(stopped, "failed_version"), v2_);
  EXPECT_EQ(state_value(stopped, "failed_revision"), "9");
  const std::string reason = state_value(stopped, "reason");
  EXPECT_NE(reason.find("left stopped (no second rollback)"), std::string::npos) << reason;
  EXPECT_NE(r.out.find("outcome=stopped"), std::string::npos);
  EXPECT_NE(r.out.find(reason), std::string::npos) << "the reason is in the journal too";
  EXPECT_EQ(systemctl_calls(), "") << "the unit stays stopped";
}

TEST_F(HostUpgradeRollbackScriptTest, AKilledDpkgIsRepairedBeforeTheReinstall) {
  const std::string trigger = dir_ + "/kill-dpkg-once";
  const std::string v2 = repack_host(pkgs_.host, v2_, dir_, HostBuild::KillsDpkgOnce, trigger);
  write_file(trigger, "once\n");
  CommandRun killed = run({"dpkg", "-i", v2});
  ASSERT_NE(killed.exit_code, 0) << killed.out;
  ASSERT_FALSE(fs::exists(trigger)) << "the postinst did not run";
  ASSERT_NE(run({"dpkg", "--audit"}).out, "") << "dpkg is not left interrupted";
  fs::create_directories(kUpgrade);
  write_file(std::string(kUpgrade) + "/pending",
             "package=nox-mesh-host\nfrom_version=" + v1_ + "\nto_version=" + v2_ +
                 "\nrevision=10\nat_ms=1764630000000\n",
             0600);
  fs::copy_file(pkgs_.host, "/var/cache/apt/archives/" + fs::path(pkgs_.host).filename().string());
  CommandRun r = rollback();
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("running dpkg --configure -a"), std::string::npos);
  EXPECT_EQ(run({"dpkg", "--audit"}).out, "");
  EXPECT_EQ(installed(), "ii |" + v1_);
  EXPECT_EQ(state_value(std::string(kUpgrade) + "/rolled-back", "restored_version"), v1_);
}

TEST_F(HostUpgradeRollbackScriptTest, AFailedReinstallWritesStoppedWithTheReason) {
  // Neither the cache nor any source has V1.
  upgrade_to(repack_host(pkgs_.host, v2_, dir_), v2_, "11");
  CommandRun r = rollback();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(installed(), "ii |" + v2_);
  const std::string stopped = std::string(kUpgrade) + "/stopped";
  const std::string reason = state_value(stopped, "reason");
  EXPECT_NE(reason.find("rollback to " + v1_ + " failed"), std::string::npos) << reason;
  EXPECT_FALSE(fs::exists(std::string(kUpgrade) + "/rolled-back"));
  EXPECT_EQ(systemctl_calls(), "");
}

TEST_F(HostUpgradeRollbackScriptTest, AMalformedPendingFileIsNamedAndNothingChanges) {
  upgrade_to(repack_host(pkgs_.host, v2_, dir_), v2_);
  write_file(std::string(kUpgrade) + "/pending",
             "package=nox-mesh-host\nfrom_version=1.0; rm -rf /\nto_version=" + v2_ + "\nrevision=7\n", 0600);
  CommandRun r = rollback();
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("/var/lib/nox-mesh/upgrade/pending:2: from_version"), std::string::npos);
  EXPECT_EQ(installed(), "ii |" + v2_);
  EXPECT_EQ(systemctl_calls(), "");
  CommandRun bad = rollback({"--state-dir", "relative"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("must be an absolute path: relative"), std::string::npos);
}

}  // namespace
}  // namespace mesh::upgrade_test
