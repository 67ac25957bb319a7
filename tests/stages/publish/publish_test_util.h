// Test helpers for the publish stage: tiny .deb files built with dpkg-deb, and a snapshot of a
// directory tree (every file's path and content) to show that a refused publish changed nothing.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>

#include "mesh/testing/process.h"

namespace mesh::stages::publish::test {

namespace fs = std::filesystem;

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void spit(const fs::path& p, const std::string& text, mode_t mode = 0644) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
  ::chmod(p.c_str(), mode);
}

/// Builds `<out_dir>/<name>_<version>_<arch>.deb` installing /usr/share/<name>/version (holding
/// `version` and `payload`) and, when `payload_bytes` > 0, /usr/share/<name>/payload of that many
/// incompressible bytes (from /dev/urandom). Throws on failure.
inline fs::path build_deb(const fs::path& out_dir, const std::string& name, const std::string& version,
                          const std::string& arch = "all", const std::string& payload = "",
                          std::size_t payload_bytes = 0) {
  const fs::path root = out_dir / ("build-" + name + "-" + version + "-" + arch);
  fs::remove_all(root);
  spit(root / "DEBIAN" / "control", "Package: " + name + "\nVersion: " + version + "\nArchitecture: " + arch +
                                        "\nMaintainer: Nox Mesh tests <tests@nox-mesh.invalid>\nDescription: a test "
                                        "package of the publish stage\n");
  spit(root / "usr" / "share" / name / "version", version + payload + "\n");
  if (payload_bytes > 0) {
    std::ifstream random("/dev/urandom", std::ios::binary);
    std::ofstream big(root / "usr" / "share" / name / "payload", std::ios::binary);
    std::string buf(1 << 20, '\0');
    for (std::size_t left = payload_bytes; left > 0;) {
      const std::size_t n = std::min(left, buf.size());
      random.read(buf.data(), static_cast<std::streamsize>(n));
      big.write(buf.data(), static_cast<std::streamsize>(n));
      left -= n;
    }
  }
  std::string upstream = version.substr(version.find(':') == std::string::npos ? 0 : version.find(':') + 1);
  const fs::path deb = out_dir / (name + "_" + upstream + "_" + arch + ".deb");
  // -Znone for big payloads: random bytes do not compress, and compressing them costs minutes.
  auto r = mesh::testing::run_process({"/usr/bin/dpkg-deb", "--root-owner-group", payload_bytes > 0 ? "-Znone" : "-Zxz",
                                       "--build", root.string(), deb.string()});
  if (r.exit_code != 0) throw std::runtime_error("dpkg-deb --build failed: " + r.out + r.err);
  fs::remove_all(root);
  return deb;
}

/// Every regular file under `dir` (relative path → content), less the lock file.
inline std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), dir).string();
    if (rel == ".lock") continue;
    out[rel] = slurp(e.path());
  }
  return out;
}

}  // namespace mesh::stages::publish::test
