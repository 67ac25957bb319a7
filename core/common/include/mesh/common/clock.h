// Wall-clock helpers: milliseconds since the Unix epoch, RFC 3339 UTC text, human ages.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mesh::common {

/// Milliseconds since the Unix epoch (system clock). Thread-safe.
///
/// Test-only: when the environment variable NOX_MESH_CLOCK_OFFSET_MS_FOR_TEST holds a number of
/// milliseconds (read once, at the first call), it is added, so that an integration test can run
/// one process (e.g. a mesh-host) with a clock that is off. Never set it in production.
std::int64_t now_ms();
/// "2026-11-29T07:00:01Z" (seconds precision; UTC).
std::string format_rfc3339(std::int64_t ms);
/// Parses the output of format_rfc3339 (and fractional seconds / "+00:00"); nullopt if malformed.
std::optional<std::int64_t> parse_rfc3339(std::string_view text);
/// "just now", "12 seconds ago", "4 minutes ago", "3 days ago" for now_ms - then_ms.
std::string format_age(std::int64_t then_ms, std::int64_t now_ms);

/// How long a node waits before asking the control plane again after `failures` (≥ 1) failed
/// tries in a row (decision record 132): exponential backoff with jitter — `base` doubled per
/// failure up to `cap`, the wait drawn uniformly from the upper half of that ([d/2, d)), so that a
/// fleet refused at once (a reconnect storm answered "busy") spreads its retries out and asks
/// less often the longer the control plane stays overloaded. failures ≤ 0 counts as 1.
/// Thread-safe (a random generator per thread).
std::chrono::milliseconds retry_backoff(int failures, std::chrono::milliseconds base = std::chrono::seconds(2),
                                        std::chrono::milliseconds cap = std::chrono::seconds(60));

}  // namespace mesh::common
