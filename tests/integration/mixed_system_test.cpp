// One declaration mixing all four providers, applied by the real `mesh-host apply` against real
// backends, in one place: a systemd booted in private namespaces (mesh_test_systemd), inside which
// mesh-host runs (nsenter), installing a package from a flat apt repository served on 127.0.0.1
// (mesh_test_apt_repo; the dpkg database is the host's own, only nox-mesh-test-* packages), and
// running a container through a private podman (mesh_test_podman) whose storage folder is kept
// visible inside the sandbox. Everything is combined: file + package + service + container.
//
// The scenario (issue 4, point 4): apply → everything applied in `requires`/`restart_on` order;
// change the service's configuration file → the service is restarted (MainPID changes, the report
// says `changed service:… (restart)`); break each resource by hand (edit the file, stop the
// service, remove the container, remove the package) → the next apply repairs and reports each.
//
// Label `system`: needs root, apt/dpkg-dev/python3, systemd and podman/runc/busybox; a missing
// piece skips with the reason. Takes the dpkg lock (RESOURCE_LOCK dpkg) like the package tests.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "apt_repo_fixture.h"
#include "podman_sandbox.h"
#include "systemd_sandbox.h"

namespace mesh::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kPackage = "nox-mesh-test-mixed";
constexpr const char* kUnit = "mesh-mixed.service";
constexpr const char* kContainer = "mesh-mixed-web";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

/// A JSON or TOML basic string.
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

/// The report line for `resource` with runs of spaces collapsed ("changed service:x (restart)"),
/// or "" when the report has none.
std::string report_line(const std::string& report, const std::string& resource) {
  std::istringstream lines(report);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string first, second;
    words >> first >> second;
    if (second != resource) continue;
    std::string out = first + " " + second;
    std::string rest;
    std::getline(words, rest);
    const auto start = rest.find_first_not_of(' ');
    if (start != std::string::npos) out += " " + rest.substr(start);
    return out;
  }
  return "";
}

class MixedDeclarationSystemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (installs packages, boots systemd, runs podman)";
    if (std::string why = apt_repo_skip_reason(); !why.empty()) GTEST_SKIP() << "apt: " << why;
    std::string why_not;
    podman_ = PodmanSandbox::create(why_not);
    if (!podman_) GTEST_SKIP() << "no podman sandbox on this machine: " << why_not;

    repo_ = std::make_unique<AptRepo>();
    repo_->add_package({kPackage, "1.0"});
    repo_->index();
    repo_->start();

    SystemdSandboxOptions options;
    options.name = "mesh-mixed";
    // mesh-host and the plugins (build tree), podman's storage, the apt repository's folder (its
    // APT_CONFIG, lists and archives): all stay visible inside at the same paths.
    options.keep_paths = {MESH_TEST_BUILD_DIR, podman_->dir().string(), repo_->dir()};
    sandbox_ = std::make_unique<SystemdSandbox>(options);
    dir_ = sandbox_->dir();
    conf_ = dir_ + "/mixed.conf";
    list_ = dir_ + "/mixed.list";
    log_ = dir_ + "/mixed.log";
    // The service needs the package's file and the configuration file; it prints both at start.
    sandbox_->write_unit(kUnit,
                         "[Unit]\nDescription=Nox Mesh mixed declaration test\nDefaultDependencies=no\n\n"
                         "[Service]\nExecStart=/bin/sh -c 'cat /usr/share/nox-mesh-test/" +
                             std::string(kPackage) + "/version " + conf_ +
                             " && exec /bin/sleep infinity'\nStandardOutput=append:" + log_ +
                             "\nStandardError=append:" + log_ + "\n\n[Install]\nWantedBy=" + sandbox_->target() + "\n");
    if (!sandbox_->start()) GTEST_SKIP() << "systemd sandbox: " << sandbox_->skipped_reason();
    write_host_config();
  }

  void TearDown() override {
    // Containers started inside the sandbox's PID namespace are removed from inside it (their
    // PIDs mean nothing outside), before the namespace goes.
    if (sandbox_ && sandbox_->running() && podman_) podman({"rm", "--all", "--force", "--time", "0"});
    if (sandbox_ && HasFailure()) std::fprintf(stderr, "sandbox log:\n%s\n", sandbox_->log().c_str());
    sandbox_.reset();
    podman_.reset();
    repo_.reset();  // purges nox-mesh-test-mixed
  }

  void write_host_config() {
    std::string toml = "[node]\nname = \"mixed-01\"\nstate_dir = " + quote(dir_ + "/state") + "\n\n" +
                       "[plugins]\ndir = " + quote(MESH_TEST_PLUGIN_DIR) + "\n\n[provider.container]\n";
    const sdk::Value config = podman_->provider_config("500ms");
    for (const auto& [key, value] : config.as_object()) {
      toml += key + " = ";
      if (value.is_array()) {
        toml += "[";
        for (std::size_t i = 0; i < value.as_array().size(); ++i)
          toml += (i ? ", " : "") + quote(value.as_array()[i].as_string());
        toml += "]\n";
      } else {
        toml += quote(value.as_string()) + "\n";
      }
    }
    toml += "\n[provider.service]\nsettle = \"500ms\"\ntimeout = \"30s\"\n";
    write_text(dir_ + "/host.toml", toml);
  }

  /// The declaration: the service first (its `restart_on` names the configuration file declared
  /// after it, which is not in its `requires`), the apt sources file the package requires, the
  /// package, the configuration file, the container.
  void write_declaration(const std::string& greeting) {
    const std::string sources = read_text(repo_->sources_file());
    const std::string decl =
        "{\"resources\": [\n"
        "  {\"type\": \"service\", \"id\": \"" + std::string(kUnit) + "\",\n"
        "   \"properties\": {\"running\": true, \"enabled\": true, \"settle\": \"500ms\",\n"
        "                  \"restart_on\": [" + quote("file:" + conf_) + ", \"package:" + kPackage + "\"]},\n"
        "   \"requires\": [\"package:" + kPackage + "\"]},\n"
        "  {\"type\": \"file\", \"id\": " + quote(list_) + ", \"properties\": {\"content\": " + quote(sources) +
        ", \"mode\": \"0644\"}},\n"
        "  {\"type\": \"package\", \"id\": \"" + kPackage + "\", \"properties\": {\"version\": \"1.0\", \"source\": " +
        quote(list_) + "},\n   \"requires\": [" + quote("file:" + list_) + "]},\n"
        "  {\"type\": \"file\", \"id\": " + quote(conf_) + ", \"properties\": {\"content\": " +
        quote("greeting = " + greeting + "\n") + ", \"mode\": \"0644\"}},\n"
        "  {\"type\": \"container\", \"id\": \"" + kContainer + "\", \"properties\": {\"image\": " +
        quote(podman_->image().reference) + ", \"command\": [\"sleep\", \"100000\"]}}\n"
        "]}\n";
    write_text(dir_ + "/declaration.json", decl);
  }

  /// `mesh-host apply` inside the sandbox, with the four providers; its report is echoed.
  SandboxRun apply() {
    auto r = sandbox_->run({std::string(MESH_TEST_BIN_DIR) + "/mesh-host", "apply", dir_ + "/declaration.json",
                          "--config", dir_ + "/host.toml", "--state-dir", dir_ + "/state", "--plugin-dir",
                          MESH_TEST_PLUGIN_DIR, "--load", "file", "--load", "package", "--load", "service",
                          "--load", "container"},
                         5min);
    std::printf("mesh-host apply (exit %d):\n%s", r.exit_code, r.out.c_str());
    return r;
  }

  SandboxRun podman(std::vector<std::string> args) {
    std::vector<std::string> argv = {podman_->podman()};
    argv.insert(argv.end(), podman_->global_args().begin(), podman_->global_args().end());
    argv.insert(argv.end(), args.begin(), args.end());
    return sandbox_->run(argv, 2min);
  }

  std::string main_pid() { return trim(sandbox_->systemctl({"show", "-p", "MainPID", "--value", kUnit}).out); }
  std::string active_state() { return trim(sandbox_->systemctl({"is-active", kUnit}).out); }
  std::string container_state() {
    auto r = podman({"container", "inspect", "--format", "{{.State.Status}}", kContainer});
    return r.exit_code == 0 ? trim(r.out) : "missing";
  }

  std::unique_ptr<PodmanSandbox> podman_;
  std::unique_ptr<AptRepo> repo_;
  std::unique_ptr<SystemdSandbox> sandbox_;
  std::string dir_, conf_, list_, log_;
};

#define ASSERT_APPLIED(run)                                                                      \
  ASSERT_EQ((run).exit_code, 0) << "mesh-host apply failed:\n" << (run).out << "\nstderr:\n" << (run).err

TEST_F(MixedDeclarationSystemTest, FilePackageServiceContainerAppliedRestartedAndRepaired) {
  const std::string svc = std::string("service:") + kUnit;
  const std::string pkg = std::string("package:") + kPackage;
  const std::string ctr = std::string("container:") + kContainer;
  const std::string conf = "file:" + conf_;
  const std::string list = "file:" + list_;

  // 1. Everything from nothing, in order: sources file, package, config file, service (after
  //    its restart_on entry declared later), container.
  write_declaration("v1");
  auto first = apply();
  ASSERT_APPLIED(first);
  {
    std::vector<std::string> order;
    std::istringstream lines(first.out);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string outcome, resource;
      words >> outcome >> resource;
      if (resource.find(':') != std::string::npos) order.push_back(outcome + " " + resource);
    }
    EXPECT_EQ(order, (std::vector<std::string>{"changed " + list, "changed " + pkg, "changed " + conf,
                                               "changed " + svc, "changed " + ctr}))
        << first.out;
  }
  EXPECT_NE(first.out.find("applied: 5 changed, 0 removed, 0 unchanged"), std::string::npos) << first.out;
  EXPECT_EQ(AptRepo::installed_version(kPackage), "1.0");
  EXPECT_EQ(active_state(), "active");
  EXPECT_EQ(container_state(), "running");
  EXPECT_TRUE(fs::is_symlink(sandbox_->unit_dir() + "/" + sandbox_->target() + ".wants/" + kUnit));  // enabled
  EXPECT_NE(read_text(log_).find("greeting = v1"), std::string::npos) << read_text(log_);
  const std::string pid1 = main_pid();
  ASSERT_NE(pid1, "0");

  // 2. Again: nothing to do, no restart.
  auto same = apply();
  ASSERT_APPLIED(same);
  EXPECT_NE(same.out.find("applied: 0 changed, 0 removed, 5 unchanged"), std::string::npos) << same.out;
  EXPECT_EQ(main_pid(), pid1);

  // 3. The configuration changes: the file is written, then the service restarted.
  write_declaration("v2");
  auto changed = apply();
  ASSERT_APPLIED(changed);
  EXPECT_EQ(report_line(changed.out, conf), "changed " + conf + " (properties.content)") << changed.out;
  EXPECT_EQ(report_line(changed.out, svc), "changed " + svc + " (restart)") << changed.out;
  EXPECT_EQ(report_line(changed.out, pkg), "unchanged " + pkg) << changed.out;
  EXPECT_EQ(report_line(changed.out, ctr), "unchanged " + ctr) << changed.out;
  EXPECT_NE(changed.out.find("applied: 2 changed, 0 removed, 3 unchanged"), std::string::npos) << changed.out;
  const std::string pid2 = main_pid();
  EXPECT_NE(pid2, pid1);
  EXPECT_NE(pid2, "0");
  EXPECT_EQ(active_state(), "active");
  EXPECT_NE(read_text(log_).find("greeting = v2"), std::string::npos) << read_text(log_);

  // 4. Break each by hand.
  write_text(conf_, "greeting = tampered\n");
  ASSERT_EQ(sandbox_->systemctl({"stop", kUnit}).exit_code, 0);
  ASSERT_EQ(podman({"rm", "--force", "--time", "0", kContainer}).exit_code, 0);
  auto removed = run_program({"dpkg", "--remove", kPackage});
  ASSERT_EQ(removed.exit_code, 0) << removed.out;
  ASSERT_EQ(AptRepo::installed_version(kPackage), "");
  ASSERT_EQ(container_state(), "missing");
  ASSERT_NE(active_state(), "active");

  auto repaired = apply();
  ASSERT_APPLIED(repaired);
  EXPECT_EQ(report_line(repaired.out, list), "unchanged " + list) << repaired.out;
  EXPECT_EQ(report_line(repaired.out, conf), "changed " + conf + " (properties.content)") << repaired.out;
  EXPECT_EQ(report_line(repaired.out, pkg).rfind("changed " + pkg + " (", 0), 0u) << repaired.out;
  EXPECT_EQ(report_line(repaired.out, svc), "changed " + svc + " (properties.running, restart)") << repaired.out;
  EXPECT_EQ(report_line(repaired.out, ctr).rfind("changed " + ctr, 0), 0u) << repaired.out;
  EXPECT_NE(repaired.out.find("applied: 4 changed, 0 removed, 1 unchanged"), std::string::npos) << repaired.out;
  EXPECT_EQ(read_text(conf_), "greeting = v2\n");
  EXPECT_EQ(AptRepo::installed_version(kPackage), "1.0");
  EXPECT_EQ(active_state(), "active");
  EXPECT_NE(main_pid(), pid2);
  EXPECT_EQ(container_state(), "running");

  // 5. And once repaired, nothing more to do.
  auto after = apply();
  ASSERT_APPLIED(after);
  EXPECT_NE(after.out.find("applied: 0 changed, 0 removed, 5 unchanged"), std::string::npos) << after.out;
}

}  // namespace
}  // namespace mesh::testing
