#include "mesh/control/store_admin.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>
#include <optional>

#include "mesh/common/config.h"
#include "mesh/common/crypto.h"
#include "mesh/common/error_text.h"
#include "mesh/common/exit_codes.h"
#include "mesh/common/logging.h"
#include "mesh/control/trust.h"
#include "mesh_identity.h"
#include "store_broker.h"

namespace mesh::control {
namespace {

/// Backup and restore were appended to the Store table in SDK ABI 2.2: an older plugin's table
/// has no such entries, so they are never called on it.
constexpr std::uint32_t kBackupAbiMinor = 2;

struct Loaded {
  std::optional<ControlConfig> config;
  std::optional<ConfiguredStore> store;
  int exit_code = 0;
};

Loaded load(const std::string& config_path, const char* command) {
  Loaded out;
  auto file = common::ConfigFile::load(config_path);
  if (!file) {
    common::logger()->error("{}", common::described(file.error()));
    out.exit_code = common::kExitUsage;
    return out;
  }
  auto config = load_control_config(*file);
  if (!config) {
    common::logger()->error("{}", config.error().message);
    out.exit_code = common::kExitUsage;
    return out;
  }
  if (auto ok = common::crypto_init(); !ok) {
    common::logger()->error("{}", common::described(ok.error()));
    out.exit_code = common::kExitFailed;
    return out;
  }
  loader::LoadOptions options;
  options.role = "control";
  options.state_base = config->state_dir;
  auto store = configure_store(*config, options);
  if (!store) {
    common::logger()->error("{}", store.error().message);
    out.exit_code = common::kExitUsage;
    return out;
  }
  if (store->plugin.abi_minor < kBackupAbiMinor) {
    common::logger()->error("{}: the store plugin '{}' ({}) was built with SDK ABI {}.{}, before backups (2.{}); "
                            "rebuild it against this SDK to {}",
                            config_path, config->store_plugin, store->plugin.path, store->plugin.abi_major,
                            store->plugin.abi_minor, kBackupAbiMinor, command);
    out.exit_code = common::kExitUsage;
    return out;
  }
  out.config = std::move(*config);
  out.store = std::move(*store);
  return out;
}

/// nullopt when the backup may be restored (same mesh, or no identity to compare: warned), else
/// the exit code after logging why.
std::optional<int> check_backup_mesh(const ControlConfig& config, const std::string& in) {
  auto theirs = detail::backup_mesh_identity(in);
  if (!theirs) return std::nullopt;  // not readable as SQLite: the store's restore names it
  std::error_code ec;
  if (!std::filesystem::exists(config.keys_dir + "/control.key", ec)) {
    common::logger()->warn("restore: no control.key in keys_dir {}: cannot check that {} is a backup of this mesh",
                           config.keys_dir, in);
    return std::nullopt;
  }
  auto keys = load_or_create_control_keys(config.keys_dir);
  if (!keys) {
    common::logger()->error("control key: {}", common::described(keys.error()));
    return common::kExitFailed;
  }
  if (!*theirs) {
    common::logger()->warn("restore: {} holds no mesh identity (a backup made before it was recorded): it is "
                           "restored without checking that it is this mesh's",
                           in);
    return std::nullopt;
  }
  if (**theirs == detail::mesh_identity_value(*keys)) return std::nullopt;
  common::logger()->error("restore of store {} from {}: it is a backup of another mesh (its identity record does not "
                          "match the keys in keys_dir {}); nothing was changed",
                          config.store_plugin, in, config.keys_dir);
  return common::kExitUsage;
}

}  // namespace

std::string plugin_error(const ControlConfig& config, const std::string& kind, const std::string& name,
                         const sdk::Error& e) {
  if (e.code != sdk::ErrorCode::NotFound) return kind + " plugin: " + e.message;
  return config.file
      .error_at(kind + ".plugin", "no " + kind + " plugin '" + name + "': " + e.message + " (" + kind +
                                      " plugins in " + loader::describe_dirs(config.plugin_dirs) + ": " +
                                      loader::plugin_names_in(config.plugin_dirs, kind) + ")")
      .message;
}

sdk::Result<ConfiguredStore> configure_store(const ControlConfig& config, const loader::LoadOptions& options) {
  auto plugin = loader::load_plugin(config.plugin_dirs, "store", config.store_plugin, options);
  if (!plugin)
    return sdk::fail(sdk::ErrorCode::InvalidArgument, plugin_error(config, "store", config.store_plugin, plugin.error()));
  auto store = plugin->as<sdk::Store>();
  if (!store) return sdk::fail(sdk::ErrorCode::InvalidArgument, plugin->path + " is not a store plugin");
  auto table = plugin_table(config, "store", store->config_schema());
  if (!table) return sdk::fail(sdk::ErrorCode::InvalidArgument, table.error().message);
  if (auto ok = store->configure(*table); !ok)
    return sdk::fail(sdk::ErrorCode::InvalidArgument,
                     config.file.error_at(ok.error().path.empty() ? "store" : "store." + ok.error().path,
                                          ok.error().message)
                         .message);
  return ConfiguredStore{std::move(*plugin), std::move(store)};
}

int backup_command(const std::string& config_path, const std::string& out) {
  auto loaded = load(config_path, "make a backup");
  if (!loaded.store) return loaded.exit_code;
  auto& store = *loaded.store->store;
  if (auto ok = store.open(); !ok) return detail::store_open_failed(*loaded.config, ok.error());
  if (auto ok = store.backup(out); !ok) {
    common::logger()->error("backup of store {} to {}: {}", loaded.config->store_plugin, out,
                            common::described(ok.error()));
    return ok.error().code == sdk::ErrorCode::Unsupported ? common::kExitUsage : common::exit_code_for(ok.error().code);
  }
  common::logger()->info("backup written store={} file={}", loaded.config->store_plugin, out);
  std::cout << "backup written: " << out << "\n";
  return common::kExitOk;
}

int restore_command(const std::string& config_path, const std::string& in) {
  auto loaded = load(config_path, "restore a backup");
  if (!loaded.store) return loaded.exit_code;
  // A backup of another mesh (decision record 0117) would bring its nodes, and the broker
  // authorization rewritten from them would lock this mesh's hosts out.
  if (auto refused = check_backup_mesh(*loaded.config, in)) return *refused;
  if (auto ok = loaded.store->store->restore(in); !ok) {
    common::logger()->error("restore of store {} from {}: {}; nothing was changed", loaded.config->store_plugin, in,
                            common::described(ok.error()));
    return ok.error().code == sdk::ErrorCode::Unsupported ? common::kExitUsage : common::exit_code_for(ok.error().code);
  }
  common::logger()->info("store restored store={} file={}", loaded.config->store_plugin, in);
  std::cout << "restored " << in << " into store " << loaded.config->store_plugin
            << "; start mesh-control to serve it (its keys in " << loaded.config->state_dir
            << " are unchanged)\n";
  return common::kExitOk;
}

}  // namespace mesh::control
