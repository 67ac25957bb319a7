// Loading the control plane's store plugin from its config, and the commands that work on the
// store without running the control plane: `mesh-control backup FILE` and `restore FILE`
// (docs/decisions/0085).
#pragma once

#include <memory>
#include <string>

#include "mesh/control/config.h"
#include "mesh/loader/loader.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/store.h"

namespace mesh::control {

/// A plugin named in the config that cannot be loaded: "control.toml:9: store.plugin: no store
/// plugin 'x': <why> (store plugins in DIR: sqlite)". `kind` is "store" or "transport".
std::string plugin_error(const ControlConfig& config, const std::string& kind, const std::string& name,
                         const sdk::Error& e);

/// The [store] plugin of `config`, loaded, its table checked against the plugin's schema and
/// configured — not opened.
struct ConfiguredStore {
  loader::LoadedPlugin plugin;
  std::shared_ptr<sdk::Store> store;
};
/// Errors (InvalidArgument, the message ready to print): the plugin cannot be loaded (named as
/// plugin_error does), is not a store, or its table is wrong (naming the config file and key).
sdk::Result<ConfiguredStore> configure_store(const ControlConfig& config, const loader::LoadOptions& options);

/// `mesh-control backup --config FILE OUT`: opens the configured store beside a running
/// control plane (the sqlite store shares its file; a first open migrates an older schema) and
/// writes a consistent copy to OUT (Store::backup). Prints "backup written: OUT" on stdout.
/// Returns the exit code (common/exit_codes.h): 0, 2 for a config or usage error or a store that
/// cannot make backups, 1 when the backup failed; the error is logged naming the file.
int backup_command(const std::string& config_path, const std::string& out);

/// `mesh-control restore --config FILE IN`: replaces what the configured store holds with the
/// backup IN (Store::restore). Refused (exit 1, nothing changed) while any process has the store
/// open — stop mesh-control first — or when IN is not a good backup of this store plugin (exit
/// 2). Keys are not in a backup: the state_dir's key files stay as they are.
int restore_command(const std::string& config_path, const std::string& in);

}  // namespace mesh::control
