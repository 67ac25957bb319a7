// The plugin loader: Boost.DLL, with the ABI checked through the C descriptor before any C++ call.
// Built-in plugins load through this same loader as third-party ones.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mesh/sdk/abi.h"
#include "mesh/sdk/plugin.h"
#include "mesh/sdk/result.h"

namespace mesh::loader {

/// A loaded plugin. `plugin` is a shared_ptr whose control block also owns the library handle,
/// the HostContext and the plugin's logger (aliasing constructor), so the library stays mapped
/// while any copy of the pointer lives — unloading under a live object crashes (PLATFORM.md).
struct LoadedPlugin {
  std::shared_ptr<sdk::Plugin> plugin;
  std::string path;  ///< file it came from ("<memory>" for in-memory descriptors)
  std::string kind;
  std::string name;
  std::string version;
  std::string description;
  std::uint32_t abi_major = 0;
  std::uint32_t abi_minor = 0;
  /// The plugin's C++ ABI fingerprint as one line (sdk::describe_cxx_abi), compiler included.
  std::string cxx_abi;

  /// The plugin as its kind's interface (Provider, Transport, Store...), sharing ownership.
  /// nullptr when it is not of that type.
  template <class T>
  std::shared_ptr<T> as() const {
    return std::shared_ptr<T>(plugin, dynamic_cast<T*>(plugin.get()));
  }
};

struct LoadOptions {
  /// "host", "control" or "tool" (HostContext::role).
  std::string role = "tool";
  /// Base for HostContext::state_dir: the plugin gets "<state_base>/plugins/<name>" (created,
  /// 0700). Empty: no state dir.
  std::string state_base;
};

/// File name of a plugin: "mesh-<kind>-<name>.so".
std::string plugin_file_name(const std::string& kind, const std::string& name);

/// Loads "<dir>/mesh-<kind>-<name>.so". Errors (all name the file):
/// - NotFound: "plugin file /x/mesh-provider-foo.so does not exist";
/// - FailedPrecondition: dlopen failure (with dlerror's reason), missing `mesh_plugin_info_v1`
///   symbol, ABI major differs or plugin minor newer ("built for SDK ABI 2.0; this program
///   supports 1.0"), descriptor smaller than the ABI 1 descriptor, kind or name in the
///   descriptor not matching the file name (or `expected_kind`), a file not named
///   mesh-<kind>-<name>.so (refused before dlopen), a descriptor without a C++ ABI fingerprint,
///   or a fingerprint that differs from this program's in the standard library, its ABI switch
///   or a boundary type's size ("plugin /x/mesh-provider-foo.so ('foo' 1.0.0) was built for
///   another C++ ABI (_GLIBCXX_USE_CXX11_ABI 0, this program 1; sizeof(std::string) 8, this
///   program 32; ...). Plugin: <fingerprint>. This program: <fingerprint>. ..."; the compiler
///   is shown, never compared);
/// - Failed: `create` returned nullptr.
sdk::Result<LoadedPlugin> load_plugin(const std::string& dir, const std::string& kind,
                                      const std::string& name, const LoadOptions& options = {});

/// A plugin search path: directories searched in order (the `[plugins] dir` of mesh-host's and
/// mesh-control's configs, a string or a list). The first directory holding a plugin's file wins.
using PluginDirs = std::vector<std::string>;

/// Where plugin `kind`/`name` is found in `dirs`.
struct PluginFile {
  /// `<dir>/mesh-<kind>-<name>.so` of the first directory in which that name exists (as any kind
  /// of entry, so that a broken file is reported rather than passed over); empty when none.
  std::string path;
  /// The same file name in later directories, in order: never loaded.
  std::vector<std::string> shadowed;
};

/// Looks for "mesh-<kind>-<name>.so" in each of `dirs`, in order. Reads directory entries only;
/// loads nothing and logs nothing. A directory that does not exist or cannot be read holds
/// nothing. Thread-safe.
PluginFile find_plugin_file(const PluginDirs& dirs, const std::string& kind, const std::string& name);

/// `dirs` as text for messages: "/a, /b" (each escaped with common::printable).
std::string describe_dirs(const PluginDirs& dirs);

/// Loads plugin `kind`/`name` from the first of `dirs` that holds its file (find_plugin_file).
/// When later directories hold the same file name, logs one warning per extra file naming both
/// files ("plugin mesh-provider-file.so is in more than one plugin directory: loading /a/..., not
/// /b/... outcome=shadowed"). With exactly one directory this is load_plugin(dirs[0], ...).
/// Errors: those of load_plugin_file for the file found; NotFound when no directory holds it:
/// "plugin file mesh-provider-foo.so is in none of the plugin directories /a, /b".
sdk::Result<LoadedPlugin> load_plugin(const PluginDirs& dirs, const std::string& kind,
                                      const std::string& name, const LoadOptions& options = {});

/// Loads a plugin from an explicit path; `expected_kind` empty accepts any kind.
sdk::Result<LoadedPlugin> load_plugin_file(const std::string& path, const std::string& expected_kind,
                                           const LoadOptions& options = {});

/// Same checks from an in-memory descriptor (unit tests; plugins linked statically).
sdk::Result<LoadedPlugin> load_descriptor(const mesh_plugin_info* info, const std::string& expected_kind,
                                          const LoadOptions& options = {});

/// Every `mesh-*.so` in `dir`, each loaded (for `mesh-host plugins`); failures included as errors.
std::vector<sdk::Result<LoadedPlugin>> load_all(const std::string& dir, const LoadOptions& options = {});

/// Every `mesh-*.so` in `dirs`, each file name loaded from the first directory holding it (as
/// load_plugin does; a shadowed file is a logged warning naming both files, not an entry). A
/// directory that does not exist is passed over (a local plugin directory may not be made yet);
/// one that cannot be read is an error entry; when none of `dirs` exists, the only entry is
/// NotFound "none of the plugin directories exists: /a, /b". With exactly one directory this is
/// load_all(dirs[0], ...).
std::vector<sdk::Result<LoadedPlugin>> load_all(const PluginDirs& dirs, const LoadOptions& options = {});

/// The names of the `kind` plugins in `dir`, taken from their file names (`mesh-KIND-NAME.so`),
/// sorted and comma-separated, or "none" (also when `dir` cannot be read): for messages that name
/// the plugins an operator could have meant. Reads the directory only; loads nothing.
std::string plugin_names_in(const std::string& dir, const std::string& kind);

/// plugin_names_in over several directories: each name once, sorted; "none" when no directory
/// holds a `kind` plugin.
std::string plugin_names_in(const PluginDirs& dirs, const std::string& kind);

}  // namespace mesh::loader
