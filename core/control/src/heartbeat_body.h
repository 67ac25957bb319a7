// The body of a heartbeat in the shape every host sends, read without building an sdk::Value
// (decision record 122). Internal to mesh_control (heartbeats.cpp; tested in control_test).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace mesh::control::detail {

/// The members of a heartbeat body that the control plane reads; each absent when the body has
/// no such member. The views point into the text given to parse_plain_heartbeat().
struct PlainHeartbeat {
  std::optional<std::string_view> node, at, host_version, state;
  std::optional<std::int64_t> applied_revision;
};

/// Reads `text` when it is one flat JSON object (at most 16 members, no repeated key) whose values
/// are all strings of printable ASCII without escapes or non-negative integers of at most 18
/// digits, with `node`, `at`, `host_version` and `state` strings and `applied_revision` an
/// integer where present: then fills `out` and returns true. Anything else — other JSON (null,
/// booleans, escapes, nesting, negative or fractional numbers), a type the control plane refuses,
/// or text that is not JSON — returns false with `out` untouched, and the caller takes the
/// general path (common::parse_json and the field checks), which accepts or refuses it with the
/// error it names. So whatever this accepts, the general parser accepts with the same values.
/// Pure; thread-safe.
bool parse_plain_heartbeat(std::string_view text, PlainHeartbeat* out);

}  // namespace mesh::control::detail
