#include "deploy_stage.h"

MESH_PLUGIN(stage, "deploy", "0.1.0", "deploys a module at the pipeline run's version",
            mesh::stages::deploy::DeployStage)
