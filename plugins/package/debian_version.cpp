#include "debian_version.h"

#include <cstddef>
#include <cstdint>

namespace mesh::plugins::package {
namespace {

// ASCII classes on purpose: isdigit/isalpha depend on the locale, dpkg's c_isdigit does not.
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_alnum(char c) { return is_digit(c) || is_alpha(c); }

// dpkg's order(): digits never reach here (they end a non-digit run); '~' sorts before
// everything including the end of the string; letters before all other characters.
int order(int c) {
  if (c == 0) return 0;
  if (is_digit(static_cast<char>(c))) return 0;
  if (is_alpha(static_cast<char>(c))) return c;
  if (c == '~') return -1;
  return c + 256;
}

// dpkg's verrevcmp(), over string_views (a position past the end reads as NUL).
int compare_part(std::string_view a, std::string_view b) {
  std::size_t i = 0;
  std::size_t j = 0;
  auto at = [](std::string_view s, std::size_t k) -> int {
    return k < s.size() ? static_cast<unsigned char>(s[k]) : 0;
  };
  while (i < a.size() || j < b.size()) {
    int first_diff = 0;
    while ((i < a.size() && !is_digit(a[i])) || (j < b.size() && !is_digit(b[j]))) {
      const int ac = order(at(a, i));
      const int bc = order(at(b, j));
      if (ac != bc) return ac - bc;
      ++i;
      ++j;
    }
    while (i < a.size() && a[i] == '0') ++i;
    while (j < b.size() && b[j] == '0') ++j;
    while (i < a.size() && j < b.size() && is_digit(a[i]) && is_digit(b[j])) {
      if (first_diff == 0) first_diff = a[i] - b[j];
      ++i;
      ++j;
    }
    if (i < a.size() && is_digit(a[i])) return 1;
    if (j < b.size() && is_digit(b[j])) return -1;
    if (first_diff != 0) return first_diff;
  }
  return 0;
}

struct Parts {
  std::uint64_t epoch = 0;
  std::string_view upstream;
  std::string_view revision;
};

Parts split(std::string_view v) {
  Parts p;
  const auto colon = v.find(':');
  if (colon != std::string_view::npos) {
    bool digits = colon > 0;
    std::uint64_t e = 0;
    for (std::size_t k = 0; k < colon && digits; ++k) {
      digits = is_digit(v[k]);
      if (digits && e < (UINT64_MAX - 9) / 10) e = e * 10 + static_cast<std::uint64_t>(v[k] - '0');
    }
    if (digits) {
      p.epoch = e;
      v.remove_prefix(colon + 1);
    }
  }
  const auto dash = v.rfind('-');
  if (dash != std::string_view::npos) {
    p.upstream = v.substr(0, dash);
    p.revision = v.substr(dash + 1);
  } else {
    p.upstream = v;
  }
  return p;
}

}  // namespace

std::optional<std::string> package_name_problem(std::string_view name) {
  const std::string quoted = "'" + std::string(name) + "'";
  if (name.size() < 2)
    return quoted + " is not a Debian package name: it needs at least two characters";
  if (!is_digit(name[0]) && !(name[0] >= 'a' && name[0] <= 'z'))
    return quoted + " is not a Debian package name: it must start with a lower-case letter or a "
                    "digit";
  for (char c : name) {
    const bool ok = is_digit(c) || (c >= 'a' && c <= 'z') || c == '+' || c == '-' || c == '.';
    if (!ok)
      return quoted + " is not a Debian package name: only a-z, 0-9, '+', '-' and '.' are "
                      "allowed (no architecture qualifier)";
  }
  return std::nullopt;
}

std::optional<std::string> version_problem(std::string_view version) {
  const std::string quoted = "'" + std::string(version) + "'";
  if (version.empty()) return std::string("the version is empty");
  std::string_view rest = version;
  const auto colon = rest.find(':');
  if (colon != std::string_view::npos) {
    const std::string_view epoch = rest.substr(0, colon);
    if (epoch.empty()) return quoted + " has an empty epoch before ':'";
    for (char c : epoch)
      if (!is_digit(c)) return quoted + " has an epoch that is not a number";
    if (epoch.size() > 9) return quoted + " has an epoch that is too large";
    rest.remove_prefix(colon + 1);
  }
  std::string_view upstream = rest;
  std::string_view revision;
  const auto dash = rest.rfind('-');
  if (dash != std::string_view::npos) {
    upstream = rest.substr(0, dash);
    revision = rest.substr(dash + 1);
    if (revision.empty()) return quoted + " has an empty revision after '-'";
  }
  if (upstream.empty()) return quoted + " has an empty upstream version";
  if (!is_digit(upstream[0])) return quoted + " does not start with a digit";
  for (char c : upstream) {
    const bool ok = is_alnum(c) || c == '.' || c == '+' || c == '~' || c == '-' ||
                    (c == ':' && colon != std::string_view::npos);
    if (!ok) return quoted + " has an invalid character '" + std::string(1, c) + "'";
  }
  for (char c : revision) {
    const bool ok = is_alnum(c) || c == '.' || c == '+' || c == '~';
    if (!ok) return quoted + " has an invalid character '" + std::string(1, c) + "' in its revision";
  }
  return std::nullopt;
}

int compare_versions(std::string_view a, std::string_view b) {
  const Parts x = split(a);
  const Parts y = split(b);
  if (x.epoch != y.epoch) return x.epoch < y.epoch ? -1 : 1;
  if (int r = compare_part(x.upstream, y.upstream); r != 0) return r < 0 ? -1 : 1;
  if (int r = compare_part(x.revision, y.revision); r != 0) return r < 0 ? -1 : 1;
  return 0;
}

}  // namespace mesh::plugins::package
