#include "mesh/cli/locate.h"

#include <filesystem>
#include <system_error>

#ifndef MESH_INSTALL_LIBDIR
#define MESH_INSTALL_LIBDIR "lib"
#endif
#ifndef MESH_LIBRARY_ARCHITECTURE
#define MESH_LIBRARY_ARCHITECTURE ""
#endif

namespace mesh::cli {

std::vector<std::string> default_plugin_dirs(const std::string& exe_path) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  if (exe_path.empty()) return out;
  const fs::path prefix = fs::path(exe_path).parent_path().parent_path();
  auto add = [&](const fs::path& p) {
    std::string s = p.lexically_normal().string();
    for (const auto& o : out)
      if (o == s) return;
    out.push_back(std::move(s));
  };
  add(prefix / "lib" / "nox-mesh" / "plugins");
  if (std::string arch = MESH_LIBRARY_ARCHITECTURE; !arch.empty())
    add(prefix / "lib" / arch / "nox-mesh" / "plugins");
  if (fs::path libdir = MESH_INSTALL_LIBDIR; !libdir.is_absolute())
    add(prefix / libdir / "nox-mesh" / "plugins");
  add(prefix / "lib64" / "nox-mesh" / "plugins");
  add(prefix / "plugins");  // the build tree: bin/ and plugins/ side by side
  return out;
}

std::string resolve_plugin_dir(const std::string& flag, const std::string& env,
                               const std::string& config, const std::string& exe_path,
                               const std::function<bool(const std::string&)>& exists) {
  if (!flag.empty()) return flag;
  if (!env.empty()) return env;
  if (!config.empty()) return config;
  auto candidates = default_plugin_dirs(exe_path);
  for (const auto& c : candidates)
    if (exists(c)) return c;
  return candidates.empty() ? std::string() : candidates.front();
}

std::vector<std::string> split_servers(const std::vector<std::string>& entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) {
    std::size_t start = 0;
    while (start <= e.size()) {
      std::size_t comma = e.find(',', start);
      if (comma == std::string::npos) comma = e.size();
      std::string item = e.substr(start, comma - start);
      auto b = item.find_first_not_of(" \t");
      auto f = item.find_last_not_of(" \t");
      if (b != std::string::npos) out.push_back(item.substr(b, f - b + 1));
      start = comma + 1;
    }
  }
  return out;
}

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

}  // namespace mesh::cli
