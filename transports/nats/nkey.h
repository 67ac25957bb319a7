// Nox Mesh NATS transport — the NATS "nkey" text encoding of Ed25519 user keys.
//
// natsOptions_SetNKeyFromSeed() needs the user's public key next to the seed file, and nats.c has
// no API to derive one from the other, so we decode the seed ourselves. Format (nkeys, as written
// by `nk` and `nsc`): base32 (RFC 4648 alphabet, no padding) of
//   seed:   [0x90 | type>>5, (type & 31) << 3, 32-byte Ed25519 seed, CRC-16/XMODEM little-endian]
//   public: [type, 32-byte Ed25519 public key, CRC-16/XMODEM little-endian]
// with type 20<<3 for users, so user seeds read "SU..." (58 characters) and user public keys
// "U..." (56 characters).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "mesh/sdk/result.h"

namespace mesh::transports::nats {

using Ed25519Seed = std::array<std::uint8_t, 32>;

/// Finds a user seed ("SU" + 56 base32 characters) in `text` (a bare seed file or a .creds file),
/// checks its CRC and returns the public key ("U..."). Errors: InvalidArgument (no user seed, bad
/// checksum). Thread-safe.
sdk::Result<std::string> nkey_public_from_seed_text(std::string_view text);

/// Encodes a raw Ed25519 seed as a user seed string ("SU..."). Used by tests to make key pairs.
std::string nkey_encode_user_seed(const Ed25519Seed& seed);

/// CRC-16/XMODEM (polynomial 0x1021, initial value 0), as nkeys uses it.
std::uint16_t nkey_crc16(const std::uint8_t* data, std::size_t size) noexcept;

}  // namespace mesh::transports::nats
