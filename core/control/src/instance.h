// What one instance of a control plane keeps for itself when several share a store and keys
// (decision record 90): its instance id, and the lock on the shared keys directory. Internal.
#pragma once

#include <string>

#include "mesh/sdk/result.h"

namespace mesh::control::detail {

/// An exclusive advisory lock (flock) on `<keys_dir>/keys.lock`, held while the key material is
/// read or made at start, so that two instances started at once on an empty keys_dir make one
/// signing key, not two. Released by the destructor or release(). Move-only.
class KeysLock {
 public:
  KeysLock() = default;
  explicit KeysLock(int fd) : fd_(fd) {}
  KeysLock(KeysLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  KeysLock& operator=(KeysLock&& o) noexcept;
  KeysLock(const KeysLock&) = delete;
  KeysLock& operator=(const KeysLock&) = delete;
  ~KeysLock() { release(); }
  /// Unlocks and closes; idempotent.
  void release() noexcept;

 private:
  int fd_ = -1;
};

/// Takes the lock on `<dir>/<name>` (`dir` must exist; the file is made, mode 0600), waiting
/// while another process holds it. Also used for the broker's authorization file
/// ("authorization.lock" beside it), which several instances on one machine may write.
/// Errors: Failed / PermissionDenied naming the lock file and the system's reason.
sdk::Result<KeysLock> lock_keys_dir(const std::string& dir, const std::string& name = "keys.lock");

/// The exclusive lock of a running `mesh-control run` on its state directory: an flock on
/// `<state_dir>/control.lock` (made 0600) that holds the pid of the process, taken without
/// waiting and held until the process ends (release() or the destructor). Two processes on one
/// state_dir would run as one instance id (newuser finding 14): two lease holders, one membership
/// record, and one local jetstream-kv file applied by both. Errors: FailedPrecondition naming the
/// directory and the pid written by the process that holds it; Failed / PermissionDenied when the
/// file cannot be opened or locked.
sdk::Result<KeysLock> lock_state_dir(const std::string& state_dir);

/// This instance's id: 32 lower-case hex characters kept in `<state_dir>/instance.id` (mode
/// 0600), made at the first start. It names the instance in the lease on background work and in
/// logs (instance=); it lives in state_dir, never in keys_dir, so that copying the keys to a new
/// instance never copies it. Errors: InvalidArgument naming the file when it holds anything but
/// such an id; the file system's errors.
sdk::Result<std::string> load_or_create_instance_id(const std::string& state_dir);

}  // namespace mesh::control::detail
