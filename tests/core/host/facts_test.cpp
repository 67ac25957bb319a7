// The briefing's facts (core/host/src/facts.cpp, decision record 54), read from a temporary root
// and a temporary PATH of stand-in programs, so that every source and its fallback is exercised
// on any machine.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <fstream>
#include <string>

#include "mesh/common/json.h"
#include "mesh/host/briefing.h"
#include "mesh/host/facts.h"
#include "mesh/testing/temp_dir.h"

namespace mesh::host {
namespace {

namespace fs = std::filesystem;
using mesh::testing::TempDir;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A stand-in program in `bin`: a shell script printing `out` and exiting with `code`.
void program(const fs::path& bin, const std::string& name, const std::string& body) {
  write(bin / name, "#!/bin/sh\n" + body + "\n");
  ::chmod((bin / name).c_str(), 0755);
}

std::string fact(const Facts& f, const std::string& key) {
  auto it = f.find(key);
  return it == f.end() ? "(absent)" : it->second;
}

struct utsname uname_now() {
  struct utsname u {};
  EXPECT_EQ(::uname(&u), 0);
  return u;
}

const char* kDebian =
    "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"
    "NAME=\"Debian GNU/Linux\"\n"
    "VERSION_ID=\"12\"\n"
    "VERSION=\"12 (bookworm)\"\n"
    "VERSION_CODENAME=bookworm\n"
    "ID=debian\n"
    "HOME_URL=\"https://www.debian.org/\"\n";

TEST(HostFactsTest, OsReleaseGivesIdVersionAndCodenameAndNoProgramsGiveNone) {
  TempDir root, bin;
  write(root.path() / "etc/os-release", kDebian);
  auto p = probe_machine({root.path().string(), bin.path().string(), 2000});
  EXPECT_EQ(fact(p.facts, "os.id"), "debian");
  EXPECT_EQ(fact(p.facts, "os.version_id"), "12");
  EXPECT_EQ(fact(p.facts, "os.codename"), "bookworm");
  EXPECT_EQ(p.os_pretty, "Debian GNU/Linux 12 (bookworm)");
  EXPECT_EQ(p.os_release_path, (root.path() / "etc/os-release").string());
  // Nothing on the path: no package manager, no container engine; the architecture falls back
  // to the kernel's machine in dpkg's spelling; the kernel is uname's release.
  const auto u = uname_now();
  EXPECT_EQ(fact(p.facts, "package_manager"), "none");
  EXPECT_EQ(fact(p.facts, "container_engine"), "none");
  EXPECT_EQ(fact(p.facts, "service_manager"), "none");
  EXPECT_EQ(fact(p.facts, "arch"), dpkg_arch(u.machine));
  EXPECT_EQ(fact(p.facts, "kernel"), u.release);
  EXPECT_EQ(p.facts.size(), 8u);
  EXPECT_TRUE(p.container_detail.empty());
}

TEST(HostFactsTest, UsrLibOsReleaseIsTheFallbackAndNoneLeavesOsFactsAbsent) {
  TempDir root, bin, empty;
  write(root.path() / "usr/lib/os-release", "ID='alpine'\nVERSION_ID=3.19.1\n");
  auto p = probe_machine({root.path().string(), bin.path().string(), 2000});
  EXPECT_EQ(fact(p.facts, "os.id"), "alpine");
  EXPECT_EQ(fact(p.facts, "os.version_id"), "3.19.1");
  EXPECT_EQ(fact(p.facts, "os.codename"), "(absent)") << "never an empty string";
  EXPECT_EQ(p.os_release_path, (root.path() / "usr/lib/os-release").string());

  auto none = probe_machine({empty.path().string(), bin.path().string(), 2000});
  EXPECT_EQ(none.facts.count("os.id"), 0u);
  EXPECT_EQ(none.facts.count("os.version_id"), 0u);
  EXPECT_EQ(none.facts.count("os.codename"), 0u);
  EXPECT_TRUE(none.os_pretty.empty());
  EXPECT_TRUE(none.os_release_path.empty());
}

TEST(HostFactsTest, UnprintableOrEmptyOsReleaseValuesAreLeftOut) {
  TempDir root, bin;
  write(root.path() / "etc/os-release",
        "ID=\"\"\nVERSION_ID=\"1\t2\"\nVERSION_CODENAME=" + std::string(300, 'x') + "\n");
  auto p = probe_machine({root.path().string(), bin.path().string(), 2000});
  EXPECT_EQ(p.facts.count("os.id"), 0u);
  EXPECT_EQ(p.facts.count("os.version_id"), 0u);
  EXPECT_EQ(p.facts.count("os.codename"), 0u);
}

TEST(HostFactsTest, AptDpkgAndPodmanOnThePath) {
  TempDir root, bin;
  program(bin.path(), "apt-get", "exit 0");
  program(bin.path(), "dpkg", "[ \"$1\" = --print-architecture ] && echo arm64");
  program(bin.path(), "podman", "echo 4.3.1");
  program(bin.path(), "docker", "echo 20.10.24");
  write(root.path() / "run/systemd/system/.keep", "");
  auto p = probe_machine({root.path().string(), bin.path().string(), 2000});
  EXPECT_EQ(fact(p.facts, "package_manager"), "apt");
  EXPECT_EQ(fact(p.facts, "arch"), "arm64") << "dpkg's answer wins over the kernel's machine";
  EXPECT_EQ(fact(p.facts, "container_engine"), "podman") << "podman is asked first";
  EXPECT_EQ(p.container_detail, "podman 4.3.1");
  EXPECT_EQ(fact(p.facts, "service_manager"), "systemd");
  EXPECT_TRUE(p.apt && p.dpkg && p.systemd);
}

TEST(HostFactsTest, DpkgAloneIsNotAptAndADpkgThatFailsFallsBackToTheMachine) {
  TempDir root, bin;
  program(bin.path(), "dpkg", "exit 3");
  auto p = probe_machine({root.path().string(), bin.path().string(), 2000});
  EXPECT_EQ(fact(p.facts, "package_manager"), "none");
  EXPECT_TRUE(p.dpkg);
  EXPECT_FALSE(p.apt);
  EXPECT_EQ(fact(p.facts, "arch"), dpkg_arch(uname_now().machine));
}

TEST(HostFactsTest, APodmanThatDoesNotAnswerGivesWayToDocker) {
  TempDir root, bin;
  program(bin.path(), "podman", "echo 'cannot connect' >&2; exit 125");
  program(bin.path(), "docker", "echo 20.10.24");
  auto p = probe_machine({root.path().string(), bin.path().string(), 2000});
  EXPECT_EQ(fact(p.facts, "container_engine"), "docker");
  EXPECT_EQ(p.container_detail, "docker 20.10.24");
}

TEST(HostFactsTest, AHangingEngineIsKilledAndCountsAsNone) {
  TempDir root, bin;
  program(bin.path(), "podman", "exec sleep 30");
  auto p = probe_machine({root.path().string(), bin.path().string(), 1000});
  EXPECT_EQ(fact(p.facts, "container_engine"), "none");
  EXPECT_EQ(p.container_detail, "podman installed but `podman version` did not answer within 1 s");
}

TEST(HostFactsTest, OsReleaseQuoting) {
  EXPECT_EQ(unquote_os_release("debian"), "debian");
  EXPECT_EQ(unquote_os_release("\"Debian GNU/Linux\""), "Debian GNU/Linux");
  EXPECT_EQ(unquote_os_release("'single quoted'"), "single quoted");
  EXPECT_EQ(unquote_os_release(R"("say \"hi\" \$HOME \\ \`x\`")"), R"(say "hi" $HOME \ `x`)");
  EXPECT_EQ(unquote_os_release("12  "), "12");
  EXPECT_EQ(unquote_os_release("\""), "\"");
}

TEST(HostFactsTest, DpkgArchitectureNames) {
  EXPECT_EQ(dpkg_arch("x86_64"), "amd64");
  EXPECT_EQ(dpkg_arch("aarch64"), "arm64");
  EXPECT_EQ(dpkg_arch("armv7l"), "armhf");
  EXPECT_EQ(dpkg_arch("i686"), "i386");
  EXPECT_EQ(dpkg_arch("ppc64le"), "ppc64el");
  EXPECT_EQ(dpkg_arch("s390x"), "s390x");
  EXPECT_EQ(dpkg_arch("riscv64"), "riscv64");
  EXPECT_EQ(dpkg_arch("weird9"), "weird9");
}

TEST(HostFactsTest, TheBriefingRequestCarriesTheFactsAndTheInfoLinesAgreeWithThem) {
  TempDir root, bin, state;
  write(root.path() / "etc/os-release", kDebian);
  program(bin.path(), "apt-get", "exit 0");
  program(bin.path(), "dpkg", "echo amd64");
  HostConfig cfg;
  cfg.node = "web-01";
  cfg.state_dir = state.path().string();
  cfg.min_free_mib = 0;
  Facts facts;
  auto lines = run_briefing_checks(cfg, nullptr, &facts, {root.path().string(), bin.path().string(), 2000});
  EXPECT_EQ(fact(facts, "os.id"), "debian");
  EXPECT_EQ(fact(facts, "package_manager"), "apt");
  std::map<std::string, std::string> detail;
  for (const auto& l : lines) detail[l.check] = l.detail;
  EXPECT_EQ(detail["os"].rfind("Debian GNU/Linux 12 (bookworm), kernel ", 0), 0u) << detail["os"];
  EXPECT_EQ(detail["package_manager"], "apt and dpkg present");
  EXPECT_EQ(detail["service_manager"], "systemd not running");
  EXPECT_EQ(detail["container_engine"], "none found (podman, docker)");

  auto body = common::parse_json(briefing_request_json("web-01", lines, 1, nullptr, &facts));
  ASSERT_TRUE(body) << body.error().describe();
  const sdk::Value* f = body->find("facts");
  ASSERT_TRUE(f && f->is_object()) << body->to_json();
  EXPECT_EQ(f->get_string("os.id"), "debian");
  EXPECT_EQ(f->get_string("os.codename"), "bookworm");
  EXPECT_EQ(f->get_string("arch"), "amd64");
  EXPECT_EQ(f->as_object().size(), facts.size());
  // Without facts (the local view, older callers): no field.
  auto plain = common::parse_json(briefing_request_json("web-01", lines, 1));
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->find("facts"), nullptr);
}

TEST(HostFactsTest, TheBriefingTextShowsTheFacts) {
  Facts facts{{"arch", "amd64"}, {"os.id", "debian"}};
  const std::string t = briefing_text("web-01", local_briefing("web-01", {{"disk", "pass", "9 MiB free"}}, &facts));
  EXPECT_NE(t.find("  pass   disk: 9 MiB free\n  facts  arch=amd64, os.id=debian\neligible: yes"), std::string::npos) << t;
  // No facts (a control plane from before them answered): no line.
  const std::string bare = briefing_text("web-01", local_briefing("web-01", {}));
  EXPECT_EQ(bare.find("facts"), std::string::npos) << bare;
}

}  // namespace
}  // namespace mesh::host
