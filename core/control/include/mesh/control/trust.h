// The control plane's trust material (docs/security.md): its signing key, the operators allowed
// to use the API with their roles, and the first operator identity written on first start.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/common/crypto.h"
#include "mesh/sdk/result.h"

namespace mesh::control {

/// `<state_dir>/control.key`: the Ed25519 seed (hex, mode 0600). Declarations and enrolment
/// replies are signed with it; hosts pin its public key at enrolment. The heartbeat master secret
/// (from which each node's heartbeat MAC key is derived) is derived from the same seed with a
/// keyed BLAKE2b under its own context, so one file is the whole secret.
/// One signing key with the chain that leads to it: what signs a message and the Mesh-Key-Chain
/// header that goes with it, taken together.
struct SigningKey {
  common::KeyPair pair;
  std::string key_chain;       ///< the Mesh-Key-Chain header value; "" before any rotation
  std::size_t rotations = 0;   ///< statements in the chain (0: control.key's own key)
};

class SigningKeyWatch;  // mesh/control/key_rotation.h

struct ControlKeys {
  /// The signing key when the keys were loaded. Sign with current() instead: it follows a
  /// rotation made after the start (by `mesh-control rotate-key`, through any instance).
  common::KeyPair signing;
  std::string heartbeat_master;  ///< 32 bytes
  /// The Mesh-Key-Chain header value (common/key_rotation.h) attached to every message signed
  /// with `signing` once the key was rotated (mesh/control/key_rotation.h); "" before.
  std::string key_chain;
  /// Set by load_or_create_control_keys: watches `<keys_dir>/signing.json` (decision record
  /// 103). Null (keys made from a seed, tests): current() is `signing` and `key_chain`.
  std::shared_ptr<SigningKeyWatch> watch;

  /// The signing key to sign with now and its chain, one snapshot (never null). With a watch,
  /// at every call it looks (one stat) whether signing.json changed and takes a newer rotation
  /// (logged once: `signing key reloaded ...`); a file that does not verify is logged and the key
  /// in force stays. Keep the pointer for one message: its key and its chain go together.
  /// Thread-safe.
  std::shared_ptr<const SigningKey> current() const;
};

/// Reads `<state_dir>/control.key`, or creates it (0600) when missing, and writes
/// `<state_dir>/control.pub` (the public key, hex, 0644) for operators who pin it by hand.
/// `created` tells which. A rotated signing key (`<state_dir>/signing.json`, see
/// apply_key_rotations) replaces control.key's own, and control.pub names it. Errors: InvalidArgument (a corrupt key file, named), Failed.
sdk::Result<ControlKeys> load_or_create_control_keys(const std::string& state_dir, bool* created = nullptr);
/// The keys for a given seed (tests).
ControlKeys control_keys_from_seed(const std::string& seed);

/// One operator as the control plane knows it: never the secret key.
struct OperatorRecord {
  std::string name;
  std::string role;        ///< admin | deployer | reader
  std::string public_key;  ///< raw 32 bytes
  std::int64_t added_at_ms = 0;
  std::string added_by;    ///< the operator who added it ("" for the first admin)
};

/// The operators allowed to use the API, kept in `<keys_dir>/operators.json` (0600, written
/// atomically on every change; decision record 16). Thread-safe. Several instances sharing
/// keys_dir share the file (decision record 90): find(), list() and empty() read it again when it
/// changed (stat: inode, size, mtime; a file that no longer parses is logged and the operators
/// known before stay), and add()/remove() read it again and write it under an exclusive lock
/// (`operators.lock` beside it), so that no instance's change is lost to another's.
class OperatorRegistry {
 public:
  /// Loads `path` (a missing file is an empty registry). An empty `path` keeps the registry in
  /// memory only (tests). Errors: InvalidArgument naming the file when it is corrupt.
  static sdk::Result<std::shared_ptr<OperatorRegistry>> open(const std::string& path);

  /// How the file looked when last read or written (internal; public for the loader in
  /// trust.cpp).
  struct FileStamp {
    bool exists = false;
    std::uint64_t dev = 0;
    std::uint64_t ino = 0;
    std::int64_t size = 0;
    std::int64_t mtime_ns = 0;
    bool operator==(const FileStamp&) const = default;
  };

  std::optional<OperatorRecord> find(std::string_view name) const;
  std::vector<OperatorRecord> list() const;
  bool empty() const;
  /// Adds an operator. Errors: AlreadyExists, InvalidArgument (name, role, key), Failed (write).
  sdk::Result<void> add(const OperatorRecord& op);
  /// Removes an operator. Errors: NotFound; FailedPrecondition when it is the last admin.
  sdk::Result<void> remove(std::string_view name);

 private:
  sdk::Result<void> save_locked() const;
  /// Reads the file again when its stamp changed (mu_ held).
  void refresh_locked() const;
  std::string path_;
  mutable std::mutex mu_;
  mutable std::vector<OperatorRecord> ops_;
  mutable FileStamp loaded_;
};

/// On a first start (no operator yet): creates operator "admin" (role admin) and writes its
/// identity to `<state_dir>/admin.identity` (mode 0600), with `control_public_key` (raw 32
/// bytes; empty: none) as its `control_key`, the key `mesh` verifies replies with (decision
/// record 31). Returns true when it did so. Never replaces an existing admin.identity's keys; one
/// written before signed API replies (no `control_key`) gets the key added, atomically, so that
/// it keeps working with `mesh`.
sdk::Result<bool> bootstrap_admin(const std::string& state_dir, OperatorRegistry& operators, std::int64_t now_ms,
                                  const std::string& control_public_key = {});

/// The least role that may run API operation `op`, from the table of operations
/// (mesh/control/operations.h): "reader" (nodes, node.show, report, history), "deployer"
/// (declare, rollback) or "admin" (token.*, operator.*, node.remove, and any name not in the
/// table). Thread-safe. Defined in operations.cpp.
std::string_view role_needed(std::string_view op);
/// Whether an operator of role `role` ("reader", "deployer", "admin"; anything else may run
/// nothing) may run `op`: roles are ordered reader < deployer < admin. Thread-safe.
bool role_allows(std::string_view role, std::string_view op);

}  // namespace mesh::control
