// Where `mesh` finds its transport plugin and the broker.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mesh::cli {

/// Install-relative plugin folders for the program at `exe_path`, in the order they are tried:
/// `<exe dir>/../lib/nox-mesh/plugins`, the GNU libdir variants
/// (`<exe dir>/../lib/<multiarch>/nox-mesh/plugins`, the configured CMAKE_INSTALL_LIBDIR), and the
/// build tree's `<exe dir>/../plugins`.
std::vector<std::string> default_plugin_dirs(const std::string& exe_path);

/// The plugin folder: `flag` (--plugin-dir), else `env` (NOX_MESH_PLUGIN_DIR), else `config`
/// ([plugins] dir of --config), else the first of default_plugin_dirs(exe_path) for which
/// `exists` is true, else the first of them (so the error names a path).
std::string resolve_plugin_dir(const std::string& flag, const std::string& env,
                               const std::string& config, const std::string& exe_path,
                               const std::function<bool(const std::string&)>& exists);

/// Splits server lists: each entry may itself be comma-separated ("nats://a:4222,nats://b:4222");
/// blanks are trimmed and empty items dropped.
std::vector<std::string> split_servers(const std::vector<std::string>& entries);

/// This program's path from /proc/self/exe ("" when unavailable).
std::string self_exe();

}  // namespace mesh::cli
