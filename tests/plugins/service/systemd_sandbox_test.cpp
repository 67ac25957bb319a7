// The systemd sandbox itself: it must never touch the host's /tmp, must boot only its own target,
// must clean up its cgroups, and must work on both cgroup layouts.
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
