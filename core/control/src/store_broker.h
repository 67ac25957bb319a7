// A store that connects to the broker itself (`jetstream-kv`, decision records 87 and 0116):
// with [broker] it connects as the control plane (keys_dir/broker.nk, whose user has the
// store's JetStream rights and nobody else has); without [broker] its stream is open to every
// client of the servers, which mesh-control says loudly at start.
//
// Internal to mesh-control. Thread safety: none (called once at start).
#pragma once

#include "mesh/control/config.h"
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

/// `mesh-control broker-config` when the store cannot be opened (`why`): the servers of a
/// jetstream-kv store need the authorization file before they can serve it. When [broker]'s
/// file does not exist yet, writes it with no nodes (the control plane's user, with the store's
/// rights, and the enrolment and operators' users), says so on stderr and returns 0; `mesh-control
/// run` rewrites it with the nodes. When it exists, it is kept (the nodes it lists are only in the
/// store) and 1 is returned with `why` — 2 when `why` is keys_dir's missing control.key (NotFound)
/// or the servers refusing the control plane's nkey (refused_as_control_plane), naming keys_dir.
/// Prints the file's path on stdout on success.
int first_authorization_without_store(const ControlConfig& config, const sdk::Error& why);

}  // namespace mesh::control::detail
