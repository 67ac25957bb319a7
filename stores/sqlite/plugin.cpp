// The `sqlite` store plugin's one exported symbol. Kept apart from sqlite_store.cpp so tests can
// compile the class into a test binary without exporting it.
#include "mesh/sdk/plugin.h"

#include "sqlite_store.h"

MESH_PLUGIN(store, "sqlite", "0.1.0",
            "embedded store: one SQLite database file (WAL, synchronous=FULL)",
            mesh::stores::sqlite::SqliteStore)
