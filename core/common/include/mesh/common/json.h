// JSON text → mesh::sdk::Value, with the hostile-input checks every message handler and the
// declaration parser rely on. Parsing is done by simdjson (DOM API).
#pragma once

#include <cstddef>
#include <string_view>

#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::common {

struct JsonLimits {
  /// Largest accepted text, in bytes. Checked first, before any parsing.
  std::size_t max_bytes = 1024 * 1024;
  /// Deepest accepted nesting of arrays/objects.
  std::size_t max_depth = 32;
};

/// Parses `text` as one JSON document. Checks, in order: size (≤ limits.max_bytes), a leading
/// UTF-8 byte order mark (refused with a message of its own), UTF-8 validity, syntax (the
/// message names the line and column: "not valid JSON at line 3, column 14: ..."), depth
/// (≤ limits.max_depth), and duplicate object keys (RFC 8259 leaves them undefined; we refuse them). Errors: InvalidArgument whose message says which check failed
/// ("duplicate key 'mode'", "nesting deeper than 32"), with `path` the JSON path where known
/// (`resources[3].properties.mode`). Thread-safe (a parser per thread).
sdk::Result<sdk::Value> parse_json(std::string_view text, const JsonLimits& limits = {});

}  // namespace mesh::common
