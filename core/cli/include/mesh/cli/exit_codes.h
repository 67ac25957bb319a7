// Exit codes of `mesh` (INTERFACE.md): 0 done; 1 the operation ran and failed; 2 bad usage or
// bad input; 3 the control plane or broker could not be reached. The table itself is
// mesh/common/exit_codes.h, shared with mesh-host and mesh-control.
#pragma once

#include "mesh/common/exit_codes.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::cli {

inline constexpr int kExitOk = common::kExitOk;
inline constexpr int kExitFailed = common::kExitFailed;
inline constexpr int kExitUsage = common::kExitUsage;
inline constexpr int kExitUnreachable = common::kExitUnreachable;

/// The exit code for an error, whether it came from this process (a bad flag, an unreadable
/// file), from the transport (timeout, no responders) or from the control plane's error reply:
/// common::exit_code_for (invalid_argument, not_found, already_exists, permission_denied,
/// unsupported → 2; unavailable, timeout, transient → 3; everything else → 1).
int exit_code_for(sdk::ErrorCode code) noexcept;

/// The exit code of a delivery report: 1 when a node failed, else 1 when `fail_on_outstanding`
/// and a node is outstanding, else 0 (outstanding alone is not failure).
int report_exit_code(const sdk::Value& report, bool fail_on_outstanding) noexcept;

}  // namespace mesh::cli
