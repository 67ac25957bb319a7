// Report plugin `junit`: the report as JUnit XML for CI systems.
#include "renderers.h"

MESH_PLUGIN(report, "junit", "0.1.0", "the report as JUnit XML for CI systems", mesh::reports::JunitReport)
