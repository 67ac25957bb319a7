// The NATS "nkey" text form of Ed25519 user keys, so that mesh-control can mint per-node broker
// credentials: base32 (RFC 4648 alphabet, no padding) of prefix bytes + key + CRC-16/XMODEM
// (little-endian). Seeds start "SU", public keys "U". The encoding is copied from the nats
// transport plugin (transports/nats/nkey.cpp), which follows the nkeys library of the NATS
// project; core code may not link a plugin, so the few lines live here too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mesh::common {

/// "SU…" (58 characters) for a 32-byte Ed25519 seed; "" when `seed` is not 32 bytes.
std::string nkey_user_seed(std::string_view seed);
/// "U…" (56 characters) for a 32-byte Ed25519 public key; "" when not 32 bytes.
std::string nkey_user_public(std::string_view public_key);
/// CRC-16/XMODEM (polynomial 0x1021, initial value 0), as nkeys uses it.
std::uint16_t nkey_crc16(const std::uint8_t* data, std::size_t size) noexcept;

}  // namespace mesh::common
