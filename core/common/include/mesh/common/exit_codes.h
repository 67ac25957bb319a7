// Exit codes of mesh-host, mesh-control and mesh (INTERFACE.md): one table, used by all three.
//   0 done;
//   1 the operation ran and failed, or could not be done now (an apply failed, a report has failed
//     nodes, a lock is held by another apply);
//   2 bad usage or bad input (the message says which file, line or field), or credentials refused
//     (operator identity, role, token, broker user);
//   3 the control plane or broker could not be reached.
#pragma once

#include <span>

#include "mesh/sdk/result.h"

namespace mesh::common {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;

/// One row of the table: an error kind, the exit code it ends a program with, and why.
struct ExitCodeRow {
  sdk::ErrorCode code;
  int exit_code;
  const char* meaning;  ///< static text, for docs and tests
};

/// Every sdk::ErrorCode exactly once, in enum order. Thread-safe (constant data).
std::span<const ExitCodeRow> exit_code_table() noexcept;

/// The exit code for an error of kind `code` (the row of exit_code_table()): invalid_argument,
/// not_found, already_exists, unsupported (bad input) and permission_denied (credentials refused)
/// → 2; unavailable, timeout, transient (nothing answered) → 3; failed_precondition (a lock held:
/// not now), failed, cancelled, internal → 1. Thread-safe; never fails.
int exit_code_for(sdk::ErrorCode code) noexcept;

}  // namespace mesh::common
