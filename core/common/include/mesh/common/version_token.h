// The form of a version that is substituted into commands and file names (a pipeline run's
// `--version`): checked by `mesh` and by the control plane alike.
#pragma once

#include <string_view>

namespace mesh::common {

/// What such a version must match (Debian- and semver-like, opaque):
/// `[A-Za-z0-9][A-Za-z0-9.+~:_-]{0,127}` — no `/` (so no path segment, `..` included), no
/// leading `-` (never read as an option), no space or control character.
inline constexpr const char* kVersionTokenForm = "[A-Za-z0-9][A-Za-z0-9.+~:_-]{0,127}";

/// Whether `version` matches kVersionTokenForm. Pure; thread-safe; never throws.
bool valid_version_token(std::string_view version) noexcept;

}  // namespace mesh::common
