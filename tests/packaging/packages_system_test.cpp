// The Debian packages, built with cpack from this build tree in the test (decision 77):
//  - their names, Depends: (dpkg-shlibdeps), stripped binaries, copyright, changelog, conffiles,
//    and lintian with no errors;
//  - install, upgrade, remove and purge of each with dpkg inside a real systemd whose /usr, /etc
//    and /var are overlays (systemd-sandbox.sh --overlay): nothing is started on install, the
//    host is never stopped or restarted on upgrade, a running control plane is restarted into the
//    new version and migrates its store, a changed conffile is kept, remove stops both, purge
//    removes the host's state and keeps the control plane's.
// The machine's own package database is checked to be unchanged.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "systemd_sandbox.h"
#include "mesh/testing/process.h"

namespace mesh::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

const std::string kVersion = MESH_TEST_PROJECT_VERSION;
// The release the upgrade starts from: the built packages repacked with a lower version (and, in
// nox-mesh-control, the store plugin of a release one schema version older).
const std::string kOldVersion = kVersion + "~prev1";
const std::vector<std::string> kPackages = {"nox-mesh-common", "nox-mesh-host", "nox-mesh-control",
                                            "nox-mesh", "nox-mesh-sdk"};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string show(const SandboxRun& r) {
  return "exit " + std::to_string(r.exit_code) + (r.timed_out ? " (timed out)" : "") + "\nstdout:\n" +
         r.out + "\nstderr:\n" + r.err;
}

SandboxRun host(const std::vector<std::string>& argv, std::chrono::milliseconds timeout = seconds(120)) {
  return run_process(argv, timeout);
}

SandboxRun host_sh(const std::string& script, std::chrono::milliseconds timeout = seconds(120)) {
  return run_process({"/bin/sh", "-c", script}, timeout);
}

// The packages, made once per test process in a folder of its own (never build/packages).
class PackagesSystemTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = "/tmp/mesh-packages-XXXXXX";
    if (!::mkdtemp(tmpl.data())) return;
    ::chmod(tmpl.c_str(), 0755);
    dir_ = tmpl;
    auto r = host({MESH_TEST_CPACK, "-G", "DEB", "--config", std::string(MESH_TEST_BUILD_DIR) + "/CPackConfig.cmake",
                   "-B", dir_ + "/packages"},
                  seconds(500));
    cpack_output_ = show(r);
    if (r.exit_code != 0) return;
    for (const auto& p : kPackages) {
      const std::string arch = p == "nox-mesh-sdk" ? "all" : native_arch();
      const std::string file = dir_ + "/packages/" + p + "_" + kVersion + "_" + arch + ".deb";
      if (fs::exists(file)) debs_[p] = file;
    }
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  void SetUp() override {
    ASSERT_FALSE(dir_.empty()) << "cannot make a folder under /tmp";
    ASSERT_EQ(debs_.size(), kPackages.size()) << "cpack did not make the five packages:\n" << cpack_output_;
  }

  static std::string native_arch() {
    static const std::string arch = trim(host({"dpkg", "--print-architecture"}).out);
    return arch;
  }

  // The built package `deb` repacked as `version` into `out`, its nox-mesh-common dependency
  // moved to that version, and the files in `replace` (path inside the package -> file) swapped.
  static std::string repack(const std::string& deb, const std::string& package, const std::string& version,
                            const std::string& out, const std::map<std::string, std::string>& replace = {}) {
    const std::string tree = out + "/tree-" + package;
    fs::remove_all(tree);
    auto r = host({"dpkg-deb", "-R", deb, tree});
    if (r.exit_code != 0) return "";
    std::string control = slurp(tree + "/DEBIAN/control");
    control = std::regex_replace(control, std::regex("\nVersion: [^\n]*"), "\nVersion: " + version);
    control = std::regex_replace(control, std::regex("nox-mesh-common \\(>= [^)]*\\)"),
                                 "nox-mesh-common (>= " + version + ")");
    std::ofstream(tree + "/DEBIAN/control", std::ios::trunc) << control;
    for (const auto& [path, file] : replace) {
      fs::copy_file(file, tree + path, fs::copy_options::overwrite_existing);
      // md5sums: the swapped file's line.
      const std::string rel = path.substr(1);
      r = host_sh("cd '" + tree + "' && sed -i '\\|  " + rel + "$|d' DEBIAN/md5sums && md5sum '" + rel +
                  "' >> DEBIAN/md5sums");
      if (r.exit_code != 0) return "";
    }
    const std::string arch = package == "nox-mesh-sdk" ? "all" : native_arch();
    const std::string result = out + "/" + package + "_" + version + "_" + arch + ".deb";
    r = host({"dpkg-deb", "--root-owner-group", "-b", tree, result});
    fs::remove_all(tree);
    return r.exit_code == 0 ? result : "";
  }

  static inline std::string dir_;
  static inline std::string cpack_output_;
  static inline std::map<std::string, std::string> debs_;
};

// --- the files themselves -------------------------------------------------------------------------

TEST_F(PackagesSystemTest, FiveDebianPackagesWithShlibsDependsStrippedDocsAndNoLintianErrors) {
  for (const auto& [package, deb] : debs_) {
    SCOPED_TRACE(package);
    // NAME_VERSION_ARCH.deb (checked in SetUpTestSuite) and the same fields inside.
    auto f = host({"dpkg-deb", "-f", deb, "Package", "Version", "Architecture", "Depends", "Maintainer", "Description"});
    ASSERT_EQ(f.exit_code, 0) << show(f);
    EXPECT_NE(f.out.find("Package: " + package + "\n"), std::string::npos) << f.out;
    EXPECT_NE(f.out.find("Version: " + kVersion + "\n"), std::string::npos) << f.out;
    auto contents = host({"dpkg-deb", "-c", deb});
    ASSERT_EQ(contents.exit_code, 0) << show(contents);
    EXPECT_NE(contents.out.find("./usr/share/doc/" + package + "/copyright"), std::string::npos) << contents.out;
    EXPECT_NE(contents.out.find("./usr/share/doc/" + package + "/changelog.gz"), std::string::npos) << contents.out;
    if (package == "nox-mesh-sdk") {
      EXPECT_NE(f.out.find("Architecture: all"), std::string::npos) << f.out;
      EXPECT_NE(contents.out.find("./usr/lib/cmake/NoxMeshSdk/MeshAddPlugin.cmake"), std::string::npos);
      EXPECT_NE(contents.out.find("./usr/include/mesh/sdk/provider.h"), std::string::npos);
      continue;
    }
    // Depends: computed from the binaries (libc6 and libstdc++6 only come from dpkg-shlibdeps).
    EXPECT_TRUE(std::regex_search(f.out, std::regex("Depends: .*libc6 \\(>= [0-9.]+\\)"))) << f.out;
    EXPECT_TRUE(std::regex_search(f.out, std::regex("Depends: .*libstdc\\+\\+6 \\(>= [0-9.]+\\)"))) << f.out;
    if (package != "nox-mesh-common") {
      EXPECT_NE(f.out.find("nox-mesh-common (>= " + kVersion + ")"), std::string::npos) << f.out;
    }
  }
  EXPECT_TRUE(std::regex_search(host({"dpkg-deb", "-f", debs_["nox-mesh-common"], "Depends"}).out,
                                std::regex("libnats")));
  EXPECT_TRUE(std::regex_search(host({"dpkg-deb", "-f", debs_["nox-mesh-host"], "Depends"}).out,
                                std::regex("libsystemd0")));
  EXPECT_TRUE(std::regex_search(host({"dpkg-deb", "-f", debs_["nox-mesh-control"], "Depends"}).out,
                                std::regex("libsqlite3-0")));

  // Stripped: no symbol table in any binary or plugin.
  const std::string x = dir_ + "/extract";
  for (const auto& [package, deb] : debs_) {
    ASSERT_EQ(host({"dpkg-deb", "-x", deb, x}).exit_code, 0);
  }
  std::vector<std::string> elves = {x + "/usr/bin/mesh-host", x + "/usr/bin/mesh-control", x + "/usr/bin/mesh",
                                    x + "/usr/bin/mesh-sim"};
  for (const auto& e : fs::directory_iterator(x + "/usr/lib/nox-mesh/plugins")) elves.push_back(e.path().string());
  // Programs: mesh-host, mesh-control, mesh, mesh-sim; providers: file, package, service, container;
  // control plugins: the sqlite and jetstream-kv stores, the build, publish and deploy stages.
  EXPECT_EQ(elves.size(), 4u + 4 + 5 + 3 + 1) << "programs, providers, control plugins, reports, nats";
  for (const auto& elf : elves) {
    auto r = host({"readelf", "-S", "-W", elf});
    ASSERT_EQ(r.exit_code, 0) << elf << show(r);
    EXPECT_EQ(r.out.find(" .symtab "), std::string::npos) << elf << " is not stripped";
  }
  // The host's package: unit, rollback script and unit, config, state directory 0700.
  auto c = host({"dpkg-deb", "-c", debs_["nox-mesh-host"]}).out;
  for (const char* path : {"./lib/systemd/system/nox-mesh-host.service", "./lib/systemd/system/nox-mesh-host-rollback.service",
                           "./usr/libexec/nox-mesh/host-rollback", "./etc/nox-mesh/host.toml", "./usr/bin/mesh-host",
                           "./usr/lib/nox-mesh/plugins/mesh-provider-package.so"})
    EXPECT_NE(c.find(path), std::string::npos) << path;
  EXPECT_TRUE(std::regex_search(c, std::regex("drwx------ root/root .* ./var/lib/nox-mesh/\n"))) << c;
  // Conffiles.
  ASSERT_EQ(host({"dpkg-deb", "-e", debs_["nox-mesh-host"], dir_ + "/host-control"}).exit_code, 0);
  EXPECT_EQ(slurp(dir_ + "/host-control/conffiles"), "/etc/nox-mesh/host.toml\n");
  ASSERT_EQ(host({"dpkg-deb", "-e", debs_["nox-mesh-control"], dir_ + "/control-control"}).exit_code, 0);
  EXPECT_EQ(slurp(dir_ + "/control-control/conffiles"), "/etc/nox-mesh/control.toml\n");

  // lintian: no errors (its warnings are listed in decision 77).
  if (host({"/bin/sh", "-c", "command -v lintian"}).exit_code != 0) {
    ADD_FAILURE() << "lintian is not installed (scripts/setup-debian.sh installs it)";
    return;
  }
  std::vector<std::string> argv = {"lintian", "--tag-display-limit", "0"};
  for (const auto& [p, deb] : debs_) argv.push_back(deb);
  auto lint = host(argv, seconds(500));
  EXPECT_TRUE(lint.exit_code == 0 || lint.exit_code == 2) << show(lint);  // 2: tags at warning level
  std::istringstream lines(lint.out);
  int errors = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("E: ", 0) == 0) ++errors;
  EXPECT_EQ(errors, 0) << lint.out;
}

// --- dpkg in an overlay ---------------------------------------------------------------------------

// Replaces the host's binary by a long sleep (the real mesh-host needs an enrolled node and a
// broker; what is checked here is what the maintainer scripts do to the unit). DefaultDependencies
// =no: the sandbox boots only its own target.
std::string host_dropin() {
  return "[Unit]\nDefaultDependencies=no\nConditionPathExists=\n"
         "[Service]\nType=simple\nExecStart=\nExecStart=/bin/sleep infinity\nWatchdogSec=0\n";
}
std::string sandbox_dropin(const std::string& log) {
  return "[Unit]\nDefaultDependencies=no\n[Service]\nStandardOutput=append:" + log + "\nStandardError=append:" + log + "\n";
}

TEST_F(PackagesSystemTest, InstallUpgradeRemovePurgeInAnOverlayNeverRestartTheHost) {
  if (::geteuid() != 0) GTEST_SKIP() << "dpkg in a systemd sandbox needs root";
  // The release upgraded from: every package repacked as kOldVersion; nox-mesh-control's store
  // plugin one schema version older.
  const std::string old_dir = dir_ + "/old";
  fs::create_directories(old_dir);
  std::map<std::string, std::string> old;
  for (const auto& [package, deb] : debs_) {
    std::map<std::string, std::string> replace;
    if (package == "nox-mesh-control")
      replace["/usr/lib/nox-mesh/plugins/mesh-store-sqlite.so"] = MESH_TEST_PREVIOUS_STORE;
    old[package] = repack(deb, package, kOldVersion, old_dir, replace);
    ASSERT_FALSE(old[package].empty()) << "cannot repack " << deb;
  }
  const std::string machine_status = slurp("/var/lib/dpkg/status");

  SystemdSandboxOptions options;
  options.name = "mesh-packages";
  options.overlay = true;
  // The source tree too: the out-of-tree provider below is built from examples/, and a checkout
  // under /tmp is hidden inside the sandbox otherwise (read only here; the build goes to dir_).
  options.keep_paths = {dir_, MESH_TEST_SOURCE_DIR};
  SystemdSandbox sb(options);
  fs::create_directories(sb.unit_dir() + "/nox-mesh-host.service.d");
  fs::create_directories(sb.unit_dir() + "/nox-mesh-control.service.d");
  sb.write_unit("nox-mesh-host.service.d/test.conf", host_dropin());
  const std::string control_log = sb.dir() + "/control.log";
  sb.write_unit("nox-mesh-control.service.d/test.conf", sandbox_dropin(control_log));
  if (!sb.start()) GTEST_SKIP() << sb.skipped_reason();
  auto in = [&](const std::string& script, std::chrono::milliseconds timeout = seconds(120)) {
    return sb.run({"/bin/sh", "-c", script}, timeout);
  };
  auto dpkg_status = [&](const std::string& package) {
    return trim(in("dpkg-query -W -f='${db:Status-Abbrev}${Version}' " + package + " 2>/dev/null").out);
  };
  auto main_pid = [&](const std::string& unit) {
    return trim(sb.systemctl({"show", "-p", "MainPID", "--value", unit}).out);
  };
  auto active = [&](const std::string& unit) { return trim(sb.systemctl({"is-active", unit}).out); };
  auto schema = [&]() {
    return trim(in("sqlite3 /var/lib/nox-mesh-control/mesh.db 'SELECT version FROM schema_version'").out);
  };

  // 1. Install the old release: everything configured, nothing enabled, and only what the
  // operator had enabled before (the host: the link `systemctl enable` makes, written by
  // provisioning before the package came) is started.
  const std::string wants = sb.unit_dir() + "/multi-user.target.wants";
  fs::create_directories(wants);
  fs::create_symlink("/lib/systemd/system/nox-mesh-host.service", wants + "/nox-mesh-host.service");
  std::string all_old;
  for (const auto& p : kPackages) all_old += " " + old[p];
  auto r = in("dpkg -i" + all_old);
  ASSERT_EQ(r.exit_code, 0) << show(r);
  for (const auto& p : kPackages) EXPECT_EQ(dpkg_status(p), "ii " + kOldVersion) << p;
  EXPECT_EQ(trim(sb.systemctl({"is-enabled", "nox-mesh-control.service"}).out), "disabled");
  EXPECT_EQ(active("nox-mesh-control.service"), "inactive");
  EXPECT_EQ(trim(sb.systemctl({"is-enabled", "nox-mesh-host.service"}).out), "enabled");
  for (int i = 0; i < 100 && active("nox-mesh-host.service") != "active"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // postinst starts it --no-block
  EXPECT_EQ(active("nox-mesh-host.service"), "active") << "an enabled host was not started on install";
  EXPECT_EQ(trim(in("stat -c %a /var/lib/nox-mesh /var/lib/nox-mesh-control").out), "700\n700");
  // The installed host finds its plugins where the README's examples say.
  r = in("mesh-host plugins");
  EXPECT_EQ(r.exit_code, 0) << show(r);
  for (const char* plugin : {"file", "package", "service", "container", "nats"})
    EXPECT_NE(r.out.find(plugin), std::string::npos) << plugin << "\n" << r.out;
  EXPECT_NE(r.out.find("/usr/lib/nox-mesh/plugins"), std::string::npos) << r.out;
  r = in("mesh-host --version");
  EXPECT_NE(r.out.find(kVersion), std::string::npos) << show(r);
  // The SDK package builds an out-of-tree provider (README "Writing a plugin") that the installed
  // host loads.
  const std::string hello = dir_ + "/hello-build";
  r = in("cmake -S " MESH_TEST_SOURCE_DIR "/examples/provider-hello -B " + hello + " >/dev/null && cmake --build " + hello +
         " && grep '^NoxMeshSdk_DIR:PATH=/usr/lib/cmake/NoxMeshSdk$' " + hello + "/CMakeCache.txt", seconds(300));
  EXPECT_EQ(r.exit_code, 0) << show(r);
  r = in("mesh-host plugins --plugin-dir " + hello + "/plugins");
  EXPECT_NE(r.out.find("hello"), std::string::npos) << show(r);

  // 2. The operator starts them. The control plane's broker port has nothing listening (so it
  // touches no other test's broker); mesh-control is READY without it. host.toml is changed.
  r = in("sed -i 's|nats://127.0.0.1:4222|nats://127.0.0.1:9|' /etc/nox-mesh/control.toml && "
         "echo '# changed by the operator' >> /etc/nox-mesh/host.toml");
  ASSERT_EQ(r.exit_code, 0) << show(r);
  r = sb.systemctl({"enable", "--now", "nox-mesh-control.service", "nox-mesh-host.service"});
  ASSERT_EQ(r.exit_code, 0) << show(r) << slurp(control_log);
  ASSERT_EQ(active("nox-mesh-control.service"), "active") << slurp(control_log);
  ASSERT_EQ(active("nox-mesh-host.service"), "active");
  EXPECT_NE(trim(sb.systemctl({"show", "-p", "StatusText", "--value", "nox-mesh-control.service"}).out).find("store sqlite open"),
            std::string::npos);
  const std::string old_schema = schema();
  ASSERT_FALSE(old_schema.empty()) << slurp(control_log);
  const std::string host_pid = main_pid("nox-mesh-host.service");
  const std::string control_pid = main_pid("nox-mesh-control.service");
  ASSERT_NE(host_pid, "0");

  // 3. Upgrade to the built release.
  std::string all_new;
  for (const auto& p : kPackages) all_new += " " + debs_[p];
  r = in("dpkg -i" + all_new);
  ASSERT_EQ(r.exit_code, 0) << show(r);
  for (const auto& p : kPackages) EXPECT_EQ(dpkg_status(p), "ii " + kVersion) << p;
  // The host was neither stopped nor restarted.
  EXPECT_EQ(active("nox-mesh-host.service"), "active");
  EXPECT_EQ(main_pid("nox-mesh-host.service"), host_pid) << "the upgrade restarted the host";
  EXPECT_EQ(trim(sb.systemctl({"show", "-p", "NRestarts", "--value", "nox-mesh-host.service"}).out), "0");
  // The running control plane was restarted into the new version, which migrated its store.
  EXPECT_EQ(active("nox-mesh-control.service"), "active") << slurp(control_log);
  EXPECT_NE(main_pid("nox-mesh-control.service"), control_pid) << "the control plane was not restarted";
  EXPECT_EQ(std::stoi(schema()), std::stoi(old_schema) + 1) << slurp(control_log);
  const std::string log = slurp(control_log);
  EXPECT_NE(log.find("schema_version=" + old_schema), std::string::npos) << log;
  EXPECT_NE(log.find("schema_version=" + std::to_string(std::stoi(old_schema) + 1)), std::string::npos) << log;
  // The changed conffile is kept; the unchanged one is the package's.
  EXPECT_NE(in("cat /etc/nox-mesh/host.toml").out.find("# changed by the operator"), std::string::npos);

  // 4. Remove: both stopped, programs gone, conffiles and state kept.
  r = in("dpkg -r nox-mesh nox-mesh-sdk nox-mesh-host nox-mesh-control nox-mesh-common");
  ASSERT_EQ(r.exit_code, 0) << show(r);
  // Those with conffiles stay as config-files; the others are gone.
  for (const auto& p : kPackages) {
    const std::string st = dpkg_status(p);
    if (p == "nox-mesh-host" || p == "nox-mesh-control")
      EXPECT_EQ(st.substr(0, 2), "rc") << p;
    else
      EXPECT_TRUE(st.empty() || st.rfind("un", 0) == 0) << p << ": " << st;
  }
  EXPECT_NE(active("nox-mesh-host.service"), "active");
  EXPECT_NE(active("nox-mesh-control.service"), "active");
  EXPECT_NE(in("test -e /usr/bin/mesh-host || test -e /usr/bin/mesh-control || test -e /usr/lib/nox-mesh/plugins/mesh-transport-nats.so").exit_code, 0);
  EXPECT_EQ(in("test -f /etc/nox-mesh/host.toml && test -f /etc/nox-mesh/control.toml && test -d /var/lib/nox-mesh").exit_code, 0);

  // 5. Purge: conffiles and the host's state gone; the control plane's key and store kept.
  r = in("dpkg -P nox-mesh nox-mesh-sdk nox-mesh-host nox-mesh-control nox-mesh-common");
  ASSERT_EQ(r.exit_code, 0) << show(r);
  EXPECT_NE(r.err.find("kept /var/lib/nox-mesh-control"), std::string::npos) << show(r);
  for (const auto& p : kPackages) {
    const std::string st = dpkg_status(p);
    EXPECT_TRUE(st.empty() || st.rfind("un", 0) == 0) << p << ": " << st;
  }
  EXPECT_NE(in("test -e /etc/nox-mesh/host.toml || test -e /etc/nox-mesh/control.toml || test -e /var/lib/nox-mesh").exit_code, 0);
  EXPECT_EQ(in("test -f /var/lib/nox-mesh-control/mesh.db && test -f /var/lib/nox-mesh-control/control.key").exit_code, 0);
  EXPECT_EQ(in("dpkg --audit").out, "");
  // Purge also removed the units' enable links (recorded by postinst, made by the operator).
  for (const char* link : {"/multi-user.target.wants/nox-mesh-host.service", "/multi-user.target.wants/nox-mesh-control.service"})
    EXPECT_FALSE(fs::exists(sb.unit_dir() + link) || fs::is_symlink(sb.unit_dir() + link)) << link;

  // Nothing of it reached the machine.
  EXPECT_TRUE(sb.stop()) << sb.log();
  EXPECT_EQ(slurp("/var/lib/dpkg/status"), machine_status);
  EXPECT_NE(host({"dpkg-query", "-W", "nox-mesh-host"}).exit_code, 0) << "nox-mesh-host is installed on the machine";
  EXPECT_FALSE(fs::exists("/usr/bin/mesh-host"));
}

// A loopback port nothing listens on now (the sandbox shares the machine's network).

// README "Install from packages", step by step, inside an overlay sandbox: apt installs the
// packages, nats-server runs, nox-mesh-control starts from its shipped config and unit, a token is
// issued with the first admin identity, the node is named in the shipped host.toml, enrolled, and
// the real nox-mesh-host.service (Type=notify, watchdog, its hardening) becomes active and stays
// so; `mesh nodes` lists the node. Differences from the README, all forced by the sandbox: the
// broker is on a free port (the sandbox shares the machine's network), nats-server runs as a
// transient unit, and the units get DefaultDependencies=no and a log file (the sandbox boots
// only its own target and has no journald).
TEST_F(PackagesSystemTest, TheReadmeInstallPathEnrolsANodeWhoseUnitBecomesReady) {
  if (::geteuid() != 0) GTEST_SKIP() << "dpkg in a systemd sandbox needs root";
  if (host_sh("command -v nats-server").exit_code != 0) GTEST_SKIP() << "nats-server is not installed";
  SystemdSandboxOptions options;
  options.name = "mesh-readme";
  options.overlay = true;
  options.keep_paths = {dir_};
  SystemdSandbox sb(options);
  const std::string host_log = sb.dir() + "/host.log", control_log = sb.dir() + "/control.log";
  for (const auto& [unit, log] : {std::pair{std::string("nox-mesh-host"), host_log}, {"nox-mesh-control", control_log}}) {
    fs::create_directories(sb.unit_dir() + "/" + unit + ".service.d");
    sb.write_unit(unit + ".service.d/sandbox.conf", sandbox_dropin(log));
  }
  if (!sb.start()) GTEST_SKIP() << sb.skipped_reason();
  auto in = [&](const std::string& script, std::chrono::milliseconds timeout = seconds(120)) {
    return sb.run({"/bin/sh", "-c", script}, timeout);
  };
  const std::string pkgs = dir_ + "/packages/";
  const std::string arch = native_arch();
  auto deb = [&](const std::string& p) { return pkgs + p + "_" + kVersion + "_" + (p == "nox-mesh-sdk" ? "all" : arch) + ".deb"; };

  // apt install ./… (every dependency is already on this machine: nothing is downloaded).
  auto r = in("DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends " + deb("nox-mesh-common") +
              " " + deb("nox-mesh-control") + " " + deb("nox-mesh") + " " + deb("nox-mesh-host"), seconds(300));
  ASSERT_EQ(r.exit_code, 0) << show(r);
  // The shipped units as systemd reads them (issue 14 item 2).
  r = in("systemd-analyze verify /lib/systemd/system/nox-mesh-host.service /lib/systemd/system/nox-mesh-control.service "
         "/lib/systemd/system/nox-mesh-host-rollback.service");
  EXPECT_EQ(r.exit_code, 0) << show(r);
  r = sb.systemctl({"show", "nox-mesh-host.service", "-p", "Type,NotifyAccess,WatchdogUSec,Restart,KillMode,"
                    "RestartForceExitStatus,RestartPreventExitStatus,SuccessExitStatus,OnFailure,StartLimitBurst,StartLimitIntervalUSec,TimeoutStopUSec"});
  for (const char* want : {"Type=notify\n", "NotifyAccess=main\n", "Restart=on-failure\n",
                           "KillMode=mixed\n", "RestartForceExitStatus=75\n", "RestartPreventExitStatus=2\n", "SuccessExitStatus=75\n",
                           "OnFailure=nox-mesh-host-rollback.service\n", "StartLimitBurst=3\n",
                           "StartLimitIntervalUSec=10min\n", "TimeoutStopUSec=6min\n"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "in\n" << r.out;
  // Documentation= names files the packages ship.
  for (const char* unit : {"nox-mesh-host.service", "nox-mesh-control.service", "nox-mesh-host-rollback.service"}) {
    // The first entry (a unit may also name man pages: "file:///… man:dpkg(1)").
    std::string doc = trim(sb.systemctl({"show", "-p", "Documentation", "--value", unit}).out);
    doc = doc.substr(0, doc.find(' '));
    ASSERT_EQ(doc.rfind("file://", 0), 0u) << unit << ": " << doc;
    EXPECT_EQ(in("test -f " + doc.substr(7)).exit_code, 0) << unit << ": " << doc << " is not installed";
  }
  r = sb.systemctl({"show", "nox-mesh-control.service", "-p", "Type,NotifyAccess,Restart,KillMode"});
  for (const char* want : {"Type=notify\n", "NotifyAccess=main\n", "Restart=on-failure\n", "KillMode=mixed\n"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "in\n" << r.out;
  const int port = mesh::testing::free_tcp_port();
  ASSERT_GT(port, 0);
  const std::string url = "nats://127.0.0.1:" + std::to_string(port);
  r = in("sed -i 's|nats://127.0.0.1:4222|" + url + "|' /etc/nox-mesh/control.toml /etc/nox-mesh/host.toml && "
         "systemd-run --unit mesh-readme-nats -p DefaultDependencies=no -p StandardOutput=append:" + sb.dir() +
         "/nats.log -p StandardError=append:" + sb.dir() + "/nats.log nats-server -a 127.0.0.1 -p " + std::to_string(port));
  ASSERT_EQ(r.exit_code, 0) << show(r);

  // The control plane, as the README says.
  r = sb.systemctl({"enable", "--now", "nox-mesh-control"});
  ASSERT_EQ(r.exit_code, 0) << show(r) << slurp(control_log);
  ASSERT_EQ(trim(sb.systemctl({"is-active", "nox-mesh-control"}).out), "active") << slurp(control_log);
  // The token (a few tries while mesh-control subscribes to the broker).
  std::string token;
  for (int i = 0; i < 50 && token.empty(); ++i) {
    r = in("mesh --identity /var/lib/nox-mesh-control/admin.identity --server " + url +
           " token issue web-01 --ttl 24h | (umask 077; awk '$1 == \"token\" { print $2 }' > " + sb.dir() + "/token.txt)");
    if (r.exit_code == 0) token = trim(slurp(sb.dir() + "/token.txt"));
    else std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_FALSE(token.empty()) << show(r) << slurp(control_log);
  EXPECT_EQ(trim(in("stat -c %a " + sb.dir() + "/token.txt").out), "600") << "the README's recipe keeps the token private";

  // The node.
  r = in("sed -i 's/^# name = .*/name = \"web-01\"/' /etc/nox-mesh/host.toml && "
         "mesh-host enrol --config /etc/nox-mesh/host.toml --token-file " + sb.dir() + "/token.txt");
  ASSERT_EQ(r.exit_code, 0) << show(r) << slurp(control_log);
  EXPECT_NE(r.out.find("briefing web-01"), std::string::npos) << r.out;
  r = sb.systemctl({"enable", "--now", "nox-mesh-host"});
  ASSERT_EQ(r.exit_code, 0) << show(r) << slurp(host_log);
  // `start` returned: READY=1 came (Type=notify). It stays up (watchdog kept, no restart).
  EXPECT_EQ(trim(sb.systemctl({"is-active", "nox-mesh-host"}).out), "active") << slurp(host_log);
  const std::string pid = trim(sb.systemctl({"show", "-p", "MainPID", "--value", "nox-mesh-host"}).out);
  // The watchdog (systemd shows it once the unit has started).
  EXPECT_EQ(trim(sb.systemctl({"show", "-p", "WatchdogUSec", "--value", "nox-mesh-host"}).out), "1min");
  r = in("mesh --identity /var/lib/nox-mesh-control/admin.identity --server " + url + " nodes");
  EXPECT_EQ(r.exit_code, 0) << show(r);
  EXPECT_NE(r.out.find("web-01"), std::string::npos) << r.out;
  EXPECT_EQ(trim(sb.systemctl({"is-active", "nox-mesh-host"}).out), "active") << slurp(host_log);
  EXPECT_EQ(trim(sb.systemctl({"show", "-p", "MainPID", "--value", "nox-mesh-host"}).out), pid) << slurp(host_log);
  EXPECT_EQ(trim(sb.systemctl({"show", "-p", "NRestarts", "--value", "nox-mesh-host"}).out), "0") << slurp(host_log);
  EXPECT_TRUE(sb.stop()) << sb.log();
}

// The host unit's restart rules, with the shipped unit and a stand-in program (the unit's own
// ExecStart needs an enrolled node): exit 75 restarts it and is not a failure; a crash loop ends
// at the start limit, the unit is failed, and OnFailure= runs nox-mesh-host-rollback.service.
TEST_F(PackagesSystemTest, HostUnitRestartsOnExit75AndHandsACrashLoopToTheRollbackUnit) {
  if (::geteuid() != 0) GTEST_SKIP() << "dpkg in a systemd sandbox needs root";
  SystemdSandboxOptions options;
  options.name = "mesh-unit";
  options.overlay = true;
  options.keep_paths = {dir_};
  SystemdSandbox sb(options);
  // The stand-in: the first run exits 75 ("restart me into the new version"), later runs stay up
  // until crash.flag exists, then every run exits 1 at once.
  const std::string program = sb.dir() + "/host-stand-in.sh";
  std::ofstream(program) << "#!/bin/sh\n"
                            "echo run >> " << sb.dir() << "/runs\n"
                            "[ -e " << sb.dir() << "/crash.flag ] && exit 1\n"
                            "[ -e " << sb.dir() << "/first.done ] || { touch " << sb.dir() << "/first.done; exit 75; }\n"
                            "exec sleep infinity\n";
  fs::permissions(program, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  fs::create_directories(sb.unit_dir() + "/nox-mesh-host.service.d");
  sb.write_unit("nox-mesh-host.service.d/stand-in.conf",
                "[Unit]\nDefaultDependencies=no\nConditionPathExists=\n"
                "[Service]\nType=simple\nWatchdogSec=0\nExecStart=\nExecStart=" + program + "\n");
  fs::create_directories(sb.unit_dir() + "/nox-mesh-host-rollback.service.d");
  sb.write_unit("nox-mesh-host-rollback.service.d/sandbox.conf",
                sandbox_dropin(sb.dir() + "/rollback.log"));
  if (!sb.start()) GTEST_SKIP() << sb.skipped_reason();
  auto r = sb.run({"dpkg", "-i", debs_["nox-mesh-common"], debs_["nox-mesh-host"]});
  ASSERT_EQ(r.exit_code, 0) << show(r);
  auto prop = [&](const std::string& unit, const std::string& p) {
    return trim(sb.systemctl({"show", "-p", p, "--value", unit}).out);
  };
  auto wait_for = [&](const std::function<bool()>& done) {
    for (int i = 0; i < 600 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return done();
  };

  // Exit 75, then a restart into the "new version" that stays up.
  r = sb.systemctl({"start", "nox-mesh-host.service"});
  ASSERT_EQ(r.exit_code, 0) << show(r);
  ASSERT_TRUE(wait_for([&] { return prop("nox-mesh-host.service", "NRestarts") == "1" &&
                                    prop("nox-mesh-host.service", "ActiveState") == "active"; }))
      << sb.systemctl({"status", "nox-mesh-host.service"}).out;
  EXPECT_EQ(prop("nox-mesh-host.service", "Result"), "success");
  EXPECT_EQ(prop("nox-mesh-host-rollback.service", "ExecMainStartTimestampMonotonic"), "0")
      << "the rollback ran after an exit 75";

  // A crash loop: restarts end at the start limit and the rollback unit runs.
  std::ofstream(sb.dir() + "/crash.flag") << "";
  r = sb.systemctl({"kill", "--signal=KILL", "nox-mesh-host.service"});
  ASSERT_EQ(r.exit_code, 0) << show(r);
  ASSERT_TRUE(wait_for([&] { return prop("nox-mesh-host.service", "ActiveState") == "failed"; }))
      << sb.systemctl({"status", "nox-mesh-host.service"}).out;
  // (A oneshot never becomes "active": that it ran is its main process's start.)
  EXPECT_TRUE(wait_for([&] { return prop("nox-mesh-host-rollback.service", "ExecMainStartTimestampMonotonic") != "0" &&
                                    prop("nox-mesh-host-rollback.service", "ActiveState") != "activating"; }))
      << "OnFailure= did not run the rollback unit\n" << sb.systemctl({"status", "nox-mesh-host-rollback.service"}).out;
  // Each start counted once: the first, the one after 75, the one after the kill, then the
  // crashes up to StartLimitBurst=3 in the interval — the loop ended instead of going on.
  std::istringstream runs(slurp(sb.dir() + "/runs"));
  int n = 0;
  for (std::string line; std::getline(runs, line);) ++n;
  EXPECT_LE(n, 4) << "the crash loop did not end at the start limit";
  // It stays ended (no restart after the rollback unit ran; the rollback script starts the host
  // only when it rolled an upgrade back).
  EXPECT_EQ(prop("nox-mesh-host.service", "ActiveState"), "failed");
  EXPECT_TRUE(sb.stop()) << sb.log();
}

}  // namespace
}  // namespace mesh::testing
