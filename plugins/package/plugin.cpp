// The plugin's one exported symbol. Kept apart from package_provider.cpp so that tests can
// compile the provider into their binary without a second `mesh_plugin_info_v1`.
#include "mesh/sdk/plugin.h"
#include "package_provider.h"

MESH_PLUGIN(provider, "package", "0.1.0",
            "system packages through apt and dpkg: version, hold, remove, purge",
            mesh::plugins::package::PackageProvider)
