#include "build_stage.h"

MESH_PLUGIN(stage, "build", "0.1.0", "runs a pipeline's build command and keeps its artifacts",
            mesh::stages::build::BuildStage)
