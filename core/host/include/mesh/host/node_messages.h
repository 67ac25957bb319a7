// The node's side of two messages (docs/protocol.md), shared by mesh-host's daemon and mesh-sim:
// the checks a pushed (or fetched) declaration passes before its body is parsed, and the
// heartbeat with its MAC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "mesh/sdk/result.h"
#include "mesh/sdk/transport.h"

namespace mesh::host {

/// Checks the declaration message `m` for `node` in the protocol's order, before anything parses
/// its body: size (at most `max_bytes`), Mesh-Protocol, Mesh-Node equal to `node`
/// (misaddressed otherwise), Mesh-Revision (a number, at least 1), then Mesh-Signature against
/// `control_key` (the pinned control plane key, raw 32 bytes) over node, revision and body.
/// Returns the signed revision. Errors: InvalidArgument (size, Mesh-Revision), Unsupported
/// (protocol), PermissionDenied (misaddressed, unsigned, signature does not verify). Pure and
/// thread-safe.
sdk::Result<std::uint64_t> check_declaration_message(const sdk::Message& m, const std::string& node,
                                                     const std::string& control_key, std::size_t max_bytes);

/// The heartbeat of `node` (protocol "Heartbeat"): body {"node","at","applied_revision",
/// "host_version","state"} on mesh.heartbeat.<node> with Mesh-Node, and Mesh-Timestamp and
/// Mesh-MAC over it with `heartbeat_key` (raw 32 bytes). `at_ms` is the host's own clock (the
/// body's `at`), `stamp_ms` the timestamp the MAC covers (the host's clock plus the offset learnt
/// from the control plane). `state`: "idle", "applying" or "failed". Thread-safe.
sdk::Message heartbeat_message(const std::string& node, std::uint64_t applied_revision, const std::string& host_version,
                               const std::string& state, const std::string& heartbeat_key, std::int64_t at_ms,
                               std::int64_t stamp_ms);

}  // namespace mesh::host
