// The systemd sandbox itself: it must never touch the host's /tmp, must boot only its own target,
// must clean up its cgroups, and must work on both cgroup layouts; with --overlay, dpkg inside
// must never change the machine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "systemd_sandbox.h"

namespace mesh::testing {
namespace {

namespace fs = std::filesystem;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Any directory called `name` in the cgroup trees (the script makes one per hierarchy, directly
// under the caller's own cgroup).
std::string find_cgroup(const std::string& name) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it("/sys/fs/cgroup",
                                           fs::directory_options::skip_permission_denied, ec),
       end;
       it != end; it.increment(ec)) {
    if (ec) break;
    if (it.depth() > 6) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->path().filename() == name) return it->path().string();
  }
  return {};
}

std::string service_unit(const SystemdSandbox& sb, const std::string& name,
                         const std::string& exec_start) {
  return "[Unit]\nDefaultDependencies=no\n[Service]\nExecStart=" + exec_start +
         "\nStandardOutput=append:" + sb.dir() + "/" + name + ".log\n";
}

TEST(ServiceProviderSandboxTest, HostTmpSurvivesAndTheSandboxSeesItsOwn) {
  // A sentinel in the host's real /tmp: booting systemd the wrong way (default.target runs
  // tmpfiles) would delete it.
  std::string sentinel = "/tmp/mesh-sandbox-sentinel-XXXXXX";
  const int fd = ::mkstemp(sentinel.data());
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "keep me\n", 8), 8);
  ::close(fd);
  const std::string inside_only = "/tmp/mesh-sandbox-inside-" + std::to_string(::getpid());
  std::string cgroup;
  {
    SystemdSandbox sb;
    sb.write_unit("hello.service",
                  service_unit(sb, "hello", "/bin/sh -c 'echo hello from the sandbox; exec sleep infinity'"));
    if (!sb.start()) {
      fs::remove(sentinel);
      GTEST_SKIP() << sb.skipped_reason();
    }
    cgroup = sb.cgroup_name();
    // PID 1 inside is systemd, in a container of ours.
    EXPECT_EQ(trim(sb.run({"cat", "/proc/1/comm"}).out), "systemd");
    EXPECT_EQ(trim(sb.run({"cat", "/run/systemd/container"}).out), "nox-mesh-test");
    // /tmp inside is private: the host's sentinel is hidden, the test's folder is visible, and
    // what is written to /tmp inside never reaches the host.
    EXPECT_EQ(sb.run({"test", "-e", sentinel}).exit_code, 1);
    EXPECT_EQ(sb.run({"test", "-d", sb.dir()}).exit_code, 0);
    EXPECT_EQ(sb.run({"touch", inside_only}).exit_code, 0);
    EXPECT_FALSE(fs::exists(inside_only));
    // /etc/systemd/system inside is the test's unit folder.
    EXPECT_EQ(sb.run({"test", "-f", "/etc/systemd/system/" + sb.target()}).exit_code, 0);
    // Only the sandbox's own target was started: nothing of the host's default target.
    EXPECT_EQ(trim(sb.systemctl({"is-active", sb.target()}).out), "active");
    EXPECT_EQ(trim(sb.systemctl({"is-active", "multi-user.target"}).out), "inactive");
    EXPECT_EQ(trim(sb.systemctl({"is-active", "systemd-tmpfiles-setup.service"}).out), "inactive");
    // A unit logs to a file in the test's folder (there is no journald).
    auto started = sb.systemctl({"start", "hello.service"});
    EXPECT_EQ(started.exit_code, 0) << started.err;
    std::string logged;
    for (int i = 0; i < 50 && logged.empty(); ++i) {
      std::ifstream in(sb.dir() + "/hello.log");
      std::getline(in, logged);
      if (logged.empty()) ::usleep(20000);
    }
    EXPECT_EQ(logged, "hello from the sandbox");
    EXPECT_FALSE(find_cgroup(cgroup).empty()) << "the sandbox's cgroup " << cgroup;
    // systemd lives in that child cgroup, never in the caller's own.
    const std::string cgroups = sb.run({"cat", "/proc/1/cgroup"}).out;
    EXPECT_NE(cgroups.find(cgroup + "/init.scope"), std::string::npos) << cgroups;
    EXPECT_TRUE(sb.stop()) << "not a clean poweroff: " << sb.log();
    EXPECT_NE(sb.log().find("powered off"), std::string::npos) << sb.log();
  }
  EXPECT_TRUE(fs::exists(sentinel)) << "the host's /tmp lost " << sentinel;
  std::ifstream in(sentinel);
  std::string content;
  std::getline(in, content);
  EXPECT_EQ(content, "keep me");
  fs::remove(sentinel);
  EXPECT_EQ(find_cgroup(cgroup), "") << "cgroup left behind";
}

TEST(ServiceProviderSandboxTest, BootsOnTheUnifiedCgroupLayout) {
  // Stock Debian 12 mounts only cgroup2 on /sys/fs/cgroup. Recreate that in a private mount
  // namespace (on a unified host this changes nothing).
  SystemdSandboxOptions options;
  options.launch_prefix_for_test = {
      "unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
      "umount -R /sys/fs/cgroup 2>/dev/null; "
      "mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup && exec \"$@\"",
      "sh"};
  SystemdSandbox sb(options);
  sb.write_unit("sleeper.service", service_unit(sb, "sleeper", "/bin/sleep infinity"));
  if (!sb.start()) GTEST_SKIP() << sb.skipped_reason();
  EXPECT_NE(sb.log().find("cgroup layout: unified"), std::string::npos) << sb.log();
  EXPECT_EQ(trim(sb.run({"stat", "-fc", "%T", "/sys/fs/cgroup"}).out), "cgroup2fs");
  auto started = sb.systemctl({"start", "sleeper.service"});
  EXPECT_EQ(started.exit_code, 0) << started.err;
  EXPECT_EQ(trim(sb.systemctl({"is-active", "sleeper.service"}).out), "active");
  // systemd lives in the sandbox's own child cgroup (seen from the host's cgroup namespace).
  const std::string cgroup = sb.cgroup_name();
  EXPECT_NE(sb.run({"cat", "/proc/1/cgroup"}).out.find("/" + cgroup + "/init.scope"),
            std::string::npos);
  EXPECT_TRUE(sb.stop()) << sb.log();
  EXPECT_EQ(find_cgroup(cgroup), "") << "cgroup left behind";
}

TEST(ServiceProviderSandboxTest, RefusesToBootAHostTarget) {
  SystemdSandbox sb;
  // Even when the test folder has a file of that name: the script refuses systemd's own targets.
  sb.write_unit("multi-user.target", "[Unit]\nDefaultDependencies=no\n");
  auto r = run_process({"/bin/bash", SystemdSandbox::script_path(), sb.dir(), "multi-user.target"},
                       std::chrono::seconds(10));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("is a unit of the host"), std::string::npos) << r.err;
  r = run_process({"/bin/bash", SystemdSandbox::script_path(), sb.dir(), "nope.target"},
                  std::chrono::seconds(10));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  r = run_process({"/bin/bash", SystemdSandbox::script_path(), "relative", "x.target"},
                  std::chrono::seconds(10));
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// --overlay: what dpkg and anything else writes to /usr, /etc or /var inside lands in the
// overlay's upper folders, never on the machine, and stays there across a reboot of the sandbox.
TEST(ServiceProviderSandboxTest, OverlayKeepsDpkgChangesInsideAndAcrossAReboot) {
  SystemdSandboxOptions options;
  options.overlay = true;
  SystemdSandbox sb(options);
  const std::string probe = "nox-mesh-overlay-probe-" + std::to_string(::getpid());
  const auto machine_arches = run_process({"dpkg", "--print-foreign-architectures"}, std::chrono::seconds(10));
  ASSERT_EQ(machine_arches.exit_code, 0) << machine_arches.err;
  ASSERT_EQ(machine_arches.out.find("mips64el"), std::string::npos) << "the machine itself has mips64el";
  const std::string machine_status = slurp("/var/lib/dpkg/status");
  if (!sb.start()) GTEST_SKIP() << sb.skipped_reason();

  auto r = sb.run({"findmnt", "-rn", "-o", "TARGET,FSTYPE"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* tree : {"/usr overlay", "/etc overlay", "/var overlay"})
    EXPECT_NE(r.out.find(tree), std::string::npos) << tree << " not mounted inside:\n" << r.out;
  // A change of dpkg's own database, and files in each tree.
  r = sb.run({"dpkg", "--add-architecture", "mips64el"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = sb.run({"/bin/sh", "-c", "touch /usr/share/" + probe + " /etc/" + probe + " /var/lib/" + probe});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = sb.run({"dpkg", "--print-foreign-architectures"});
  EXPECT_NE(r.out.find("mips64el"), std::string::npos) << r.out << r.err;

  // The machine saw none of it.
  const auto after = run_process({"dpkg", "--print-foreign-architectures"}, std::chrono::seconds(10));
  EXPECT_EQ(after.out, machine_arches.out);
  EXPECT_EQ(slurp("/var/lib/dpkg/status"), machine_status);
  for (const char* tree : {"/usr/share/", "/etc/", "/var/lib/"})
    EXPECT_FALSE(fs::exists(std::string(tree) + probe)) << tree << probe << " appeared on the machine";
  // It is all in the upper folders, readable from outside.
  EXPECT_TRUE(fs::exists(sb.overlay_dir() + "/usr/upper/share/" + probe));
  EXPECT_TRUE(fs::exists(sb.overlay_dir() + "/etc/upper/" + probe));
  EXPECT_TRUE(fs::exists(sb.overlay_dir() + "/var/upper/lib/" + probe));
  EXPECT_NE(slurp(sb.overlay_dir() + "/var/upper/lib/dpkg/arch").find("mips64el"), std::string::npos);

  // A reboot (stop, start with the same folder) keeps it.
  ASSERT_TRUE(sb.stop()) << sb.log();
  ASSERT_TRUE(sb.start()) << sb.skipped_reason();
  r = sb.run({"dpkg", "--print-foreign-architectures"});
  EXPECT_NE(r.out.find("mips64el"), std::string::npos) << r.out << r.err;
  r = sb.run({"test", "-e", "/usr/share/" + probe});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(sb.stop()) << sb.log();
}

TEST(ServiceProviderSandboxTest, RefusesAnOverlayFolderInsideATreeItCovers) {
  SystemdSandbox sb;
  for (const std::string bad : {"/var/tmp/mesh-overlay", "/usr/local/x", "/etc"}) {
    auto r = run_process({"/bin/bash", SystemdSandbox::script_path(), "--overlay", bad, sb.dir(),
                          sb.target()},
                         std::chrono::seconds(10));
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("is inside"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists("/var/tmp/mesh-overlay"));
  auto r = run_process({"/bin/bash", SystemdSandbox::script_path(), "--overlay", "relative/x", sb.dir(),
                        sb.target()},
                       std::chrono::seconds(10));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("absolute"), std::string::npos) << r.err;
  r = run_process({"/bin/bash", SystemdSandbox::script_path(), "--bogus", sb.dir(), sb.target()},
                  std::chrono::seconds(10));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("unknown option --bogus"), std::string::npos) << r.err;
}

TEST(ServiceProviderSandboxTest, SaysWhyWhenItCannotStart) {
  SystemdSandboxOptions options;
  options.launch_prefix_for_test = {"/bin/sh", "-c", "echo 'unshare: unshare failed: Operation not permitted' >&2; exit 1", "sh"};
  SystemdSandbox sb(options);
  EXPECT_FALSE(sb.start());
  if (::geteuid() != 0) {
    EXPECT_NE(sb.skipped_reason().find("needs root"), std::string::npos) << sb.skipped_reason();
    return;
  }
  EXPECT_NE(sb.skipped_reason().find("could not start (exit 1)"), std::string::npos)
      << sb.skipped_reason();
  EXPECT_NE(sb.skipped_reason().find("Operation not permitted"), std::string::npos)
      << sb.skipped_reason();
  EXPECT_FALSE(sb.running());
}

}  // namespace
}  // namespace mesh::testing
