// The `container` provider: one container of a Docker-compatible engine (podman first), identified
// by its name (`container:web`), driven through the engine's command line without a shell.
//
// Properties: image (required), command, env, ports, volumes, restart, running, ensure; see
// schema(). Read-back state: the same names as observed by `inspect`, plus image_id, image_ref_id,
// image_digest, config_hash, state, exit_code, restart_count, started_at, paused, id. What plan
// compares is documented in spec.h.
//
// apply never reports what it did not see: the image is resolved (pulled only when no local image
// has the reference) before anything is removed; after `run -d` or `start` it waits `settle` and
// inspects again — the container must still be running, not restarted, running the resolved
// image, and a fresh plan against it must be empty (so ports or mounts the engine dropped with only
// a warning fail the apply, quoting the warning). A container that exited is reported with its
// exit code and the last 20 lines of its log, and is left in place for inspection; one that the
// restart policy restarted within the window (a crash loop) is stopped as well, or removed when
// podman cannot make a stop hold.
//
// Plugin config `[provider.container]`: engine, binary, global_args, run_args, settle, timeout,
// stop_timeout (config_schema()). The engine is asked for its version on first use, not at load.
//
// Errors: InvalidArgument with path "id" or "properties.<name>…" (validate; every other method
// re-checks); Unavailable when the engine cannot be started or does not answer (its own message);
// Failed for every engine command that fails or a verification that does not hold (the engine's
// words in the message); Timeout when an engine command outlives `timeout`; Cancelled when the
// CancelToken fires. Cancellation (docs/decisions/0035): commands that change nothing (`pull`,
// `inspect`, `version`, `logs`, the settle wait) are killed at once; those that change the
// machine (`run`, `create`, `start`, `unpause`, `stop`, `rm`) are left to finish within `timeout`
// and the provider stops after them.
// Thread safety: none of its own; the engine calls a provider from one thread at a time.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine.h"
#include "mesh/sdk/provider.h"
#include "safe_path.h"
#include "spec.h"

namespace mesh::plugins::container {

class ContainerProvider final : public sdk::Provider {
 public:
  /// Initialises libsodium (SHA-256). Throws std::runtime_error when it cannot.
  explicit ContainerProvider(const sdk::HostContext& host);

  const sdk::Schema& schema() const noexcept override;
  const sdk::Schema& config_schema() const noexcept override;

 protected:
  sdk::Result<void> do_configure(const sdk::Value& config) override;
  // ABI 2 entry points: thin adapters over the helpers below (request/response structs are the
  // host's; sdk/provider.h).
  sdk::Result<void> do_validate(const sdk::ValidateRequest& req, sdk::ValidateResponse& resp) override;
  sdk::Result<void> do_read(const sdk::ReadRequest& req, sdk::ReadResponse& resp) override;
  sdk::Result<void> do_plan(const sdk::PlanRequest& req, sdk::PlanResponse& resp) override;
  sdk::Result<void> do_apply(const sdk::ApplyRequest& req, sdk::ApplyResponse& resp) override;
  sdk::Result<void> do_remove(const sdk::RemoveRequest& req, sdk::RemoveResponse& resp) override;

 private:
  sdk::Result<void> validate_one(const sdk::Resource& want);
  sdk::Result<std::optional<sdk::State>> read_one(const sdk::ResourceId& rid);
  sdk::Result<sdk::Plan> plan_one(const sdk::Resource& want, const std::optional<sdk::State>& observed);
  sdk::Result<sdk::State> apply_one(const sdk::Plan& plan, const sdk::CancelToken& cancel);
  sdk::Result<void> remove_one(const sdk::ResourceId& rid, const sdk::CancelToken& cancel);
  /// inspect + what the container's image reference resolves to now (image_ref_id).
  sdk::Result<std::optional<sdk::State>> observe(const std::string& name,
                                                 const sdk::CancelToken* cancel);
  /// The local image ID for the declared reference, pulling it when no local image has it.
  sdk::Result<std::string> resolve_image(const ContainerSpec& spec, const sdk::CancelToken& cancel);
  sdk::Result<sdk::State> create(const sdk::Resource& want, const ContainerSpec& spec,
                                 bool replace, const sdk::CancelToken& cancel);
  sdk::Result<sdk::State> start(const sdk::Resource& want, const ContainerSpec& spec,
                                const sdk::CancelToken& cancel);
  sdk::Result<sdk::State> stop(const sdk::Resource& want, const ContainerSpec& spec,
                               const sdk::CancelToken& cancel);
  sdk::Result<void> remove_container(const std::string& name, const sdk::CancelToken& cancel);
  /// Waits `settle` (when the container should run), inspects, and checks everything apply
  /// promised. `restarts_before`: RestartCount before the start; `image_id`: the resolved image
  /// (empty: not checked); `warnings`: what the engine printed while creating/starting.
  sdk::Result<sdk::State> verify(const sdk::Resource& want, const ContainerSpec& spec,
                                 std::int64_t restarts_before, const std::string& image_id,
                                 const std::string& warnings, const sdk::CancelToken& cancel);
  /// Stops a container its restart policy keeps restarting (removes it when stopping does not
  /// hold); returns the clause for the failure message ("; the container was stopped", …).
  std::string stop_crash_loop(const std::string& name, const sdk::CancelToken& cancel);
  sdk::Result<void> ready(const sdk::CancelToken* cancel);
  /// Refuses a bind source reached through a symbolic link or an unsafe path transition, or in
  /// a denied root (PermissionDenied, path "properties.volumes").
  sdk::Result<void> check_bind_sources(const sdk::Resource& want, const ContainerSpec& spec) const;

  std::unique_ptr<Engine> engine_;
  paths::DeniedRoots denied_;  ///< the host's path policy
};

}  // namespace mesh::plugins::container
