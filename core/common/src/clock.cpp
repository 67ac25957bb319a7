#include "mesh/common/clock.h"

#include <algorithm>
#include <random>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace mesh::common {

namespace {
// Test-only (clock.h): a process whose clock is off, without touching the machine's clock.
std::int64_t clock_offset_for_test_ms() {
  static const std::int64_t offset = [] {
    const char* v = std::getenv("NOX_MESH_CLOCK_OFFSET_MS_FOR_TEST");
    return v && *v ? std::strtoll(v, nullptr, 10) : 0;
  }();
  return offset;
}
}  // namespace

std::int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count() + clock_offset_for_test_ms();
}

std::string format_rfc3339(std::int64_t ms) {
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::optional<std::int64_t> parse_rfc3339(std::string_view text) {
  std::tm tm{};
  int y, mo, d, h, mi, s;
  std::string t(text);
  char tail[16] = {0};
  if (std::sscanf(t.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%15s", &y, &mo, &d, &h, &mi, &s, tail) < 6)
    return std::nullopt;
  std::string rest(tail);
  if (!rest.empty() && rest[0] == '.') {
    auto p = rest.find_first_not_of("0123456789", 1);
    rest = p == std::string::npos ? "" : rest.substr(p);
  }
  if (rest != "Z" && rest != "+00:00") return std::nullopt;
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  return static_cast<std::int64_t>(timegm(&tm)) * 1000;
}

std::string format_age(std::int64_t then_ms, std::int64_t now) {
  std::int64_t s = (now - then_ms) / 1000;
  if (s < 0) s = 0;
  auto unit = [](std::int64_t n, const char* name) {
    return std::to_string(n) + " " + name + (n == 1 ? "" : "s") + " ago";
  };
  if (s < 2) return "just now";
  if (s < 60) return unit(s, "second");
  if (s < 3600) return unit(s / 60, "minute");
  if (s < 86400) return unit(s / 3600, "hour");
  return unit(s / 86400, "day");
}

std::chrono::milliseconds retry_backoff(int failures, std::chrono::milliseconds base, std::chrono::milliseconds cap) {
  std::chrono::milliseconds ceiling = std::max<std::chrono::milliseconds>(base, std::chrono::milliseconds(1));
  for (int i = 1; i < failures && ceiling < cap; ++i) ceiling *= 2;
  ceiling = std::min(ceiling, std::max(cap, base));
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const auto half = ceiling.count() / 2;
  std::uniform_int_distribution<std::int64_t> pick(half, std::max<std::int64_t>(half, ceiling.count() - 1));
  return std::chrono::milliseconds(pick(rng));
}

}  // namespace mesh::common
