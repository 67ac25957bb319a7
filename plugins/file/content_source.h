// A file resource's content by digest (`source = "sha256:<hex>"`, decision record 111): the
// host fetches and verifies the content into its cache (<plugin state_dir>/content/sha256/<hex>, the provider's own state directory,
// <host state_dir>/plugins/file) before
// an apply; the provider takes it from there and checks its SHA-256 once more before writing, so
// the target never holds bytes that do not match the signed digest.
#pragma once

#include <string>

#include "mesh/sdk/result.h"

namespace mesh::plugins::file::content {

/// The 64 hex characters of a `source` value "sha256:<64 lower-case hex>". Errors:
/// InvalidArgument with path "properties.source". Thread-safe.
sdk::Result<std::string> parse_source(const std::string& text);

/// <state_dir>/content/sha256/<hex>, `state_dir` the provider's (HostContext::state_dir). Thread-safe.
std::string cache_path(const std::string& state_dir, const std::string& hex);

/// The cached content `hex`, read whole from the cache under `state_dir` and checked against
/// the digest. Errors: FailedPrecondition naming "content sha256:<hex>" when the cache lacks it
/// (the host fetches it from the control plane before an apply; `mesh content push FILE` puts it
/// there), Failed when its bytes do not match (the cached file is removed) or cannot be read.
/// Thread-safe.
sdk::Result<std::string> load_verified(const std::string& state_dir, const std::string& hex);

}  // namespace mesh::plugins::file::content
