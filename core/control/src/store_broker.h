// A store that connects to the broker itself (`jetstream-kv`, decision records 87 and 0116):
// with [broker] it connects as the control plane (keys_dir/broker.nk, whose user has the
// store's JetStream rights and nobody else has); without [broker] its stream is open to every
// client of the servers, which mesh-control says loudly at start.
//
// Internal to mesh-control. Thread safety: none (called once at start).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "mesh/control/broker.h"
#include "mesh/control/config.h"
#include "mesh/control/trust.h"
#include "mesh/sdk/result.h"

namespace mesh::control::detail {

/// Whether the store's open failed because the servers refused its credentials (an
/// authorization or authentication violation, or PermissionDenied).
bool refused_as_control_plane(const sdk::Error& e);

/// True when the store connects to the broker with the control plane's own nkey: [broker] is on,
/// the store is `jetstream-kv` and neither [store] nor [transport] names a user or nkey_seed.
bool store_connects_as_control_plane(const ControlConfig& config);

/// Makes sure keys_dir/broker.nk exists before the store is configured (it reads the seed then):
/// the control key is read under keys_dir/keys.lock and the seed written (0600) when missing or
/// different. A no-op unless store_connects_as_control_plane. The control key is never made here
/// (`mesh-control broker-config` makes it on a new mesh: first_authorization_without_store).
/// Errors: NotFound when keys_dir has no control.key, saying so; Failed,
/// PermissionDenied, InvalidArgument (a corrupt key file), each naming the file.
sdk::Result<void> prepare_store_broker_identity(const ControlConfig& config);

/// Logs, at warn level, that the `jetstream-kv` store's stream is open to any client of the
/// servers (forged operations, a purge) when [broker] is off and the store has no credentials of
/// its own. Nothing for another store.
void warn_if_store_stream_open(const ControlConfig& config);

/// Logs why the store could not be opened (`why`) and returns the exit code: 2 when the store
/// named one of its config keys (the error's path: a replicas mismatch, a prefix without broker
/// rights, import_sqlite; logged as `store.<key>`), else 1 (README "Exit codes"; decision record
/// 188).
int store_open_failed(const ControlConfig& config, const sdk::Error& why);

/// The enrolled nodes (name, generation, public key) of the sqlite store file `path` (a backup, or
/// a store to migrate), read-only; a node whose name is not valid is left out. Errors:
/// InvalidArgument (not a database, no nodes table: named), Unavailable (a read error).
sdk::Result<std::vector<sdk::NodeRecord>> sqlite_file_nodes(const std::string& path);

/// What write_store_rights did.
struct StoreRightsWritten {
  bool existed = false;     ///< there was a file before
  bool changed = false;     ///< its text changed (written)
  bool reloaded = false;    ///< a running nats-server was sent SIGHUP
  std::size_t nodes = 0;    ///< node users in the file now
  std::size_t from_file = 0;  ///< ... of which the file it replaced listed
  std::size_t added = 0;    ///< ... and these came from `nodes`
};

/// Writes [broker]'s authorization file with the control plane's user given the JetStream rights
/// of `stream` (decision records 116 and 188), keeping every node user of the file it replaces
/// (their nkeys, names and generations as the file lists them) and adding those of `nodes` it does
/// not list (by nkey); then reloads the servers (update_broker). Under `authorization.lock` beside
/// the file. Errors: InvalidArgument (path "control.keys_dir") when the file's control plane user
/// is not the one of `keys` (another keys_dir: the file is kept); FailedPrecondition when the file
/// is not one mesh-control wrote (kept); the file system's and update_broker's errors.
sdk::Result<StoreRightsWritten> write_store_rights(const ControlConfig& config, const ControlKeys& keys,
                                                   const std::string& stream, const std::vector<BrokerNode>& nodes);

/// `mesh-control broker-config` when the store cannot be opened (`why`: the servers are not
/// started, or they refuse the control plane's user the JetStream rights of the configured
/// stream, as after a change of [store] prefix for a restore, or with a file written for the
/// sqlite store). Writes the file with the JetStream rights of [store]'s stream, keeping the nodes
/// of the file it replaces and adding those of [store] import_sqlite (a backup) when set
/// (write_store_rights); with no file yet, the nodes of import_sqlite or none. Makes the control
/// key only when there is no file (a first start). Returns 0 when the file is right for the
/// configured stream (written, or already so while the servers are unreachable) and prints its
/// path on stdout; 1 when the servers refused rights the file already gives, or the file is not
/// mesh-control's (kept); 2 when keys_dir is not the file's (kept; no key is made). Logs why.
int authorization_without_store(const ControlConfig& config, const sdk::Error& why);

}  // namespace mesh::control::detail
