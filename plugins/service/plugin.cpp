// The plugin's one exported symbol. Kept apart from the provider's sources so that unit tests can
// compile the provider into their binary without a second `mesh_plugin_info_v1`.
#include "mesh/sdk/plugin.h"
#include "service_provider.h"

MESH_PLUGIN(provider, "service", "0.1.0",
            "systemd units: running (verified to stay active), enabled, restart_on",
            mesh::plugins::service::ServiceProvider)
