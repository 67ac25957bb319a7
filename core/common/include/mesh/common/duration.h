// Durations as operators write them: `500ms`, `15s`, `2m`, `1h`, `1d` (one unit, integer).
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "mesh/sdk/result.h"

namespace mesh::common {

/// Parses "<integer><unit>" with unit ms, s, m, h or d. Errors: InvalidArgument
/// ("'15x' is not a duration like 500ms, 15s, 2m, 1h").
sdk::Result<std::chrono::milliseconds> parse_duration(std::string_view text);

/// Formats with the largest unit that divides it exactly ("1500ms", "15s", "2m").
std::string format_duration(std::chrono::milliseconds d);

}  // namespace mesh::common
