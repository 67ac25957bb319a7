// Rotating the control plane's signing key (decision record 98; README "Rotate the control
// plane's signing key"). `<keys_dir>/control.key` stays the root seed the heartbeat master and
// the broker nkeys are derived from (so no host enrols again); once rotated, the signing key is
// the seed in `<keys_dir>/signing.json` (mode 0600), which also holds the chain of rotation
// statements from control.key's own signing key to it. One file, written atomically: the
// rotation's commit point.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "mesh/control/trust.h"
#include "mesh/sdk/result.h"

namespace mesh::control {

/// Replaces `keys.signing` by the rotated signing key of `<keys_dir>/signing.json` and sets
/// `keys.key_chain` (the Mesh-Key-Chain header value), when the file exists; leaves `keys`
/// alone when it does not. `keys` must come from control.key (the chain must start at its
/// signing key). Errors: InvalidArgument naming signing.json when it does not parse, its seed is
/// not the chain's newest key, or its chain does not walk from control.key's key (forged or
/// from another control plane); the file system's errors. Not thread-safe with
/// rotate_signing_key on the same directory (both run under keys.lock). `rotations`, when
/// given, is set to the number of statements in the chain (0 without the file).
sdk::Result<void> apply_key_rotations(const std::string& keys_dir, ControlKeys& keys, std::size_t* rotations = nullptr);

/// Follows `<keys_dir>/signing.json` for a running control plane (decision record 103): an
/// instance picks up a rotation another process made (`mesh-control rotate-key`) without a
/// restart. Thread-safe.
class SigningKeyWatch {
 public:
  /// `root` is control.key's own key pair (where every chain starts); `now` the key in force.
  SigningKeyWatch(std::string keys_dir, common::KeyPair root, SigningKey now);
  /// The key in force; at most once per `interval` (default 0: at every call — one stat, a
  /// few microseconds beside a signature, so that no instance signs with the old key while
  /// another already signs with the new one) stats signing.json (inode, size, mtime) and, when
  /// it changed, reads it again (apply_key_rotations from `root`). A
  /// chain longer than the one in force that verifies is taken (logged: `signing key reloaded
  /// keys_dir=... old_key=... new_key=... rotations=N`); a file that does not verify, or whose
  /// chain is not longer (a restored older file), is logged as a warning once per change and the
  /// key in force stays.
  std::shared_ptr<const SigningKey> current();
  /// Looks at the file now, whatever the interval (tests, and after rotate_signing_key).
  void check_now();
  void set_interval(std::chrono::milliseconds interval) { interval_ms_ = interval.count(); }

 private:
  struct Stamp {
    bool exists = false;
    std::uint64_t dev = 0, ino = 0;
    std::int64_t size = 0, mtime_ns = 0;
    bool operator==(const Stamp&) const = default;
  };
  static Stamp stamp_of(const std::string& path);
  void reload_locked(const Stamp& seen);

  const std::string keys_dir_;
  const common::KeyPair root_;
  std::mutex mu_;
  std::shared_ptr<const SigningKey> current_;
  Stamp seen_;
  std::atomic<std::int64_t> next_check_ns_{0};
  std::atomic<std::int64_t> interval_ms_{0};
};

/// What rotate_signing_key did.
struct Rotated {
  std::string old_key;  ///< raw 32 bytes
  std::string new_key;  ///< raw 32 bytes
  std::size_t chain_length = 0;
};

/// Makes a new signing key: a statement {old_key, new_key, at_ms = now_ms} signed by the current
/// signing key and by the new one, appended to the chain, and the new seed, written together
/// into signing.json (atomically, 0600), then control.pub (the new public key). Takes
/// `<keys_dir>/keys.lock`. Running instances keep signing with the old key until restarted.
/// Errors: FailedPrecondition when control.key does not exist (the control plane never ran);
/// InvalidArgument (control.key or signing.json corrupt, named); InvalidArgument when the chain
/// is already common::kMaxKeyChain long; the file system's errors (nothing is changed).
sdk::Result<Rotated> rotate_signing_key(const std::string& keys_dir, std::int64_t now_ms);

/// `mesh-control rotate-key --config FILE`: rotate_signing_key on the config's keys_dir; prints
/// the old and new public keys. Returns the exit code (0; 2 for a config error or a control plane that never ran; 1 otherwise).
int rotate_key_command(const std::string& config_path);

}  // namespace mesh::control
