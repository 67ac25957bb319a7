// The `service` provider's pure logic: unit-name and property rules, durations, the unit state as
// read from systemd, the plan, and the wording of failures. No I/O here, so all of it is unit
// tested without systemd.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/sdk/duration.h"
#include "mesh/sdk/provider.h"

namespace mesh::plugins::service {

/// Change path of the engine's restart request (see service_provider.h). It is the one change
/// path that does not start with "properties.".
inline constexpr std::string_view kRestartChange = "restart";

/// Unit suffixes a resource id may end in.
inline constexpr std::string_view kUnitSuffixes[] = {".service", ".socket", ".timer",
                                                     ".target",  ".path",   ".mount"};

/// Why `name` is not a unit name this provider manages, or nullopt when it is one. The rules are
/// systemd's (unit_name_is_valid): at most 255 bytes; [A-Za-z0-9:_.\\-] plus one '@' before the
/// suffix; a non-empty prefix; one of kUnitSuffixes; no '/', no NUL. A template without an
/// instance ("getty@.service") is refused: it cannot be started or enabled as such.
std::optional<std::string> unit_name_problem(std::string_view name);

/// The D-Bus interface holding a unit type's `Result` property (".service" ->
/// "org.freedesktop.systemd1.Service"), or "" for types without one (".target").
std::string_view type_interface(std::string_view unit);

// Durations: the SDK's grammar (mesh/sdk/duration.h), as everywhere in the product.
using sdk::format_duration;
using sdk::parse_duration;

/// Bounds of the duration properties and config keys.
inline constexpr std::chrono::milliseconds kMaxSettle = std::chrono::hours(1);
inline constexpr std::chrono::milliseconds kMinTimeout = std::chrono::milliseconds(100);
inline constexpr std::chrono::milliseconds kMaxTimeout = std::chrono::hours(24);

/// Parses and bounds a settle window (0 .. 1h). `path` is put on the error.
sdk::Result<std::chrono::milliseconds> parse_settle(std::string_view text, std::string path);
/// Parses and bounds a start/stop timeout (100ms .. 24h). `path` is put on the error.
sdk::Result<std::chrono::milliseconds> parse_timeout(std::string_view text, std::string path);

/// Checks every property a schema cannot: durations, `restart_on` entries ("type:id" with type
/// [a-z0-9_-]+, not this resource itself). InvalidArgument with path "id" or
/// "properties.<name>" ("properties.restart_on[1]" for a list element).
sdk::Result<void> validate_resource(const sdk::Resource& want);

/// What systemd says about a unit (the subset this provider uses).
struct UnitStatus {
  std::string load_state;       ///< "loaded", "not-found", "masked", "error", "bad-setting"
  std::string active_state;     ///< "active", "inactive", "failed", "activating", ...
  std::string sub_state;        ///< type-specific: "running", "dead", "exited", "start", ...
  std::string result;           ///< "success", "exit-code", "signal", "timeout", ... or ""
  std::string unit_file_state;  ///< "enabled", "disabled", "static", "masked", ... or ""
  std::uint32_t main_pid = 0;   ///< services only; 0 when none
  std::int32_t exec_main_code = 0;    ///< CLD_EXITED (1), CLD_KILLED (2), CLD_DUMPED (3), or 0
  std::int32_t exec_main_status = 0;  ///< exit status, or the signal number
  std::uint32_t n_restarts = 0;       ///< services: automatic restarts (Restart=)
  std::string invocation_id;          ///< hex; changes with every start
  std::uint32_t job_id = 0;           ///< the unit's pending job, 0 when none
  std::string job_path;               ///< its object path, "" when none
};

/// `enabled` as read back: true for enabled/enabled-runtime, false for disabled, masked and
/// masked-runtime, nullopt (JSON null: "not applicable") for static, indirect, generated,
/// transient, alias, linked, linked-runtime and anything unknown — such units are not enabled
/// or disabled through their own [Install] section.
std::optional<bool> enabled_from(std::string_view unit_file_state);

/// The observed State: running, enabled (null when not applicable), active_state, sub_state,
/// result, load_state, unit_file_state and, for services, main_pid.
sdk::State state_from(std::string_view unit, const UnitStatus& status);

/// The pure diff. Compares declared `running` and `enabled` with `observed`. A unit that does not
/// exist (observed nullopt) plans Create when it is declared running or enabled (apply then fails
/// saying the unit file is missing), else None: a missing unit is stopped and not enabled.
sdk::Plan make_plan(const sdk::Resource& want, const std::optional<sdk::State>& observed);

/// "active_state=failed sub_state=failed result=exit-code status=3" (status= for CLD_EXITED,
/// signal=SIGKILL for CLD_KILLED/CLD_DUMPED; absent when the main process never ran).
std::string describe_status(std::string_view unit, const UnitStatus& status);

/// `restart` present among the plan's changes.
bool wants_restart(const sdk::Plan& plan);

}  // namespace mesh::plugins::service
