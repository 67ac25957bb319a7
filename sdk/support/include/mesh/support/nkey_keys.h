// Nox Mesh plugin support — a NATS user's public nkey from its seed (Ed25519 via libsodium).
//
// Part of NoxMesh::support_sodium: a plugin that includes this header must link
// NoxMesh::support_sodium (which adds libsodium). The text forms are those of mesh/support/nkey.h.
// natsOptions_SetNKeyFromSeed() needs the user's public key next to the seed file and nats.c has
// no API to derive one from the other, hence this.
#pragma once

#include <sodium.h>

#include <string>
#include <string_view>

#include "mesh/sdk/result.h"
#include "mesh/support/nkey.h"

namespace mesh::support {

/// Finds the first user seed in `text` (nkey_find_user_seed: a bare seed file or a .creds file),
/// checks it (nkey_decode_user_seed) and returns the user's public key, derived as Ed25519
/// (RFC 8032) does from the seed (libsodium's crypto_sign_seed_keypair).
/// @return "U..." (kNkeyPublicChars characters). Errors: InvalidArgument "no NATS user nkey seed
///         (SU...) found", or one of nkey_decode_user_seed's; Internal "libsodium failed to
///         start" (sodium_init() failed). Thread-safe; the seed and the secret key are wiped
///         (sodium_memzero) before it returns; `text` is left as it is (the caller wipes it).
inline sdk::Result<std::string> nkey_public_from_seed_text(std::string_view text) {
  const std::string_view seed_text = nkey_find_user_seed(text);
  if (seed_text.empty())
    return sdk::fail(sdk::ErrorCode::InvalidArgument, "no NATS user nkey seed (SU...) found");
  auto seed = nkey_decode_user_seed(seed_text);
  if (!seed) return sdk::fail(seed.error());
  if (sodium_init() < 0) {
    sodium_memzero(seed->data(), seed->size());
    return sdk::fail(sdk::ErrorCode::Internal, "libsodium failed to start");
  }
  unsigned char pk[crypto_sign_PUBLICKEYBYTES];
  unsigned char sk[crypto_sign_SECRETKEYBYTES];
  crypto_sign_seed_keypair(pk, sk, reinterpret_cast<const unsigned char*>(seed->data()));
  sodium_memzero(sk, sizeof sk);
  sodium_memzero(seed->data(), seed->size());
  return nkey_user_public(std::string_view(reinterpret_cast<const char*>(pk), sizeof pk));
}

}  // namespace mesh::support
