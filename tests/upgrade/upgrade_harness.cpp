#include "upgrade_harness.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "apt_repo_fixture.h"

namespace mesh::upgrade_test {

namespace fs = std::filesystem;

CommandRun run(const std::vector<std::string>& argv, int timeout_ms) {
  auto r = mesh::testing::run_program(argv, timeout_ms);
  return CommandRun{r.exit_code, r.out};
}

std::string check(const std::vector<std::string>& argv, const std::string& what, int timeout_ms) {
  CommandRun r = run(argv, timeout_ms);
  if (r.exit_code != 0)
    throw std::runtime_error(what + " failed (exit " + std::to_string(r.exit_code) + "): " + r.out);
  return r.out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& text, unsigned mode) {
  fs::create_directories(fs::path(path).parent_path());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + path);
  }
  ::chmod(path.c_str(), mode);
}

std::vector<std::pair<std::string, std::string>> read_state(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    out.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return out;
}

std::string state_value(const std::string& path, const std::string& key) {
  for (const auto& [k, v] : read_state(path))
    if (k == key) return v;
  return "";
}

namespace {

std::string field(const std::string& deb, const std::string& name) {
  std::string v = check({"dpkg-deb", "--field", deb, name}, "dpkg-deb --field " + name);
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  return v;
}

}  // namespace

Packages build_packages(const std::string& dir) {
  static std::optional<Packages> cached;
  if (cached) return *cached;
  fs::create_directories(dir);
  // cpack installs each component into its own staging folder under -B and builds the .debs
  // there; nothing outside `dir` is written.
  check({MESH_TEST_CPACK, "-G", "DEB", "--config", std::string(MESH_TEST_BUILD_DIR) + "/CPackConfig.cmake",
         "-B", dir},
        "cpack -G DEB", 900000);
  Packages p;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".deb") continue;
    auto starts = [&](const char* prefix) { return name.rfind(prefix, 0) == 0; };
    if (starts("nox-mesh-host_")) p.host = e.path().string();
    else if (starts("nox-mesh-common_")) p.common = e.path().string();
    else if (starts("nox-mesh-control_")) p.control = e.path().string();
    else if (starts("nox-mesh_")) p.cli = e.path().string();
  }
  if (p.host.empty() || p.common.empty())
    throw std::runtime_error("cpack made no nox-mesh-host or nox-mesh-common .deb in " + dir);
  p.version = field(p.host, "Version");
  cached = p;
  return p;
}

std::string repack_host(const std::string& built_deb, const std::string& version,
                        const std::string& dir, HostBuild build, const std::string& trigger) {
  const std::string root = dir + "/repack-" + version;
  fs::remove_all(root);
  check({"dpkg-deb", "-R", built_deb, root}, "dpkg-deb -R " + built_deb);
  // The control file with the new Version (everything else as CPack wrote it).
  const std::string control_path = root + "/DEBIAN/control";
  std::istringstream in(read_file(control_path));
  std::string control, line;
  while (std::getline(in, line))
    control += (line.rfind("Version:", 0) == 0 ? "Version: " + version : line) + "\n";
  write_file(control_path, control);

  const std::string real = "/usr/lib/nox-mesh/test/mesh-host";
  auto wrap = [&](const std::string& fail_command, const std::string& body) {
    fs::create_directories(root + "/usr/lib/nox-mesh/test");
    fs::rename(root + "/usr/bin/mesh-host", root + real);
    write_file(root + "/usr/bin/mesh-host",
               "#!/bin/sh\n"
               "# Test build " + version + " of mesh-host (tests/upgrade): fails `" + fail_command +
                   "`, runs the real binary for everything else.\n"
               "if [ \"${1:-}\" = \"" + fail_command + "\" ]; then\n" + body + "\nfi\n"
               "exec " + real + " \"$@\"\n",
               0755);
    // md5sums lists the moved binary under its old name: rewrite that line.
    const std::string sums_path = root + "/DEBIAN/md5sums";
    if (fs::exists(sums_path)) {
      std::istringstream s(read_file(sums_path));
      std::string sums;
      while (std::getline(s, line))
        if (line.find(" usr/bin/mesh-host") == std::string::npos) sums += line + "\n";
      write_file(sums_path, sums);
    }
  };
  switch (build) {
    case HostBuild::Plain: break;
    case HostBuild::ExitsAtOnce:
      wrap("run", "  echo \"mesh-host " + version + ": test build that exits at once\" >&2\n  exit 1");
      break;
    case HostBuild::SelfTestFails:
      wrap("self-test", "  echo \"self-test of test build " + version +
                            ": the plugins directory cannot be read (made to fail)\" >&2\n  exit 1");
      break;
    case HostBuild::KillsDpkgOnce: {
      const std::string postinst = root + "/DEBIAN/postinst";
      std::string text = read_file(postinst);
      if (text.empty()) text = "#!/bin/sh\nset -e\n";
      const auto nl = text.find('\n');
      text.insert(nl + 1, "# Test build: SIGKILL the dpkg that runs this, once.\nif [ -e '" + trigger +
                              "' ]; then rm -f '" + trigger + "'; kill -9 \"$PPID\"; fi\n");
      write_file(postinst, text, 0755);
      break;
    }
  }
  std::string arch = field(built_deb, "Architecture");
  std::string file_version = version;
  if (auto c = file_version.find(':'); c != std::string::npos) file_version.replace(c, 1, "%3a");
  const std::string out = dir + "/nox-mesh-host_" + file_version + "_" + arch + ".deb";
  check({"dpkg-deb", "--root-owner-group", "-b", root, out}, "dpkg-deb -b " + version);
  fs::remove_all(root);
  return out;
}

}  // namespace mesh::upgrade_test
