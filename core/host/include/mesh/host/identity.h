// The node's identity in its state directory: `identity.json` (node name, enrolment time,
// generation, public key, the control plane's pinned public key, the digests of the key files
// below; mode 0600), `node.key` (Ed25519 secret key, hex, mode 0600), `heartbeat.key` (the
// heartbeat MAC key, hex, mode 0600) and `broker.nk` (the node's broker nkey seed, when the
// control plane manages broker permissions). identity.json is written last: the commit point.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mesh/sdk/result.h"

namespace mesh::host {

struct Identity {
  std::string node;
  std::int64_t enrolled_at_ms = 0;
  std::uint64_t generation = 0;
  std::string public_key;  ///< raw 32 bytes
  std::string secret_key;  ///< raw 64 bytes
  /// The control plane's Ed25519 public key (raw 32 bytes), pinned at enrolment: declarations
  /// must be signed with it. Empty for a node enrolled before declarations were signed.
  std::string control_key;
  /// The per-node heartbeat MAC key (raw 32 bytes) agreed at enrolment; empty as above.
  std::string heartbeat_key;
};

/// Reads the identity; nullopt when the node was never enrolled (no identity.json and no key
/// file). Errors: InvalidArgument naming the file when it is corrupt; FailedPrecondition when the
/// enrolment is incomplete (key files without identity.json, node.key not matching its public key,
/// or a key file whose digest is not the one identity.json recorded): the message names the file
/// and the commands that finish the enrolment. Not thread-safe with save_identity on the same dir.
sdk::Result<std::optional<Identity>> load_identity(const std::string& state_dir);

/// Writes an enrolment as one step: `broker_seed` into broker.nk (or removes a stale broker.nk
/// when nullopt), node.key and heartbeat.key, each atomically (0600), then identity.json (0600)
/// with the SHA-256 of each, last — the commit point load_identity() checks.
/// Errors: those of common::write_file_atomic (the file named).
sdk::Result<void> save_identity(const std::string& state_dir, const Identity& id,
                                const std::optional<std::string>& broker_seed = std::nullopt);

}  // namespace mesh::host
