// Nox Mesh plugin support — the NATS "nkey" text form of Ed25519 keys (encoding only).
//
// Part of NoxMesh::support (header-only, links nothing). Deriving a public key from a seed needs
// Ed25519 and is in mesh/support/nkey_keys.h (NoxMesh::support_sodium).
//
// Format, as the nkeys library of the NATS project defines it (github.com/nats-io/nkeys, files
// strkey.go and crc16.go; written by `nk` and `nsc`, read by nats-server and nats.c):
//   public key: base32( [type] + 32-byte Ed25519 public key + CRC16 )             56 characters
//   seed:       base32( [0x90 | type >> 5, (type & 31) << 3] + 32-byte seed + CRC16 )  58 characters
// base32 is RFC 4648's alphabet (A-Z, 2-7) without padding; CRC16 is CRC-16/XMODEM (polynomial
// 0x1021, initial value 0) of the bytes before it, appended little-endian; `type` is one of
// NkeyType, so user seeds read "SU..." and user public keys "U...".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "mesh/sdk/result.h"

namespace mesh::support {

/// The key types of nkeys (the first byte of a public key: the letter it starts with).
enum class NkeyType : std::uint8_t {
  Account = 0,        ///< 'A'
  Cluster = 2 << 3,   ///< 'C'
  Server = 13 << 3,   ///< 'N'
  Operator = 14 << 3, ///< 'O'
  User = 20 << 3,     ///< 'U'
};

/// The prefix byte of every seed ('S' in base32), before the type.
inline constexpr std::uint8_t kNkeySeedPrefix = 18 << 3;
/// Raw sizes: an Ed25519 seed or public key, and the text forms of a seed and a public key.
inline constexpr std::size_t kNkeyRawBytes = 32;
inline constexpr std::size_t kNkeySeedChars = 58;
inline constexpr std::size_t kNkeyPublicChars = 56;

/// CRC-16/XMODEM (polynomial 0x1021, initial value 0, no reflection, no final XOR) of `size`
/// bytes at `data`, as nkeys checks its keys with; the check value of "123456789" is 0x31C3.
/// Pure, thread-safe; `data` may be null when `size` is 0.
inline std::uint16_t nkey_crc16(const std::uint8_t* data, std::size_t size) noexcept {
  std::uint16_t crc = 0;
  for (std::size_t i = 0; i < size; ++i) {
    crc ^= static_cast<std::uint16_t>(data[i]) << 8;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<std::uint16_t>(crc << 1);
  }
  return crc;
}

/// True for the characters of RFC 4648's base32 alphabet (A-Z, 2-7).
inline constexpr bool is_base32_char(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= '2' && c <= '7');
}

/// RFC 4648 §6 base32 of `bytes`, without padding: ceil(8 * size / 5) characters of A-Z, 2-7.
/// Pure, thread-safe; never throws except std::bad_alloc.
inline std::string base32_encode(std::string_view bytes) {
  constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  std::string out;
  out.reserve((bytes.size() * 8 + 4) / 5);
  unsigned buffer = 0;
  int bits = 0;
  for (unsigned char byte : bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += kAlphabet[(buffer >> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += kAlphabet[(buffer << (5 - bits)) & 31];
  return out;
}

/// Decodes unpadded RFC 4648 base32 into `out` (appended; trailing bits that do not make a whole
/// byte are dropped, as nkeys does). Returns false, `out` then holding a partial result, when
/// `text` has a character outside A-Z, 2-7 (lower case and '=' included). Pure, thread-safe.
inline bool base32_decode(std::string_view text, std::string& out) {
  unsigned buffer = 0;
  int bits = 0;
  for (char c : text) {
    unsigned v = 0;
    if (c >= 'A' && c <= 'Z') v = static_cast<unsigned>(c - 'A');
    else if (c >= '2' && c <= '7') v = static_cast<unsigned>(c - '2' + 26);
    else return false;
    buffer = (buffer << 5) | v;
    bits += 5;
    if (bits >= 8) {
      out += static_cast<char>((buffer >> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return true;
}

namespace detail {

inline void append_crc16(std::string& raw) {
  const std::uint16_t crc =
      nkey_crc16(reinterpret_cast<const std::uint8_t*>(raw.data()), raw.size());
  raw += static_cast<char>(crc & 0xff);
  raw += static_cast<char>(crc >> 8);
}

/// Overwrites `s` with zeros in a way the compiler may not drop (the bytes were a secret).
inline void wipe(std::string& s) noexcept {
  volatile char* p = s.data();
  for (std::size_t i = 0; i < s.size(); ++i) p[i] = 0;
}

}  // namespace detail

/// The nkey text of a 32-byte Ed25519 public key of `type` ("U..." for a user: 56 characters).
/// @param public_key exactly kNkeyRawBytes raw bytes.
/// @return the text, or "" when `public_key` is not 32 bytes. Pure, thread-safe.
inline std::string nkey_encode_public(NkeyType type, std::string_view public_key) {
  if (public_key.size() != kNkeyRawBytes) return {};
  std::string raw(1, static_cast<char>(type));
  raw += public_key;
  detail::append_crc16(raw);
  return base32_encode(raw);
}

/// The nkey text of a 32-byte Ed25519 seed of `type` ("SU..." for a user: 58 characters).
/// @param seed exactly kNkeyRawBytes raw bytes; a secret: the intermediate copy is wiped, the
///             returned text is the caller's to keep or wipe.
/// @return the text, or "" when `seed` is not 32 bytes. Pure, thread-safe.
inline std::string nkey_encode_seed(NkeyType type, std::string_view seed) {
  if (seed.size() != kNkeyRawBytes) return {};
  const auto t = static_cast<std::uint8_t>(type);
  std::string raw = {static_cast<char>(kNkeySeedPrefix | (t >> 5)),
                     static_cast<char>((t & 31) << 3)};
  raw += seed;
  detail::append_crc16(raw);
  std::string out = base32_encode(raw);
  detail::wipe(raw);
  return out;
}

/// nkey_encode_seed(NkeyType::User, seed): "SU..." (58 characters), "" when not 32 bytes.
inline std::string nkey_user_seed(std::string_view seed) {
  return nkey_encode_seed(NkeyType::User, seed);
}

/// nkey_encode_public(NkeyType::User, public_key): "U..." (56 characters), "" when not 32 bytes.
inline std::string nkey_user_public(std::string_view public_key) {
  return nkey_encode_public(NkeyType::User, public_key);
}

/// The first user seed in `text` (a bare seed file, or a .creds file whose seed block is
/// framed by "-----BEGIN USER NKEY SEED-----" lines): a token starting "SU" that is exactly
/// kNkeySeedChars base32 characters long and not part of a longer run of them.
/// @return a view into `text`, or an empty view when there is none. Nothing is checked but the
///         shape (see nkey_decode_user_seed). Pure, thread-safe.
inline std::string_view nkey_find_user_seed(std::string_view text) noexcept {
  for (std::size_t i = 0; i + kNkeySeedChars <= text.size(); ++i) {
    if (text[i] != 'S' || text[i + 1] != 'U' || (i > 0 && is_base32_char(text[i - 1]))) continue;
    std::size_t end = i;
    while (end < text.size() && is_base32_char(text[end])) ++end;
    if (end - i == kNkeySeedChars) return text.substr(i, kNkeySeedChars);
  }
  return {};
}

/// Decodes a user seed's text ("SU...", exactly kNkeySeedChars characters) into the 32 raw
/// Ed25519 seed bytes.
/// @return the seed (a secret: the caller wipes it). Errors, all InvalidArgument: "malformed
///         nkey seed" (wrong length or not base32), "nkey seed checksum mismatch" (CRC16),
///         "not a NATS user nkey seed" (another prefix or type). Pure, thread-safe; every
///         intermediate copy is wiped.
inline sdk::Result<std::string> nkey_decode_user_seed(std::string_view seed_text) {
  std::string raw;
  raw.reserve(2 + kNkeyRawBytes + 2);
  if (seed_text.size() != kNkeySeedChars || !base32_decode(seed_text, raw) ||
      raw.size() != 2 + kNkeyRawBytes + 2) {
    detail::wipe(raw);
    return sdk::fail(sdk::ErrorCode::InvalidArgument, "malformed nkey seed");
  }
  const auto* b = reinterpret_cast<const std::uint8_t*>(raw.data());
  const auto crc = static_cast<std::uint16_t>(b[34] | (b[35] << 8));
  if (nkey_crc16(b, 34) != crc) {
    detail::wipe(raw);
    return sdk::fail(sdk::ErrorCode::InvalidArgument, "nkey seed checksum mismatch");
  }
  const auto type = static_cast<std::uint8_t>(((b[0] & 7) << 5) | ((b[1] & 0xf8) >> 3));
  if ((b[0] & 0xf8) != kNkeySeedPrefix || type != static_cast<std::uint8_t>(NkeyType::User)) {
    detail::wipe(raw);
    return sdk::fail(sdk::ErrorCode::InvalidArgument, "not a NATS user nkey seed");
  }
  std::string seed = raw.substr(2, kNkeyRawBytes);
  detail::wipe(raw);
  return seed;
}

}  // namespace mesh::support
