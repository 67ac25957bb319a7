// JSON text → mesh::sdk::Value, with the hostile-input checks every message handler and the
// declaration parser rely on. Parsing is done by simdjson's On-Demand API: no DOM of the text is
// built, only the Values asked for — the whole document (parse_json), or the members of its root
// object and the elements of one list in it, one at a time (parse_json_members).
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

#include "mesh/common/fs.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::common {

struct JsonLimits {
  /// Largest accepted text, in bytes. Checked first, before any parsing.
  std::size_t max_bytes = 1024 * 1024;
  /// Deepest accepted nesting of arrays/objects (the root array or object is level 1).
  std::size_t max_depth = 32;
};

/// Parses `text` as one JSON document. Checks, in order: size (≤ limits.max_bytes), a leading
/// UTF-8 byte order mark (refused with a message of its own), UTF-8 validity, then, reading the
/// document from its start, the first of: a syntax error (the message names the line and column:
/// "not valid JSON at line 3, column 14: ..."), nesting deeper than limits.max_depth, a
/// duplicate object key (RFC 8259 leaves them undefined; we refuse them). Errors: InvalidArgument
/// whose message says which check failed ("duplicate key 'mode'", "nesting deeper than 32
/// levels"), with `path` the JSON path of a duplicate key (`resources[3].properties.mode`).
/// Integers are kept as Int up to INT64_MAX, larger ones as Double. Thread-safe (a parser per
/// thread, or one of the call's own for a text over 1 MiB, freed on return).
sdk::Result<sdk::Value> parse_json(std::string_view text, const JsonLimits& limits = {});

/// What parse_json_members hands over while it reads, in document order. Every callback may be
/// empty (what it would get is then dropped). A callback that returns an error stops the read;
/// that error is what parse_json_members returns.
struct JsonMembers {
  /// The member of the root object whose value, when it is an array, is handed over element by
  /// element (`element`) instead of whole: "resources" of a declaration, "owned" of state.json.
  std::string_view list_key;
  /// Each member of the root object other than `list_key` with an array value: its key (valid
  /// during the call) and its value.
  std::function<sdk::Result<void>(std::string_view key, sdk::Value value)> member;
  /// `list_key` has an array value: called once, before its first element (also for `[]`),
  /// with the number of its elements when `count_list` is set (else 0).
  std::function<sdk::Result<void>(std::size_t count)> list_begin;
  /// Count the list's elements before handing them over (one more pass over the list's tokens,
  /// without reading values: for a caller that keeps every element and would otherwise grow its
  /// own list by doublings, as the state file's reader does).
  bool count_list = false;
  /// Each element of that array: its position in the array and its value, which the callback
  /// may change or move from (it is the reader's again after the call).
  std::function<sdk::Result<void>(std::size_t index, sdk::Value& value)> element;
  /// The root when it is not an object (nothing else is called then).
  std::function<sdk::Result<void>(sdk::Value root)> other_root;
};

/// Parses `text` as parse_json does — the same checks, in the same order, with the same errors
/// (a duplicate key's path is `owned[3].properties.mode` inside the list) — but never holds the
/// whole document: each member of the root object and each element of `handler.list_key`'s array
/// is read into a Value, handed to its callback (which may keep or move it) and forgotten. The
/// peak is then the text, simdjson's buffers for it (allocated: 4 bytes of index and ~1.7 of
/// string buffer per byte of text; written: 4 bytes per JSON token, and the unescaped strings
/// that had escapes) and what the callbacks keep. A problem found late in the text (a syntax error at its
/// end, a duplicate key in the last element) is found after the callbacks for what came before
/// it ran: on an error, the caller must drop what it built from them. Returns success, the first
/// JSON error (as parse_json's), or the first callback error. Thread-safe if the callbacks are; a
/// callback may itself call parse_json or parse_json_members (on another parser).
sdk::Result<void> parse_json_members(std::string_view text, const JsonLimits& limits, const JsonMembers& handler);

/// parse_json_members of a text read with read_file_padded: read in place, without the padded
/// copy of the text the string_view overload makes (5 MB for the state.json of 20,000 files).
sdk::Result<void> parse_json_members(const PaddedText& text, const JsonLimits& limits, const JsonMembers& handler);

}  // namespace mesh::common
