// Report plugin `json`: the report as the control plane sent it (`mesh report --output json`).
#include "renderers.h"

MESH_PLUGIN(report, "json", "0.1.0", "the report as one JSON document", mesh::reports::JsonReport)
