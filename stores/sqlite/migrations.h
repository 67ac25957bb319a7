// The `sqlite` store's schema and its migrations.
//
// The database records its schema version in `schema_version` (one row). Opening a database
// runs, in one write transaction, every migration newer than the recorded version; a database
// from a newer version of the plugin is refused (FailedPrecondition), never modified.
// To change the schema: append a migration with the next version and raise kSchemaVersion.
#pragma once

#include <cstdint>

#include "connection.h"
#include "mesh/sdk/result.h"

namespace mesh::stores::sqlite {

/// The schema version this build writes and understands.
inline constexpr std::int64_t kSchemaVersion = 8;

/// Brings the database up to kSchemaVersion (creating it when empty). Errors: FailedPrecondition
/// (newer schema version, or an SQLite file that is not a Nox Mesh store), Transient (busy),
/// Failed (corrupt).
sdk::Result<void> migrate(Connection& db, std::int64_t now_ms);

/// The version recorded in the database, or 0 when it has no schema yet. For tests and tools.
sdk::Result<std::int64_t> schema_version(Connection& db);

/// The schema version this build migrates to and writes: kSchemaVersion, except in the test-only
/// build of an "older release" of the plugin (MESH_SQLITE_TEST_PREVIOUS_SCHEMA, used by
/// tests/packaging to show a package upgrade migrating the store), which stops one version short.
#ifdef MESH_SQLITE_TEST_PREVIOUS_SCHEMA
inline constexpr std::int64_t kWrittenSchemaVersion = kSchemaVersion - 1;
#else
inline constexpr std::int64_t kWrittenSchemaVersion = kSchemaVersion;
#endif

}  // namespace mesh::stores::sqlite
