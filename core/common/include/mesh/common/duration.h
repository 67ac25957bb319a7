// Durations as operators write them: `500ms`, `15s`, `2m`, `1h`, `1d` (one unit, integer).
// The grammar lives in the SDK (mesh/sdk/duration.h) so that plugins parse durations the same way;
// this header makes it available as mesh::common::parse_duration / format_duration.
#pragma once

#include "mesh/sdk/duration.h"

namespace mesh::common {

using sdk::format_duration;
using sdk::parse_duration;

}  // namespace mesh::common
