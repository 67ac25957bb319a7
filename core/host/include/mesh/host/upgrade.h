// The host's upgrade state files (docs/decisions/0076 "State files"): <state_dir>/upgrade/, mode
// 0700, one text file per state of key=value lines, written atomically, so that the rollback
// script — which runs when the host binary cannot — reads the same facts with a shell.
//
//   pending      written by the old host before exit 75; removed by the host that confirms
//   confirmed    written by the host at each confirmation (never removed)
//   rolled-back  written by the rollback script; removed when another version is confirmed
//   stopped      written by the rollback script on a second failure; removed once reported
// Besides those, the old host leaves the declaration it was applying (`declaration.json`) for
// the new host's first reconcile, which may have to run offline (decision 0080).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "mesh/sdk/result.h"

namespace mesh::host {

using StateFields = std::map<std::string, std::string>;

inline constexpr const char* kPendingFile = "pending";
inline constexpr const char* kConfirmedFile = "confirmed";
inline constexpr const char* kRolledBackFile = "rolled-back";
inline constexpr const char* kStoppedFile = "stopped";
inline constexpr const char* kPendingDeclarationFile = "declaration.json";

/// Exit status of `mesh-host run` after a passed self-test of a new executable: "restart me into
/// the new version" (the unit's RestartForceExitStatus=).
inline constexpr int kExitRestart = 75;

/// `<state_dir>/upgrade`.
std::string upgrade_dir(const std::string& state_dir);

/// Reads `<dir>/<name>`: nullopt when it does not exist. Lines are `key=value` (the first `=`
/// splits; no quoting; blank lines and lines starting with `#` ignored; a later key wins).
/// Errors: InvalidArgument naming the file and line for a line without `=` or with an empty key,
/// or naming the file and key when check_state_fields() refuses what was read; the read's error
/// (PermissionDenied, ...) otherwise. At most 64 KiB are read.
sdk::Result<std::optional<StateFields>> read_state_file(const std::string& dir, const std::string& name);

/// Checks the keys decision 76 gives file `name` (kPendingFile, kConfirmedFile, kRolledBackFile,
/// kStoppedFile; other names are not checked): each required version key present and of the
/// version-token form (mesh/common/version_token.h), each required decimal key (`revision`,
/// `failed_revision`) present and decimal, `at_ms` decimal when present. Other keys are allowed
/// (a later writer may add some). Errors: InvalidArgument "<path>: <key>: <why>". Pure.
sdk::Result<void> check_state_fields(const std::string& path, const std::string& name, const StateFields& fields);

/// Writes `<dir>/<name>` atomically (temporary file, fsync, rename, fsync of the directory),
/// mode 0600, creating `dir` with mode 0700 when missing. A key or value holding a newline or
/// `=` in a key is refused (InvalidArgument naming the key) and nothing is written.
sdk::Result<void> write_state_file(const std::string& dir, const std::string& name, const StateFields& fields);

/// Removes `<dir>/<name>` (fine when it does not exist) and fsyncs the directory.
sdk::Result<void> remove_state_file(const std::string& dir, const std::string& name);

/// Parses a decimal field (a revision, at_ms); nullopt when missing or not a plain decimal.
std::optional<std::uint64_t> decimal_field(const StateFields& fields, const std::string& key);

}  // namespace mesh::host
