// The plugin's one exported symbol. Kept apart from container_provider.cpp so that unit tests can
// compile the provider into their binary without a second `mesh_plugin_info_v1`.
#include "container_provider.h"
#include "mesh/sdk/plugin.h"

MESH_PLUGIN(provider, "container", "0.1.0",
            "containers of a Docker-compatible engine (podman first), verified after start",
            mesh::plugins::container::ContainerProvider)
