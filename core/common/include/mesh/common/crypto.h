// Hashes, random secrets and Ed25519 signatures, all from libsodium.
#pragma once

#include <string>
#include <string_view>

#include "mesh/sdk/result.h"

namespace mesh::common {

/// Initialises libsodium once (thread-safe; sodium_init is idempotent). Called by every function
/// here; exposed for daemons that want to fail early.
sdk::Result<void> crypto_init();

/// SHA-256 of `data` as 64 lower-case hex characters (FIPS 180-4, via crypto_hash_sha256):
/// support::sha256_hex (mesh/support/sha256.h).
std::string sha256_hex(std::string_view data);

/// `bytes` random bytes from the OS CSPRNG, as URL-safe base64 without padding.
std::string random_token(std::size_t bytes = 32);

/// Lower-case hex of arbitrary bytes (support::to_hex), and back (InvalidArgument on odd length
/// or non-hex).
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

/// The Ed25519 key pair whose 32-byte seed is `seed` (crypto_sign_seed_keypair); empty keys when
/// `seed` is not 32 bytes. Identity files keep the seed, not libsodium's 64-byte secret form.
KeyPair keypair_from_seed(std::string_view seed);
/// The 32-byte seed of a 64-byte Ed25519 secret key (crypto_sign_ed25519_sk_to_seed).
std::string seed_of(const std::string& secret_key);

/// URL-safe base64 without padding (RFC 4648 §5), and back (InvalidArgument when malformed).
std::string base64url_encode(std::string_view bytes);
sdk::Result<std::string> base64url_decode(std::string_view text);

/// `bytes` raw random bytes from the OS CSPRNG.
std::string random_bytes(std::size_t bytes);

/// Message authentication code (libsodium crypto_auth: HMAC-SHA-512-256) of `message` under a
/// 32-byte `key`: 32 bytes. Empty when the key is not 32 bytes.
std::string mac(std::string_view message, const std::string& key);
/// Constant-time check of a crypto_auth tag; false for a wrong-size key or tag.
bool mac_verify(std::string_view message, std::string_view tag, const std::string& key);

/// Anonymous public-key encryption (crypto_box_seal) of `message` to the holder of an Ed25519
/// key pair: the Ed25519 public key is converted to its X25519 form. Errors: InvalidArgument
/// (not a valid Ed25519 public key).
sdk::Result<std::string> seal_to(std::string_view message, const std::string& ed25519_public_key);
/// Opens a sealed box made by seal_to for `keys`. Errors: PermissionDenied (not for this key, or
/// tampered with).
sdk::Result<std::string> open_sealed(std::string_view sealed, const KeyPair& keys);

}  // namespace mesh::common
