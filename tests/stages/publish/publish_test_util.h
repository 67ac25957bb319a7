// Test helpers for the publish stage: tiny .deb files built with dpkg-deb, and a snapshot of a
// directory tree (every file's path and content) to show that a refused publish changed nothing.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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

struct HttpResponse {
  int status = 0;
  std::string body;
};

/// One HTTP/1.1 request to 127.0.0.1:`port` (Connection: close), the raw response parsed just
/// enough: status code and body. `headers`: more header lines, each ending in "\r\n".
inline HttpResponse http_request(int port, const std::string& method, const std::string& target,
                                 const std::string& headers = "") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  HttpResponse r;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return r;
  }
  const std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + headers + "\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string raw;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (raw.rfind("HTTP/1.1 ", 0) == 0) r.status = std::atoi(raw.c_str() + 9);
  if (auto end = raw.find("\r\n\r\n"); end != std::string::npos) r.body = raw.substr(end + 4);
  return r;
}

}  // namespace mesh::stages::publish::test
