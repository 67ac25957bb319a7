// Nox Mesh SDK — durations as operators write them in TOML configs and declarations: one
// non-negative integer and one unit, `500ms`, `15s`, `2m`, `1h`, `1d`. The host, the control plane
// and the bundled providers all use this grammar, so a plugin that takes a duration property or
// config key should use it too (one grammar across the whole product). Header-only; no state.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "mesh/sdk/result.h"

namespace mesh::sdk {

/// Parses "<digits><unit>" with unit `ms`, `s`, `m`, `h` or `d` into milliseconds. No sign, no
/// spaces, no fractions, no compound forms ("1h30m"); at most 12 digits.
///
/// Returns the duration in milliseconds (>= 0). Errors: InvalidArgument with the message
/// "'<text>' is not a duration like 500ms, 15s, 2m, 1h" (no path: the caller knows the key or
/// property and sets Error::path) — for an empty text, a missing or unknown unit, a sign, more
/// than 12 digits, or a value that does not fit in 64-bit milliseconds.
/// Thread safety: pure function, safe from any thread.
inline Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  auto bad = [&] {
    return fail(ErrorCode::InvalidArgument,
                "'" + std::string(text) + "' is not a duration like 500ms, 15s, 2m, 1h");
  };
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 12) return bad();
  std::int64_t n = 0;
  for (std::size_t i = 0; i < digits; ++i) n = n * 10 + (text[i] - '0');  // ≤ 12 digits: no overflow
  const std::string_view unit = text.substr(digits);
  std::int64_t ms_per = 0;
  if (unit == "ms") ms_per = 1;
  else if (unit == "s") ms_per = 1000;
  else if (unit == "m") ms_per = 60'000;
  else if (unit == "h") ms_per = 3'600'000;
  else if (unit == "d") ms_per = 86'400'000;
  else return bad();
  if (n > std::numeric_limits<std::int64_t>::max() / ms_per) return bad();
  return std::chrono::milliseconds(n * ms_per);
}

/// Formats a duration with the largest unit that divides it exactly: 1500 ms → "1500ms",
/// 15000 → "15s", 120000 → "2m", 0 → "0ms". Negative values are formatted the same way with a
/// leading '-'. The result parses back to the same value with parse_duration when >= 0.
/// Thread safety: pure function, safe from any thread.
inline std::string format_duration(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms != 0 && ms % 86'400'000 == 0) return std::to_string(ms / 86'400'000) + "d";
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace mesh::sdk
