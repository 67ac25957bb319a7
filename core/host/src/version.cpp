#include "mesh/host/version.h"

#include <unistd.h>

#include <chrono>
#include <climits>

#include "mesh/common/process.h"
#include "mesh/common/protocol.h"
#include "mesh/common/version_token.h"

namespace mesh::host {
namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  std::size_t b = 0;
  while (b < s.size() && (s[b] == ' ' || s[b] == '\t')) ++b;
  return s.substr(b);
}

// A Debian package name: [a-z0-9][a-z0-9+.-]+ (Debian Policy 5.6.1).
bool package_name(const std::string& s) {
  if (s.size() < 2 || s.size() > 128) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '.' || c == '-')) return false;
  return (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9');
}

std::string dpkg_query() {
  for (const char* p : {"/usr/bin/dpkg-query", "/bin/dpkg-query"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

}  // namespace

const std::string& self_executable() {
  static const std::string path = [] {
    char buf[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }();
  return path;
}

HostVersion query_host_version(const std::string& executable) {
  HostVersion v{protocol::kHostVersion, "", executable};
  const std::string tool = dpkg_query();
  if (tool.empty() || executable.empty() || executable[0] != '/') return v;
  using namespace std::chrono_literals;
  // "nox-mesh-host: /usr/bin/mesh-host" (or "pkg:amd64: /usr/bin/..."); a diversion line
  // ("diversion by ...") is not an owner.
  auto owner = common::run_process({tool, "-S", executable}, 10s, 16 << 10);
  if (!owner.succeeded()) return v;
  std::string package;
  std::size_t start = 0;
  while (start < owner.output.size()) {
    std::size_t end = owner.output.find('\n', start);
    if (end == std::string::npos) end = owner.output.size();
    const std::string line = owner.output.substr(start, end - start);
    start = end + 1;
    if (line.rfind("diversion ", 0) == 0) continue;
    const std::string suffix = ": " + executable;
    if (line.size() <= suffix.size() || line.compare(line.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    std::string name = line.substr(0, line.size() - suffix.size());
    if (name.find(',') != std::string::npos) continue;  // shared by several packages: not one owner
    if (auto colon = name.find(':'); colon != std::string::npos) name = name.substr(0, colon);  // :arch
    if (package_name(name)) {
      package = name;
      break;
    }
  }
  if (package.empty()) return v;
  auto version = common::run_process({tool, "-W", "-f=${Version}", package}, 10s, 4 << 10);
  const std::string text = trim(version.output);
  if (!version.succeeded() || !common::valid_version_token(text)) return v;
  v.version = text;
  v.package = package;
  return v;
}

const HostVersion& running_version() {
  static const HostVersion v = query_host_version(self_executable());
  return v;
}

}  // namespace mesh::host
