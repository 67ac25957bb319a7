// Content by digest on the host (decision record 111): before an apply, every digest a file
// resource names as its `source` and the host's content cache lacks is fetched from the control
// plane over mesh.content.<node>, in ranges that each fit one broker message, into a temporary
// file, hashed as it arrives; only when the whole matches the digest is it renamed into the cache
// (<state_dir>/plugins/file/content/sha256/<hex>: the file provider's own state directory), where
// the file provider reads it (content_source.cpp).
// Internal to mesh-host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mesh/engine/declaration.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/transport.h"

namespace mesh::host {

/// A digest a declaration's file resources take their content from.
struct DeclaredContent {
  std::string hex;       ///< 64 lower-case hex characters
  std::string resource;  ///< the first resource naming it ("file:/path")
};

/// The distinct `source = "sha256:<hex>"` digests of `decl`'s file resources, in declaration
/// order. A malformed source is left out (the file provider refuses it at validate). Thread-safe.
std::vector<DeclaredContent> declared_content(const engine::Declaration& decl);

/// <state_dir>/plugins/file/content: the cache, in the file provider's state directory. Thread-safe.
std::string content_cache_root(const std::string& state_dir);
/// <content_cache_root>/sha256/<hex>. Thread-safe.
std::string content_cache_path(const std::string& state_dir, const std::string& hex);

/// How fetch_content() reaches the control plane.
struct ContentFetch {
  sdk::Transport* transport = nullptr;  ///< connected; not owned
  std::string node;                     ///< this node (the subject and the signer)
  std::string secret_key;               ///< the node's Ed25519 secret key (64 bytes)
  std::function<std::int64_t()> now_ms;  ///< the clock requests are signed with
  /// Checks that `reply` is the control plane's signed answer to `request` (the pinned key).
  std::function<sdk::Result<void>(const sdk::Message& reply, const sdk::Message& request)> verify;
  std::string state_dir;       ///< the host's state_dir (the cache: content_cache_root)
  std::size_t range = 1 << 20;  ///< bytes asked per request (the control plane may answer fewer)
};

/// Makes sure the content `hex` is in the cache: nothing to do when it is there, else fetched
/// range by range, hashed, and renamed into the cache only when its SHA-256 is `hex` (temp in
/// <content_cache_root>/incoming, fsync, rename, directory fsync). Errors, each naming
/// "content sha256:<hex>": NotFound (the control plane has no such content: "mesh content push
/// FILE"), PermissionDenied (the bytes do not match the digest: a corrupted or swapped range;
/// nothing kept), Unavailable (no answer, an untrusted reply, a refusal), Failed (local I/O).
/// Not thread-safe with itself for the same state_dir.
sdk::Result<void> fetch_content(const ContentFetch& how, const std::string& hex);

}  // namespace mesh::host
