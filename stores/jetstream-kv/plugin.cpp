// The `jetstream-kv` store plugin's one exported symbol. Kept apart from the store's sources so
// tests can compile the class into a test binary without exporting it.
#include "mesh/sdk/plugin.h"

#include "jetstream_kv_store.h"

MESH_PLUGIN(store, "jetstream-kv", "0.1.0",
            "cluster store: one JetStream stream of write operations, applied into a local SQLite file",
            mesh::stores::jetstream_kv::JetStreamKvStore)
