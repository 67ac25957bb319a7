// Nox Mesh plugin support — SHA-256 as lower-case hex, one-shot and streaming.
//
// Part of NoxMesh::support_sodium: the algorithm is libsodium's crypto_hash_sha256 (SHA-256 of
// FIPS 180-4, "Secure Hash Standard"), so a plugin that includes this header must link
// NoxMesh::support_sodium (which adds libsodium), not only NoxMesh::support.
#pragma once

#include <sodium.h>

#include <string>
#include <string_view>

#include "mesh/support/hex.h"

namespace mesh::support {

/// SHA-256 (FIPS 180-4, via libsodium's crypto_hash_sha256) of `data`.
/// @param data any bytes.
/// @return 64 lower-case hex characters (to_hex of the 32-byte digest); SHA-256 of "abc" is
///         "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" (FIPS 180-4 example).
///         Never throws except std::bad_alloc. Thread-safe. Calls sodium_init() (idempotent and
///         thread-safe; the hash does not depend on its result).
inline std::string sha256_hex(std::string_view data) {
  [[maybe_unused]] const int ready = sodium_init();  // the hash works either way
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(data.data()), data.size());
  return to_hex(std::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
}

/// SHA-256 of data given in pieces (a file read in chunks): the digest of the concatenation of
/// every update(), as sha256_hex() of the whole would give.
/// Not thread-safe (one object per thread); copyable (a copy continues independently). Holds no
/// secret (the state is not wiped).
class Sha256 {
 public:
  Sha256() noexcept {
    [[maybe_unused]] const int ready = sodium_init();  // the hash works either way
    crypto_hash_sha256_init(&state_);
  }
  /// Adds `size` bytes at `data` (may be null when `size` is 0).
  void update(const void* data, std::size_t size) noexcept {
    crypto_hash_sha256_update(&state_, static_cast<const unsigned char*>(data),
                              static_cast<unsigned long long>(size));
  }
  void update(std::string_view data) noexcept { update(data.data(), data.size()); }
  /// The digest of everything added, as 64 lower-case hex characters. Call once: the object is
  /// finished afterwards (update() or a second call give meaningless results).
  std::string hex_digest() {
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&state_, digest);
    return to_hex(std::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
  }

 private:
  crypto_hash_sha256_state state_;
};

}  // namespace mesh::support
