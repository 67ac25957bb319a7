// The node's identity in its state directory: `identity.json` (node name, enrolment time,
// generation, public key, the control plane's pinned public key; mode 0600), `node.key` (Ed25519
// secret key, hex, mode 0600) and `heartbeat.key` (the heartbeat MAC key, hex, mode 0600).
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

/// Reads the identity; nullopt when the node was never enrolled (no identity.json).
/// Errors: InvalidArgument naming the file when it is corrupt.
sdk::Result<std::optional<Identity>> load_identity(const std::string& state_dir);

/// Writes node.key and heartbeat.key (0600) then identity.json (0600), each atomically.
sdk::Result<void> save_identity(const std::string& state_dir, const Identity& id);

}  // namespace mesh::host
