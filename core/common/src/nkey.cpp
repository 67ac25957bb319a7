// Copied from transports/nats/nkey.cpp (Nox Mesh NATS transport), itself following the nkeys
// encoding of the NATS project (github.com/nats-io/nkeys, Apache-2.0).
#include "mesh/common/nkey.h"

#include <vector>

namespace mesh::common {
namespace {

constexpr char kBase32Alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
constexpr std::uint8_t kPrefixSeed = 18 << 3;  // 'S'
constexpr std::uint8_t kPrefixUser = 20 << 3;  // 'U'

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

void append_crc(std::vector<std::uint8_t>& raw) {
  const std::uint16_t crc = nkey_crc16(raw.data(), raw.size());
  raw.push_back(static_cast<std::uint8_t>(crc & 0xff));
  raw.push_back(static_cast<std::uint8_t>(crc >> 8));
}

}  // namespace

std::uint16_t nkey_crc16(const std::uint8_t* data, std::size_t size) noexcept {
  std::uint16_t crc = 0;
  for (std::size_t i = 0; i < size; ++i) {
    crc ^= static_cast<std::uint16_t>(data[i]) << 8;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021) : static_cast<std::uint16_t>(crc << 1);
  }
  return crc;
}

std::string nkey_user_seed(std::string_view seed) {
  if (seed.size() != 32) return {};
  std::vector<std::uint8_t> raw = {static_cast<std::uint8_t>(kPrefixSeed | (kPrefixUser >> 5)),
                                   static_cast<std::uint8_t>((kPrefixUser & 31) << 3)};
  raw.insert(raw.end(), seed.begin(), seed.end());
  append_crc(raw);
  return base32_encode(raw);
}

std::string nkey_user_public(std::string_view public_key) {
  if (public_key.size() != 32) return {};
  std::vector<std::uint8_t> raw = {kPrefixUser};
  raw.insert(raw.end(), public_key.begin(), public_key.end());
  append_crc(raw);
  return base32_encode(raw);
}

}  // namespace mesh::common
