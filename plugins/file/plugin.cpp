// The plugin's one exported symbol. Kept apart from file_provider.cpp so that unit tests can
// compile the provider into their binary without a second `mesh_plugin_info_v1`.
#include "mesh/sdk/plugin.h"
#include "file_provider.h"

MESH_PLUGIN(provider, "file", "0.1.0", "regular files: content, mode, owner, group",
            mesh::plugins::file::FileProvider)
