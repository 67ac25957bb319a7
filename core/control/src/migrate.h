// `mesh-control migrate --to jetstream-kv` (docs/decisions/0088): moves the sqlite store named by
// a control plane's config into a new JetStream stream of the jetstream-kv store.
#pragma once

#include <string>

namespace mesh::control {

/// What the migrate command was given.
struct MigrateOptions {
  std::string config_path;  ///< the control plane's config (its [store] is still sqlite)
  std::string to;           ///< the target store plugin: only "jetstream-kv"
  int replicas = 0;         ///< the stream's replicas; 0: the plugin's default (1)
  std::string prefix;       ///< the stream's name; "": the plugin's default (MESH_STORE)
};

/// Runs the migration: loads the config (its [store] must be the sqlite store, and mesh-control
/// should be stopped: a write after the copy is not moved), opens the jetstream-kv plugin with the
/// [transport] servers and credentials and `import_sqlite` = the sqlite file, which makes a
/// consistent copy of the file the new stream's first operation (refused when the stream holds
/// operations already), then checks the new store answers as the old one (nodes, removed nodes,
/// latest delivery, tokens) and prints what to change in the config. The sqlite file is left as it
/// was. Returns the process exit code (0; kExitUsage for a bad config or option, naming the
/// file, field or option; otherwise exit_code_for the store's error: 3 when the servers cannot be
/// reached, 1 when the stream holds operations already). Logs through spdlog.
int run_migrate(const MigrateOptions& options);

}  // namespace mesh::control
