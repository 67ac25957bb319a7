#include "mesh/common/duration.h"

#include <charconv>

namespace mesh::common {

sdk::Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  auto bad = [&] {
    return sdk::fail(sdk::ErrorCode::InvalidArgument,
                     "'" + std::string(text) + "' is not a duration like 500ms, 15s, 2m, 1h");
  };
  std::size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  if (i == 0 || i > 12) return bad();
  std::int64_t n = 0;
  std::from_chars(text.data(), text.data() + i, n);
  std::string_view unit = text.substr(i);
  std::int64_t factor = 0;
  if (unit == "ms") factor = 1;
  else if (unit == "s") factor = 1000;
  else if (unit == "m") factor = 60'000;
  else if (unit == "h") factor = 3'600'000;
  else if (unit == "d") factor = 86'400'000;
  else return bad();
  return std::chrono::milliseconds(n * factor);
}

std::string format_duration(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms != 0 && ms % 86'400'000 == 0) return std::to_string(ms / 86'400'000) + "d";
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace mesh::common
