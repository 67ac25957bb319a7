// The control plane key a host pins (identity.json's control_key) and how it follows a rotation
// of that key (decision record 98): a message that does not verify with the pinned key but
// carries a Mesh-Key-Chain leading from it to a newer key that it verifies with is accepted, and
// the newer key is pinned (identity.json rewritten atomically) and logged, once.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "mesh/common/logging.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/transport.h"

namespace spdlog {
class logger;
}

namespace mesh::host {

/// Rewrites `<state_dir>/identity.json` with `control_key` (raw 32 bytes) as its pinned key,
/// keeping every other field (the key files' digests too), atomically (temp + rename, 0600).
/// Errors: InvalidArgument naming the file when it does not parse or `control_key` is not 32
/// bytes; the file system's errors (the old file stays whole).
sdk::Result<void> pin_control_key(const std::string& state_dir, const std::string& control_key);

/// The pinned key of one node, shared by the threads that verify the control plane's messages.
/// Thread-safe.
class PinnedControlKey {
 public:
  /// `state_dir`: where identity.json is (empty: the pin is kept in memory only, e.g. tests);
  /// `key`: the pinned key (raw 32 bytes); `log`: the host's logger (not owned; must outlive).
  PinnedControlKey(std::string state_dir, std::string node, std::string key, spdlog::logger* log);

  /// The key pinned now (raw 32 bytes).
  std::string get() const;

  /// Verifies `m` with `verify(key)` (the message's own check with one key): with the pinned key,
  /// and, when that fails with PermissionDenied, with the newer key `m`'s Mesh-Key-Chain leads
  /// to from the pinned key. When the message verifies only with the newer key, that key is
  /// pinned (in memory and identity.json) and logged ("control key rotated node= old_key=
  /// new_key= steps= subject="). A chain that is not believed (forged, from another control
  /// plane, not naming the pinned key) is logged ("control key rotation refused node= subject=
  /// reason="; at most 10 lines a second) and changes nothing. `what` names the message in logs.
  /// Returns the message's verdict.
  sdk::Result<void> verify(const sdk::Message& m, const std::function<sdk::Result<void>(const std::string&)>& verify);

 private:
  std::string state_dir_;
  std::string node_;
  spdlog::logger* log_;
  mutable std::mutex mu_;
  std::string key_;
  common::LogBudget refused_log_{10};
};

}  // namespace mesh::host
