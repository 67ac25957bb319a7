// The host's path policy: paths no provider may manage (decision record 24). A deployer must
// not be able to declare a file over the host's own keys and state, or, on a machine that runs
// the control plane too, over its operators.json, signing key or broker passwords.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mesh/sdk/provider.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::host {

struct HostConfig;

/// Where mesh-control keeps its state unless its config says otherwise.
inline constexpr const char* kDefaultControlStateDir = "/var/lib/nox-mesh-control";

/// The denied paths, in order, without duplicates: `state_dir` (when not empty), the host config
/// file (when `config` is given), kDefaultControlStateDir, each `[paths] deny` entry, and, when
/// `[paths] control_config` names a control plane config, that file and every path it names that
/// could make a deployer an admin or run code in the control plane: `[control] state_dir` and
/// `keys_dir`; `[store] path` and `local_path` with their SQLite siblings (`-wal`, `-shm`,
/// `-journal`) and `.lock`, `[store] import_sqlite`; `nkey_seed`, `password_file` and `tls_ca` of
/// `[store]` and `[transport]`; `[broker] authorization_file` (and `authorization.lock` beside
/// it), its password files and every `pid_file`; `[plugins] dir` (each), `[pipelines] dir`,
/// `[repository] dir`, `[content] dir` and `[stages.publish] repository`. Keys the file leaves
/// out add nothing (their defaults are under `state_dir` or `keys_dir`). Relative paths are
/// taken from the current directory. Errors: the control plane config cannot be read or parsed
/// (InvalidArgument at host.toml's `paths.control_config`). Thread-safe; reads the control plane
/// config each call.
sdk::Result<std::vector<std::string>> denied_paths(const HostConfig* config, const std::string& state_dir);

/// Hands `denied` to a provider through its config: when `schema_has_key` (its config schema
/// declares `denied_roots`), `provider_config["denied_roots"]` becomes the table's own entries
/// followed by `denied`. Returns whether the provider takes the policy.
bool add_denied_roots(sdk::Value& provider_config, bool schema_has_key, const std::vector<std::string>& denied);

/// The denied path `id` lies in, or nullptr: `id` must start with '/' (a resource id that is a
/// path, whatever its provider); it is normalised lexically first ("//", "." and ".." collapsed),
/// so "/var/lib/nox-mesh/../nox-mesh/x" is caught. Pure; thread-safe.
const std::string* denied_by(const std::string& id, const std::vector<std::string>& denied);

/// Wraps `inner` so that no resource whose id is a path under `denied` reaches it: validate,
/// read, apply and remove fail with PermissionDenied (path "id", the message naming the denied
/// path) before the provider is called. Everything else is passed through. The wrapper shares
/// ownership of `inner`; keep the plugin's library loaded for as long as the wrapper lives.
std::shared_ptr<sdk::Provider> guard_paths(std::shared_ptr<sdk::Provider> inner, std::vector<std::string> denied);

}  // namespace mesh::host
