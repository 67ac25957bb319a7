// The `service` provider: systemd units, identified by their unit name (`service:nginx.service`),
// driven through systemd's D-Bus API (sd-bus; see systemd_bus.h for how it connects).
//
// Properties (every one optional; an undeclared property is not managed):
//   running     bool         started and verified to stay up / stopped
//   enabled     bool         started at boot through the unit's [Install] section
//   restart_on  list<string> resources ("type:id") whose change in the same apply restarts this
//                            unit (the provider declares notified_by_restart_on; see below)
//   settle      duration     how long a started unit must stay active (default: config, 2s)
//   timeout     duration     how long a start/stop/restart job may take (default: config, 90s)
// Read-back state: running, enabled (null when not applicable: static, indirect, generated,
// transient, alias and linked units), active_state, sub_state, result, load_state,
// unit_file_state and, for .service units, main_pid. read() returns nullopt only for
// LoadState=not-found (no unit file).
//
// Started means verified, never "the start call returned": after StartUnit/RestartUnit the
// provider waits (polling every 100 ms, up to `timeout`) for the unit's job to finish, requires
// ActiveState=active, then requires it to stay active — same invocation, no automatic restart —
// for the whole `settle` window. Otherwise apply fails:
//   Failed   the unit failed, exited (a oneshot needs RemainAfterExit=yes to count as running),
//            restarted, or left active during the settle window;
//   Timeout  its job did not finish within `timeout` (Type=notify without READY=1, a slow
//            ExecStartPre).
// After either, a unit still active, activating or waiting to restart is stopped (StopUnit), so
// a failed start never leaves it half-started or restarting in a loop; the reason keeps the
// status seen at the failure and says "the unit was stopped".
// The reason reads "service:x.service did not stay active: active_state=failed sub_state=failed
// result=exit-code status=3; last log lines (journal): ..." (the log part comes from the journal,
// else from the unit's StandardOutput=append:FILE, else "no journal available").
// A missing unit file fails apply with Failed ("not found"); a unit without [Install] declared
// `enabled` fails with Failed (it can be neither enabled nor disabled).
//
// apply order: enable/disable first (EnableUnitFiles/DisableUnitFiles, then Reload, then the
// UnitFileState is checked), then start/stop (or restart).
// remove(): capability Removal::Release — stops the unit (when active) and disables it (when
// enabled); the unit file stays, since it belongs to whoever installed it (a package, a `file`
// resource). It reports as RemoveResponse::left {"running": false} plus {"enabled": false} for a
// unit with an [Install] section of its own, which the engine's read-back checks. Idempotent; a
// unit that does not exist succeeds (and leaves nothing to check). Capabilities also say that
// units exist before management (exists_before_management).
//
// ---- Restart: the notification this provider declares (notified_by_restart_on) ----------------
// When a resource named in `restart_on` changed in the same apply, the engine passes it in
// PlanRequest::notified_by, and plan() adds
//     Change{path = "restart", observed = null, declared = null}
// to the plan (action Update when the plan had no other change; any other changes stay as
// planned). apply() then, after enable/disable:
//   * running declared true and the plan also starts the unit: the start is the restart (a
//     fresh start; RestartUnit if the unit has come up since it was read);
//   * running declared true: RestartUnit (starts a stopped unit), verified like a start;
//   * running undeclared: TryRestartUnit when the unit is active, verified like a start; nothing
//     when it is not running;
//   * running declared false: nothing (a unit declared stopped is not restarted).
// "restart" is the only change path that does not start with "properties."; plan() produces it
// only when notified. The read-back plan (made without notification) after a restart is empty as
// usual. A failed apply whose only change was the restart reads "restart after <type:id> changed:
// <why>".
// -------------------------------------------------------------------------------------------------
//
// Plugin config `[provider.service]`: settle (default "2s"), timeout (default "90s", like
// systemd's own DefaultTimeoutStartSec), bus_address (a D-Bus address to use instead of the
// default connection order).
//
// Errors: InvalidArgument with path "id" or "properties.<name>" (validate; read, apply and remove
// re-check the id); Unavailable when systemd cannot be reached; PermissionDenied when systemd
// refuses (not root, polkit); Failed and Timeout as above; Cancelled when the token fires (a job
// already queued is left to systemd).
// Thread safety: none of its own; the engine calls a provider from one thread at a time.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "mesh/sdk/provider.h"
#include "service_rules.h"
#include "systemd_bus.h"

namespace mesh::plugins::service {

class ServiceProvider final : public sdk::Provider {
 public:
  explicit ServiceProvider(const sdk::HostContext& host);
  ~ServiceProvider() override;

  const sdk::Schema& schema() const noexcept override;
  const sdk::Schema& config_schema() const noexcept override;

 protected:
  sdk::Result<void> do_configure(const sdk::Value& config) override;
  // ABI 2 entry points: thin adapters over the helpers below (request/response structs are the
  // host's; sdk/provider.h).
  sdk::Result<void> do_capabilities(sdk::ProviderCapabilities& caps) const override;
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
  struct Limits {
    std::chrono::milliseconds settle;
    std::chrono::milliseconds timeout;
  };
  /// One operation on one unit: its name, object path and when the operation began.
  struct Target {
    std::string rid;   ///< "service:x.service", for messages
    std::string name;  ///< "x.service"
    std::string path;  ///< D-Bus object path
    std::chrono::system_clock::time_point began;
  };

  SystemdBus& bus();
  sdk::Result<Target> open_unit(const sdk::ResourceId& rid);
  sdk::Result<void> set_enabled(const Target& t, bool want, const UnitStatus& now);
  /// StartUnit/RestartUnit/TryRestartUnit, then the job wait and the settle window.
  sdk::Result<UnitStatus> start_verified(const Target& t, const char* method, const Limits& limits,
                                         const sdk::CancelToken& cancel);
  sdk::Result<UnitStatus> stop_verified(const Target& t, std::chrono::milliseconds timeout,
                                        const sdk::CancelToken& cancel);
  /// Polls until the unit's pending job is no longer `job` (done), the deadline passes
  /// (Timeout), or `cancel` fires (Cancelled). Returns the status seen last.
  sdk::Result<UnitStatus> wait_job(const Target& t, const std::string& job, const char* what,
                                   std::chrono::steady_clock::time_point deadline,
                                   const sdk::CancelToken& cancel);
  /// The failure text's tail: the unit's last log lines.
  std::string logs(const Target& t);

  std::chrono::milliseconds settle_{std::chrono::seconds(2)};
  std::chrono::milliseconds timeout_{std::chrono::seconds(90)};
  std::string bus_address_;
  std::unique_ptr<SystemdBus> bus_;
};

}  // namespace mesh::plugins::service
