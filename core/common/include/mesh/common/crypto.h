// Hashes, random secrets and Ed25519 signatures, all from libsodium.
#pragma once

#include <string>
#include <string_view>

#include "mesh/sdk/result.h"

namespace mesh::common {

/// Initialises libsodium once (thread-safe; sodium_init is idempotent). Called by every function
/// here; exposed for daemons that want to fail early.
sdk::Result<void> crypto_init();

/// SHA-256 of `data` as 64 lower-case hex characters (FIPS 180-4, via crypto_hash_sha256).
std::string sha256_hex(std::string_view data);

/// `bytes` random bytes from the OS CSPRNG, as URL-safe base64 without padding.
std::string random_token(std::size_t bytes = 32);

/// Lower-case hex of arbitrary bytes, and back (InvalidArgument on odd length or non-hex).
std::string to_hex(std::string_view bytes);
sdk::Result<std::string> from_hex(std::string_view hex);

/// An Ed25519 key pair (RFC 8032, crypto_sign_*). `secret` is libsodium's 64-byte form.
struct KeyPair {
  std::string public_key;  ///< 32 bytes
  std::string secret_key;  ///< 64 bytes
};
KeyPair generate_keypair();
/// Detached signature (64 bytes) of `message`.
std::string sign(std::string_view message, const std::string& secret_key);
/// True when `signature` is a valid signature of `message` by `public_key`.
bool verify(std::string_view message, std::string_view signature, const std::string& public_key);

}  // namespace mesh::common
