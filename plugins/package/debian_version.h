// Debian package names and version strings: the rules of Debian Policy §5.6.1 (Package) and
// §5.6.12 (Version), and the ordering dpkg uses (`dpkg --compare-versions`, lib/dpkg/version.c).
// Pure functions: no I/O, no locale dependence, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mesh::plugins::package {

/// Why `name` is not a Debian package name (`[a-z0-9][a-z0-9+.-]+`), or nullopt when it is.
std::optional<std::string> package_name_problem(std::string_view name);

/// Why `version` is not a Debian version (`[epoch:]upstream[-revision]`: epoch digits; upstream
/// starts with a digit and holds [A-Za-z0-9.+~-] (':' only after an epoch, '-' only before a
/// revision); revision holds [A-Za-z0-9.+~]), or nullopt when it is. Follows dpkg's
/// parseversion(), which refuses the same strings.
std::optional<std::string> version_problem(std::string_view version);

/// Orders two Debian versions the way dpkg does: <0 when `a` is older, 0 when equal (`1.0`,
/// `0:1.0` and `1.0-0` are equal), >0 when newer. Epochs compare numerically; upstream and
/// revision compare in alternating non-digit runs (`~` before everything, even the end; letters
/// before other characters) and digit runs (numerically, so 1.10 > 1.9). Never compares string
/// prefixes. Precondition: both are valid (version_problem() is nullopt); anything else still
/// gives a total order, just not a meaningful one.
int compare_versions(std::string_view a, std::string_view b);

/// True when `a` and `b` name the same version (compare_versions() == 0).
inline bool same_version(std::string_view a, std::string_view b) {
  return compare_versions(a, b) == 0;
}

}  // namespace mesh::plugins::package
