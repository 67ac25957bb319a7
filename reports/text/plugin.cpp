// Report plugin `text`: the report for people (`mesh report`, `mesh deploy`).
#include "renderers.h"

MESH_PLUGIN(report, "text", "0.1.0", "the report for people", mesh::reports::TextReport)
