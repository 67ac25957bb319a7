// The `publish` stage plugin's one export.
#include "mesh/sdk/plugin.h"
#include "publish_stage.h"

MESH_PLUGIN(stage, "publish", "0.1.0", "puts .deb files into the mesh's signed apt repository",
            mesh::stages::publish::PublishStage)
