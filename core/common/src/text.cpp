#include "mesh/common/text.h"
#include "mesh/common/error_text.h"
#include "mesh/common/version_token.h"

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace mesh::common {
namespace {

// Length of the valid UTF-8 sequence at s[i] and its code point, or 0 when the bytes there are
// not valid UTF-8 (overlong forms, surrogates, beyond U+10FFFF, truncated sequences).
std::size_t utf8_at(std::string_view s, std::size_t i, char32_t* cp) noexcept {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  std::size_t n = 0;
  char32_t v = 0, min = 0;
  if ((c & 0xE0) == 0xC0) n = 2, v = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0) n = 3, v = c & 0x0F, min = 0x800;
  else if ((c & 0xF8) == 0xF0) n = 4, v = c & 0x07, min = 0x10000;
  else return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(k) & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return n;
}

// True for the code points (above ASCII) that printable() escapes.
bool unsafe_code_point(char32_t cp) noexcept {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200E || cp == 0x200F || cp == 0x061C;
}

// The escape for s[i..i+*len) if it needs one (sets *len to the bytes it covers), else empty.
std::string escape_at(std::string_view s, std::size_t i, std::size_t* len) {
  const auto c = static_cast<unsigned char>(s[i]);
  char buf[12];
  if (c < 0x80) {
    *len = 1;
    switch (c) {
      case '\n': return "\\n";
      case '\r': return "\\r";
      case '\t': return "\\t";
      default: break;
    }
    if (c < 0x20 || c == 0x7F) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      return buf;
    }
    return {};
  }
  char32_t cp = 0;
  const std::size_t n = utf8_at(s, i, &cp);
  if (n == 0) {
    *len = 1;
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    return buf;
  }
  *len = n;
  if (unsafe_code_point(cp)) {
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
    return buf;
  }
  return {};
}

}  // namespace

std::string printable(std::string_view value, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(value.size(), max_bytes) + 16);
  std::size_t i = 0;
  while (i < value.size()) {
    std::size_t len = 1;
    std::string esc = escape_at(value, i, &len);
    const std::size_t add = esc.empty() ? len : esc.size();
    if (out.size() + add > max_bytes) break;
    if (esc.empty())
      out.append(value.substr(i, len));
    else
      out += esc;
    i += len;
  }
  if (i < value.size()) out += "\xe2\x80\xa6 (" + std::to_string(value.size()) + " bytes)";
  return out;
}

std::size_t first_unprintable(std::string_view value) noexcept {
  // Eight bytes at a time while they are all printable ASCII (0x20-0x7E), as names and paths
  // mostly are (the declaration check runs this on every type and id); the first block holding
  // anything else is looked at byte by byte below.
  std::size_t i = 0;
  constexpr std::uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  while (i + 8 <= value.size()) {
    std::uint64_t w;
    std::memcpy(&w, value.data() + i, 8);
    const std::uint64_t below_space = (w - kOnes * 0x20) & ~w & kHigh;  // a byte < 0x20
    const std::uint64_t above_tilde = ((w + kOnes * 0x01) | w) & kHigh;  // a byte > 0x7E
    if (below_space | above_tilde) break;
    i += 8;
  }
  while (i < value.size()) {
    std::size_t len = 1;
    const auto c = static_cast<unsigned char>(value[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F) return i;
      ++i;
      continue;
    }
    char32_t cp = 0;
    len = utf8_at(value, i, &cp);
    if (len == 0 || unsafe_code_point(cp)) return i;
    i += len;
  }
  return std::string_view::npos;
}

bool valid_version_token(std::string_view version) noexcept {
  if (version.empty() || version.size() > 128) return false;
  auto alnum = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(version.front())) return false;
  for (char c : version)
    if (!alnum(c) && c != '.' && c != '+' && c != '~' && c != ':' && c != '_' && c != '-') return false;
  return true;
}

std::string described(const sdk::Error& error) {
  if (error.path.empty()) return error.message;
  const std::string named = error.path + ": ";
  if (error.message.compare(0, named.size(), named) == 0 || error.message.find(": " + named) != std::string::npos)
    return error.message;
  return named + error.message;
}

}  // namespace mesh::common
