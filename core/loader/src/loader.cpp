// The plugin loader. Everything about a plugin is checked through its C descriptor (ABI version,
// struct size, kind, name, entry points) before a single C++ call crosses into it; only then is
// `create` called. The library handle, the HostContext and the plugin's logger live in one holder
// owned by the shared_ptr handed out, so the library stays mapped for as long as any copy of the
// plugin pointer lives, and `destroy` runs before the library is unloaded (PLATFORM.md: unloading
// under a live object crashes).
#include "mesh/loader/loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <map>
#include <string_view>
#include <system_error>
#include <utility>

#include <boost/dll/shared_library.hpp>
#include <spdlog/spdlog.h>

#include "mesh/common/fs.h"
#include "mesh/common/logging.h"
#include "mesh/common/text.h"

namespace mesh::loader {
namespace {

using sdk::ErrorCode;

/// Size of the version-1 descriptor: every field up to and including `destroy`. A plugin that
/// reports less was built against something that is not this ABI.
constexpr std::uint32_t kDescriptorV1Size =
    static_cast<std::uint32_t>(offsetof(mesh_plugin_info, destroy) + sizeof(void (*)()));

/// Size of a descriptor that carries the C++ ABI fingerprint (ABI 2): up to and including
/// `cxx_abi`.
constexpr std::uint32_t kDescriptorFingerprintSize =
    static_cast<std::uint32_t>(offsetof(mesh_plugin_info, cxx_abi) + sizeof(const mesh_cxx_abi*));

/// This program's own fingerprint, from the same SDK header MESH_PLUGIN uses.
constexpr mesh_cxx_abi kHostCxxAbi = sdk::cxx_abi_of_this_build();

constexpr const char* kKinds[] = {"provider", "transport", "store", "stage", "report"};

bool known_kind(std::string_view kind) {
  return std::any_of(std::begin(kKinds), std::end(kKinds),
                     [&](const char* k) { return kind == k; });
}

/// Same rule as mesh_add_plugin: [a-z0-9][a-z0-9_-]*.
bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    (i > 0 && (c == '-' || c == '_'));
    if (!ok) return false;
  }
  return true;
}

/// Owns everything one loaded plugin needs. Members are destroyed in reverse order of
/// declaration, after the destructor body: the plugin object first (destroy, in the body), then
/// the logger and the context it referred to, and the library last.
struct Holder {
  boost::dll::shared_library library;  // empty for in-memory descriptors
  common::PluginLogger logger;
  sdk::HostContext host;
  sdk::Plugin* plugin = nullptr;
  void (*destroy)(sdk::Plugin*) noexcept = nullptr;

  explicit Holder(const std::string& name) : logger(name) {}
  Holder(const Holder&) = delete;
  Holder& operator=(const Holder&) = delete;
  ~Holder() {
    if (plugin && destroy) destroy(plugin);
  }
};

/// "built for SDK ABI 2.0; this program supports 1.0".
std::string abi_text(std::uint32_t major, std::uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

/// Checks a descriptor and, when it passes, creates the plugin object. `where` names the source
/// in messages (the file path, or "<memory>"). `file_kind`/`file_name` are what the file name
/// says (empty for in-memory descriptors); `expected_kind` is what the caller asked for.
sdk::Result<LoadedPlugin> instantiate(const mesh_plugin_info* info, const std::string& where,
                                      const std::string& expected_kind,
                                      const std::string& file_kind, const std::string& file_name,
                                      const LoadOptions& options,
                                      boost::dll::shared_library library) {
  auto refuse = [&](const std::string& why) {
    return sdk::fail(ErrorCode::FailedPrecondition, "plugin " + where + ": " + why);
  };
  if (info == nullptr) return refuse(std::string(MESH_PLUGIN_INFO_SYMBOL) + "() returned null");

  // The two version fields exist in every ABI; read them before anything else.
  if (info->abi_major != MESH_SDK_ABI_MAJOR || info->abi_minor > MESH_SDK_ABI_MINOR) {
    // Name the plugin too: ABI 1 and 2 share the version-1 descriptor prefix (name, version), so
    // a plugin of either major that reports at least that much can be named safely.
    std::string who;
    if ((info->abi_major == 1 || info->abi_major == 2) && info->struct_size >= kDescriptorV1Size &&
        info->name != nullptr && info->version != nullptr)
      who = "'" + common::printable(info->name) + "' version " + common::printable(info->version) + " is ";
    std::string hint;
    if (info->abi_major < MESH_SDK_ABI_MAJOR)
      hint = "; rebuild it against this SDK (ABI 2 changed the provider interface: docs/decisions/0038)";
    return refuse(who + "built for SDK ABI " + abi_text(info->abi_major, info->abi_minor) +
                  "; this program supports " + abi_text(MESH_SDK_ABI_MAJOR, MESH_SDK_ABI_MINOR) +
                  " (the major must match and the minor must not be newer)" + hint);
  }
  if (info->struct_size < kDescriptorV1Size)
    return refuse("descriptor is " + std::to_string(info->struct_size) +
                  " bytes, smaller than the " + std::to_string(kDescriptorV1Size) +
                  " bytes of an ABI 1 descriptor");
  if (info->kind == nullptr || info->name == nullptr || info->version == nullptr ||
      info->create == nullptr || info->destroy == nullptr)
    return refuse("descriptor lacks kind, name, version, create or destroy");

  const std::string kind(info->kind);
  const std::string name(info->name);
  if (!known_kind(kind))
    return refuse("unknown plugin kind '" + kind +
                  "' (valid: provider, transport, store, stage, report)");
  if (!valid_name(name))
    return refuse("plugin name '" + name + "' must match [a-z0-9][a-z0-9_-]*");
  if (!file_kind.empty() && (kind != file_kind || name != file_name))
    return refuse("descriptor says kind '" + kind + "' name '" + name + "', but the file name says " +
                  "kind '" + file_kind + "' name '" + file_name + "' (this descriptor belongs in a file " +
                  "named " + plugin_file_name(kind, name) + ")");
  if (!expected_kind.empty() && kind != expected_kind)
    return refuse("is a " + kind + " plugin, expected a " + expected_kind + " plugin");

  // The C++ ABI fingerprint (decision 0040): plain integers, read before any C++ call. The
  // versions above say which SDK the plugin was built against, this says whether its C++ types
  // (std::string, Value, ...) have the layout this program's have.
  auto refuse_named = [&](const std::string& why) {
    return sdk::fail(ErrorCode::FailedPrecondition,
                     "plugin " + where + " ('" + name + "' " + info->version + ") " + why);
  };
  if (info->struct_size < kDescriptorFingerprintSize || info->cxx_abi == nullptr ||
      info->cxx_abi->struct_size < sdk::cxx_abi_detail::kMinimumSize)
    return refuse_named("carries no C++ ABI fingerprint (descriptor " +
                  std::to_string(info->struct_size) + " bytes); rebuild it with the MESH_PLUGIN " +
                  "macro of SDK " MESH_SDK_VERSION);
  if (const auto diff = sdk::cxx_abi_differences(*info->cxx_abi, kHostCxxAbi); !diff.empty()) {
    std::string what;
    for (const auto& d : diff) what += (what.empty() ? "" : "; ") + d;
    return refuse_named("was built for another C++ ABI (" + what + "). Plugin: " +
                  sdk::describe_cxx_abi(*info->cxx_abi) + ". This program: " +
                  sdk::describe_cxx_abi(kHostCxxAbi) +
                  ". Rebuild the plugin against the same standard library and ABI settings");
  }

  auto holder = std::make_shared<Holder>(name);
  holder->library = std::move(library);
  holder->host.abi_major = MESH_SDK_ABI_MAJOR;
  holder->host.abi_minor = MESH_SDK_ABI_MINOR;
  holder->host.logger = &holder->logger;
  holder->host.role = options.role;
  if (!options.state_base.empty()) {
    const std::string dir = options.state_base + "/plugins/" + name;
    if (auto made = common::make_dirs(dir, 0700); !made)
      return sdk::fail(made.error().code,
                       "plugin " + where + ": state directory: " + made.error().message);
    holder->host.state_dir = dir;
  }

  sdk::Plugin* plugin = info->create(&holder->host);
  if (plugin == nullptr)
    return sdk::fail(ErrorCode::Failed,
                     "plugin " + where + ": create() returned nullptr (see the log lines of plugin=" +
                         name + ")");
  holder->plugin = plugin;
  holder->destroy = info->destroy;

  LoadedPlugin out;
  out.plugin = std::shared_ptr<sdk::Plugin>(holder, plugin);
  out.path = where;
  out.kind = kind;
  out.name = name;
  out.version = info->version;
  out.description = info->description ? info->description : "";
  out.abi_major = info->abi_major;
  out.abi_minor = info->abi_minor;
  out.cxx_abi = sdk::describe_cxx_abi(*info->cxx_abi);
  return out;
}

/// Splits "mesh-<kind>-<name>.so" into kind and name; false when the file name has another form.
bool split_file_name(const std::string& file, std::string& kind, std::string& name) {
  constexpr std::string_view prefix = "mesh-", suffix = ".so";
  std::string_view f(file);
  if (f.size() <= prefix.size() + suffix.size() || f.substr(0, prefix.size()) != prefix ||
      f.substr(f.size() - suffix.size()) != suffix)
    return false;
  f = f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
  const auto dash = f.find('-');  // kinds contain no '-'; names may
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == f.size()) return false;
  kind = std::string(f.substr(0, dash));
  name = std::string(f.substr(dash + 1));
  return true;
}

/// True when `path` exists as any directory entry, or cannot be looked at for a reason other
/// than its absence (the load then reports that reason).
bool entry_exists(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(path, ec);
  if (ec) return ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory;
  return std::filesystem::exists(st);
}

/// The "shadowed" warning: the same plugin file in two plugin directories.
void warn_shadowed(const std::string& loaded, const std::string& other) {
  common::logger()->warn(
      "plugin {} is in more than one plugin directory: loading {}, not {} (the first directory of "
      "plugins.dir holding a plugin wins; remove one of the two) outcome=shadowed",
      common::printable(std::filesystem::path(loaded).filename().string()), common::printable(loaded),
      common::printable(other));
}

/// The `mesh-*.so` entries of `dir` as full paths, sorted; an error when it cannot be read.
sdk::Result<std::vector<std::string>> plugin_files_in(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec)
    return sdk::fail(ec == std::errc::no_such_file_or_directory ? ErrorCode::NotFound
                     : ec == std::errc::permission_denied      ? ErrorCode::PermissionDenied
                                                               : ErrorCode::Failed,
                     "plugin directory " + dir + ": " + ec.message());
  std::vector<std::string> files;
  for (const auto& entry : it) {
    const std::string file = entry.path().filename().string();
    if (file.size() > 8 && file.compare(0, 5, "mesh-") == 0 &&
        file.compare(file.size() - 3, 3, ".so") == 0)
      files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

/// The names of the `kind` plugins in `dir` (from file names), unsorted; none when unreadable.
std::vector<std::string> plugin_names(const std::string& dir, const std::string& kind) {
  const std::string prefix = "mesh-" + kind + "-", suffix = ".so";
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.size() > prefix.size() + suffix.size() && f.rfind(prefix, 0) == 0 &&
        f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0)
      found.push_back(f.substr(prefix.size(), f.size() - prefix.size() - suffix.size()));
  }
  return found;
}

std::string join_names(std::vector<std::string> found) {
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  std::string out;
  for (const auto& n : found) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

}  // namespace

PluginFile find_plugin_file(const PluginDirs& dirs, const std::string& kind, const std::string& name) {
  PluginFile out;
  const std::string file = plugin_file_name(kind, name);
  for (const auto& dir : dirs) {
    const std::string path = dir + "/" + file;
    if (!entry_exists(path)) continue;
    if (out.path.empty())
      out.path = path;
    else
      out.shadowed.push_back(path);
  }
  return out;
}

std::string describe_dirs(const PluginDirs& dirs) {
  std::string out;
  for (const auto& d : dirs) out += (out.empty() ? "" : ", ") + common::printable(d);
  return out;
}

sdk::Result<LoadedPlugin> load_plugin(const PluginDirs& dirs, const std::string& kind,
                                      const std::string& name, const LoadOptions& options) {
  if (dirs.size() == 1) return load_plugin(dirs.front(), kind, name, options);
  const PluginFile found = find_plugin_file(dirs, kind, name);
  if (found.path.empty())
    return sdk::fail(ErrorCode::NotFound, "plugin file " + plugin_file_name(kind, name) +
                                              " is in none of the plugin directories " +
                                              describe_dirs(dirs));
  for (const auto& other : found.shadowed) warn_shadowed(found.path, other);
  return load_plugin_file(found.path, kind, options);
}

std::vector<sdk::Result<LoadedPlugin>> load_all(const PluginDirs& dirs, const LoadOptions& options) {
  if (dirs.size() == 1) return load_all(dirs.front(), options);
  namespace fs = std::filesystem;
  std::vector<sdk::Result<LoadedPlugin>> out;
  std::vector<std::string> chosen;  // full paths, the first directory's file for each name
  std::map<std::string, std::string> by_file;  // file name -> chosen path
  bool any_dir = false;
  for (const auto& dir : dirs) {
    auto files = plugin_files_in(dir);
    if (!files) {
      if (files.error().code != ErrorCode::NotFound) out.push_back(sdk::fail(files.error()));
      continue;
    }
    any_dir = true;
    for (const auto& f : *files) {
      const std::string file = fs::path(f).filename().string();
      auto [it, fresh] = by_file.emplace(file, f);
      if (fresh)
        chosen.push_back(f);
      else
        warn_shadowed(it->second, f);
    }
  }
  if (!any_dir && out.empty()) {
    out.push_back(sdk::fail(ErrorCode::NotFound,
                            "none of the plugin directories exists: " + describe_dirs(dirs)));
    return out;
  }
  std::sort(chosen.begin(), chosen.end(), [](const std::string& a, const std::string& b) {
    return fs::path(a).filename() < fs::path(b).filename();
  });
  for (const auto& f : chosen) out.push_back(load_plugin_file(f, "", options));
  return out;
}

std::string plugin_names_in(const PluginDirs& dirs, const std::string& kind) {
  std::vector<std::string> all;
  for (const auto& dir : dirs) {
    auto names = plugin_names(dir, kind);
    all.insert(all.end(), names.begin(), names.end());
  }
  return join_names(std::move(all));
}

std::string plugin_file_name(const std::string& kind, const std::string& name) {
  return "mesh-" + kind + "-" + name + ".so";
}

sdk::Result<LoadedPlugin> load_plugin(const std::string& dir, const std::string& kind,
                                      const std::string& name, const LoadOptions& options) {
  return load_plugin_file(dir + "/" + plugin_file_name(kind, name), kind, options);
}

sdk::Result<LoadedPlugin> load_plugin_file(const std::string& path, const std::string& expected_kind,
                                           const LoadOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    if (ec && ec != std::errc::no_such_file_or_directory)
      return sdk::fail(ec == std::errc::permission_denied ? ErrorCode::PermissionDenied
                                                          : ErrorCode::Failed,
                       "plugin file " + path + ": " + ec.message());
    return sdk::fail(ErrorCode::NotFound, "plugin file " + path + " does not exist");
  }
  if (!fs::is_regular_file(status))
    return sdk::fail(ErrorCode::FailedPrecondition,
                     "plugin file " + path + " is not a regular file");

  // Checked before dlopen so that a misnamed file's initialisers never run.
  std::string file_kind, file_name;
  if (!split_file_name(fs::path(path).filename().string(), file_kind, file_name))
    return sdk::fail(ErrorCode::FailedPrecondition,
                     "plugin file " + path + " is not named mesh-<kind>-<name>.so");
  if (!expected_kind.empty() && file_kind != expected_kind)
    return sdk::fail(ErrorCode::FailedPrecondition, "plugin file " + path + " is named as a " +
                                                        file_kind + " plugin, expected a " +
                                                        expected_kind + " plugin");

  boost::dll::shared_library library;
  boost::dll::fs::error_code load_ec;
  // Clear any stale dlerror() so the one read below is this load's.
  (void)::dlerror();
  library.load(boost::dll::fs::path(path),
               boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, load_ec);
  if (load_ec || !library.is_loaded()) {
    // Boost.DLL reports only a generic error code; dlerror() still holds the loader's reason.
    const char* why = ::dlerror();
    return sdk::fail(ErrorCode::FailedPrecondition,
                     "cannot load plugin " + path + ": " +
                         (why ? std::string(why) : load_ec.message()));
  }
  if (!library.has(MESH_PLUGIN_INFO_SYMBOL))
    return sdk::fail(ErrorCode::FailedPrecondition,
                     "plugin " + path + " does not export the symbol " MESH_PLUGIN_INFO_SYMBOL
                     " (was it built with the MESH_PLUGIN macro?)");
  auto& entry = library.get<const mesh_plugin_info*() noexcept>(MESH_PLUGIN_INFO_SYMBOL);
  // The entry point is plain C returning a pointer to static data: safe before any check.
  const mesh_plugin_info* info = entry();
  return instantiate(info, path, expected_kind, file_kind, file_name, options, std::move(library));
}

sdk::Result<LoadedPlugin> load_descriptor(const mesh_plugin_info* info,
                                          const std::string& expected_kind,
                                          const LoadOptions& options) {
  return instantiate(info, "<memory>", expected_kind, {}, {}, options, {});
}

std::vector<sdk::Result<LoadedPlugin>> load_all(const std::string& dir, const LoadOptions& options) {
  std::vector<sdk::Result<LoadedPlugin>> out;
  auto files = plugin_files_in(dir);
  if (!files) {
    out.push_back(sdk::fail(files.error()));
    return out;
  }
  out.reserve(files->size());
  for (const auto& f : *files) out.push_back(load_plugin_file(f, "", options));
  return out;
}

std::string plugin_names_in(const std::string& dir, const std::string& kind) {
  return join_names(plugin_names(dir, kind));
}

}  // namespace mesh::loader
