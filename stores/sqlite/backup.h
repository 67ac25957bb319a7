// The sqlite store's backup, restore and in-use lock (backup.cpp; docs/decisions/0085).
#pragma once

#include <string>

#include "mesh/sdk/result.h"

namespace mesh::stores::sqlite {

/// The in-use lock of the database at `db_path`: an flock(2) on the file "<db_path>.lock"
/// (created 0600 when missing, never removed — removing a lock file races with its next user).
/// Shared (`exclusive` false) while a store has the database open, so several stores and
/// processes may hold it; exclusive for restore, taken without waiting. A separate file, not the
/// database itself: closing any descriptor of the database would drop SQLite's own POSIX locks.
/// Returns the locked descriptor (the caller closes it to release the lock).
/// Errors: FailedPrecondition when `exclusive` and another holder has it ("in use ... stop it
/// first"); PermissionDenied, Unavailable (cannot create or lock it), naming the file.
sdk::Result<int> lock_database_use(const std::string& db_path, bool exclusive);

}  // namespace mesh::stores::sqlite
