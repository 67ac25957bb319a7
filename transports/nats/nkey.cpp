#include "nkey.h"

#include <sodium.h>

#include <vector>

namespace mesh::transports::nats {
namespace {

constexpr char kBase32Alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
constexpr std::uint8_t kPrefixSeed = 18 << 3;  // 'S'
constexpr std::uint8_t kPrefixUser = 20 << 3;  // 'U'
constexpr std::size_t kSeedChars = 58;         // base32 of 2 + 32 + 2 bytes

std::string base32_encode(const std::vector<std::uint8_t>& in) {
  std::string out;
  unsigned buffer = 0;
  int bits = 0;
  for (std::uint8_t byte : in) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += kBase32Alphabet[(buffer >> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += kBase32Alphabet[(buffer << (5 - bits)) & 31];
  return out;
}

bool base32_decode(std::string_view in, std::vector<std::uint8_t>& out) {
  unsigned buffer = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= '2' && c <= '7') v = c - '2' + 26;
    else return false;
    buffer = (buffer << 5) | static_cast<unsigned>(v);
    bits += 5;
    if (bits >= 8) {
      out.push_back(static_cast<std::uint8_t>(buffer >> (bits - 8)));
      bits -= 8;
    }
  }
  return true;
}

void append_crc(std::vector<std::uint8_t>& raw) {
  const std::uint16_t crc = nkey_crc16(raw.data(), raw.size());
  raw.push_back(static_cast<std::uint8_t>(crc & 0xff));
  raw.push_back(static_cast<std::uint8_t>(crc >> 8));
}

bool is_base32_char(char c) { return (c >= 'A' && c <= 'Z') || (c >= '2' && c <= '7'); }

}  // namespace

std::uint16_t nkey_crc16(const std::uint8_t* data, std::size_t size) noexcept {
  std::uint16_t crc = 0;
  for (std::size_t i = 0; i < size; ++i) {
    crc ^= static_cast<std::uint16_t>(data[i]) << 8;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<std::uint16_t>(crc << 1);
  }
  return crc;
}

std::string nkey_encode_user_seed(const Ed25519Seed& seed) {
  std::vector<std::uint8_t> raw = {static_cast<std::uint8_t>(kPrefixSeed | (kPrefixUser >> 5)),
                                   static_cast<std::uint8_t>((kPrefixUser & 31) << 3)};
  raw.insert(raw.end(), seed.begin(), seed.end());
  append_crc(raw);
  return base32_encode(raw);
}

sdk::Result<std::string> nkey_public_from_seed_text(std::string_view text) {
  // The first token that starts with "SU" and is exactly one seed long.
  std::string_view seed_text;
  for (std::size_t i = 0; i + kSeedChars <= text.size(); ++i) {
    if (text[i] != 'S' || text[i + 1] != 'U' || (i > 0 && is_base32_char(text[i - 1]))) continue;
    std::size_t end = i;
    while (end < text.size() && is_base32_char(text[end])) ++end;
    if (end - i == kSeedChars) {
      seed_text = text.substr(i, kSeedChars);
      break;
    }
  }
  if (seed_text.empty())
    return sdk::fail(sdk::ErrorCode::InvalidArgument, "no NATS user nkey seed (SU...) found");

  std::vector<std::uint8_t> raw;
  raw.reserve(36);
  if (!base32_decode(seed_text, raw) || raw.size() != 36)
    return sdk::fail(sdk::ErrorCode::InvalidArgument, "malformed nkey seed");
  const std::uint16_t crc = static_cast<std::uint16_t>(raw[34] | (raw[35] << 8));
  if (nkey_crc16(raw.data(), 34) != crc) {
    sodium_memzero(raw.data(), raw.size());
    return sdk::fail(sdk::ErrorCode::InvalidArgument, "nkey seed checksum mismatch");
  }
  const std::uint8_t type = static_cast<std::uint8_t>(((raw[0] & 7) << 5) | ((raw[1] & 0xf8) >> 3));
  if ((raw[0] & 0xf8) != kPrefixSeed || type != kPrefixUser) {
    sodium_memzero(raw.data(), raw.size());
    return sdk::fail(sdk::ErrorCode::InvalidArgument, "not a NATS user nkey seed");
  }
  if (sodium_init() < 0) return sdk::fail(sdk::ErrorCode::Internal, "libsodium failed to start");
  unsigned char pk[crypto_sign_PUBLICKEYBYTES];
  unsigned char sk[crypto_sign_SECRETKEYBYTES];
  crypto_sign_seed_keypair(pk, sk, raw.data() + 2);
  sodium_memzero(sk, sizeof sk);
  sodium_memzero(raw.data(), raw.size());

  std::vector<std::uint8_t> pub = {kPrefixUser};
  pub.insert(pub.end(), pk, pk + sizeof pk);
  append_crc(pub);
  return base32_encode(pub);
}

}  // namespace mesh::transports::nats
