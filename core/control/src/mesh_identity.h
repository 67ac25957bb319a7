// The mesh's identity in its store (decision record 0117): the first control plane to open a
// store writes the record ("mesh", "identity") holding a fingerprint of its root key
// (control.key's seed: the heartbeat master, from which heartbeat MAC keys and broker nkeys come;
// a signing key rotation does not change it); every later instance must have the same.
//
// Internal to mesh-control. Thread safety: as the store's calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mesh/control/trust.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/store.h"

namespace mesh::control::detail {

/// The record's namespace and key.
inline constexpr const char* kMeshIdentityNs = "mesh";
inline constexpr const char* kMeshIdentityKey = "identity";

/// The record's value for `keys`: {"mesh_id":"<64 hex>"}, a keyed hash of a constant under the
/// heartbeat master (it reveals nothing of the key). Deterministic.
std::string mesh_identity_value(const ControlKeys& keys);

/// Writes the record when the store has none (compare-and-swap on "not there yet", so of two
/// first instances one writes and the other compares), or compares it with `keys`'. A store
/// that keeps no records (Unsupported) is not checked. Errors: FailedPrecondition naming
/// `keys_dir` when the store belongs to another mesh; the store's own.
sdk::Result<void> check_or_claim_mesh_identity(sdk::Store& store, const ControlKeys& keys, const std::string& keys_dir,
                                               std::int64_t now_ms);

/// Before a control.key is made in an empty `keys_dir` (a first start): whether `store` is new.
/// A store that holds the mesh's identity record, or any enrolled node (a store from before the
/// record), belongs to a mesh whose keys are elsewhere: a new key here would be a second mesh key
/// and every host would refuse it (newuser finding 3). Errors: FailedPrecondition naming
/// `keys_dir` and control.key (nothing is written); the store's own.
sdk::Result<void> check_store_is_new(sdk::Store& store, const std::string& keys_dir);

/// The record ("mesh", "signing") (decision record 194): the newest signing key of the mesh's
/// rotation chain that an instance signed with, {"rotations": N, "key": "<64 hex>"}.
inline constexpr const char* kSigningKeyRecord = "signing";

/// Compares `signing` (this instance's key in force, from its keys_dir) with the record and
/// writes the record when it has none or an older one (compare-and-swap on its version; a lost
/// race is compared again). Errors: FailedPrecondition naming `keys_dir` and signing.json when
/// the record names a longer chain (this keys_dir lacks the newest signing.json: it would sign
/// with a retired key, which hosts and `mesh` that pinned the new one refuse) or the same length
/// with another key (two keys_dirs rotated apart); the store's own. A store that keeps no records
/// is not checked. `written`, when given, is set when this call wrote the record.
sdk::Result<void> check_or_record_signing_key(sdk::Store& store, const SigningKey& signing, const std::string& keys_dir,
                                              std::int64_t now_ms, bool* written = nullptr);

/// The identity record's value in the backup file `path` (the SQLite format both stores' backups
/// share), read-only; nullopt when the backup has no such record (a release before 0117) or no
/// records table. Errors: InvalidArgument naming the file when it cannot be read as SQLite.
sdk::Result<std::optional<std::string>> backup_mesh_identity(const std::string& path);

}  // namespace mesh::control::detail
