// Nox Mesh plugin support — the small pieces every report renderer needs: reading the report's
// lists and timestamps, ages as people read them ("4 minutes ago"), one-line reasons, and XML
// escaping. The `text`, `json` and `junit` report plugins use these; so may a third party's.
//
// Part of NoxMesh::support (header-only, links nothing). Every function is pure and thread-safe
// and never throws except std::bad_alloc.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "mesh/sdk/value.h"

namespace mesh::support {

/// The array `report[key]`, or an empty array when it is missing, null or not an array.
/// @return a copy (reports are small; a copy keeps the function free of statics).
inline sdk::Value::Array report_list(const sdk::Value& report, const char* key) {
  const sdk::Value* a = report.find(key);
  return a && a->is_array() ? a->as_array() : sdk::Value::Array{};
}

/// `v[key]` as decimal text when it is an integer, else `none`.
inline std::string int_field(const sdk::Value& v, const char* key, const char* none = "-") {
  const sdk::Value* x = v.find(key);
  if (!x || !x->is_int()) return none;
  return std::to_string(x->as_int());
}

/// Parses "2026-11-29T07:00:01Z" (also with fractional seconds, or "+00:00" for "Z"), as the
/// control plane writes its timestamps (UTC, RFC 3339).
/// @return ms since the Unix epoch, or nullopt when `text` is not such a timestamp.
inline std::optional<std::int64_t> parse_rfc3339_ms(std::string_view text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  char tail[16] = {0};
  const std::string t(text);
  if (std::sscanf(t.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%15s", &y, &mo, &d, &h, &mi, &s, tail) < 6)
    return std::nullopt;
  std::string rest(tail);
  std::int64_t frac_ms = 0;
  if (!rest.empty() && rest[0] == '.') {
    auto p = rest.find_first_not_of("0123456789", 1);
    std::string digits = rest.substr(1, (p == std::string::npos ? rest.size() : p) - 1);
    digits.resize(3, '0');
    frac_ms = std::stoi(digits.substr(0, 3));
    rest = p == std::string::npos ? "" : rest.substr(p);
  }
  if (rest != "Z" && rest != "+00:00") return std::nullopt;
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  return static_cast<std::int64_t>(timegm(&tm)) * 1000 + frac_ms;
}

/// "just now" (under 2 s), "12 seconds ago", "4 minutes ago", "3 hours ago", "4 days ago" for
/// now_ms - then_ms (a time in the future counts as now). The same words as `mesh nodes`.
inline std::string age_text(std::int64_t then_ms, std::int64_t now_ms) {
  std::int64_t s = (now_ms - then_ms) / 1000;
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

/// An outstanding entry's last contact: "4 minutes ago", with `with_timestamp`
/// "4 minutes ago (2026-11-29T07:06:00Z)", or "never" when `last_contact` is null or missing.
/// The age comes from the control plane's `age_s` when present (its clock), else from
/// `last_contact` and `now_ms`; a timestamp that does not parse gives "at (…)".
inline std::string last_contact(const sdk::Value& entry, std::int64_t now_ms, bool with_timestamp) {
  const sdk::Value* lc = entry.find("last_contact");
  if (!lc || !lc->is_string()) return "never";
  std::optional<std::int64_t> then;
  if (const sdk::Value* age = entry.find("age_s"); age && age->is_int())
    then = now_ms - age->as_int() * 1000;
  else
    then = parse_rfc3339_ms(lc->as_string());
  std::string age = then ? age_text(*then, now_ms) : std::string("at");
  return with_timestamp ? age + " (" + lc->as_string() + ")" : age;
}

/// `s` on one line: CR and LF become spaces, trailing spaces are dropped.
inline std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

/// "file:/etc/x: permission_denied: open: Permission denied": a failed entry's resource (when
/// set), its error code (when not null) and its reason on one line, or `no_reason` for none.
inline std::string failure_detail(const sdk::Value& f, const char* no_reason) {
  std::string s;
  if (!f.get_string("resource").empty()) s += f.get_string("resource") + ": ";
  if (!f.get_string("code").empty()) s += f.get_string("code") + ": ";
  const std::string reason = one_line(f.get_string("reason"));
  s += reason.empty() ? no_reason : reason;
  return s;
}

/// `s` escaped for XML 1.0 text and attribute values: & < > " ' as entities, TAB, LF and CR as
/// character references, other C0 controls (not representable in XML 1.0) as a space.
inline std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\n': out += "&#10;"; break;
      case '\r': out += "&#13;"; break;
      case '\t': out += "&#9;"; break;
      default:
        if (c < 0x20) out += ' ';
        else out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace mesh::support
