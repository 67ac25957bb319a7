#include "mesh/common/crypto.h"

#include <sodium.h>

namespace mesh::common {

sdk::Result<void> crypto_init() {
  static const int rc = sodium_init();
  if (rc < 0) return sdk::fail(sdk::ErrorCode::Internal, "libsodium failed to initialise");
  return {};
}

std::string sha256_hex(std::string_view data) {
  (void)crypto_init();
  unsigned char out[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(out, reinterpret_cast<const unsigned char*>(data.data()), data.size());
  return to_hex(std::string_view(reinterpret_cast<const char*>(out), sizeof out));
}

std::string random_token(std::size_t bytes) {
  (void)crypto_init();
  std::string raw(bytes, '\0');
  randombytes_buf(raw.data(), raw.size());
  std::string out(sodium_base64_ENCODED_LEN(bytes, sodium_base64_VARIANT_URLSAFE_NO_PADDING), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(raw.data()),
                    raw.size(), sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  out.resize(std::char_traits<char>::length(out.c_str()));
  sodium_memzero(raw.data(), raw.size());
  return out;
}

std::string to_hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

sdk::Result<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return sdk::fail(sdk::ErrorCode::InvalidArgument, "hex text of odd length");
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    int hi = nib(hex[i]), lo = nib(hex[i + 1]);
    if (hi < 0 || lo < 0) return sdk::fail(sdk::ErrorCode::InvalidArgument, "not hex text");
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

KeyPair generate_keypair() {
  (void)crypto_init();
  KeyPair kp{std::string(crypto_sign_PUBLICKEYBYTES, '\0'), std::string(crypto_sign_SECRETKEYBYTES, '\0')};
  crypto_sign_keypair(reinterpret_cast<unsigned char*>(kp.public_key.data()),
                      reinterpret_cast<unsigned char*>(kp.secret_key.data()));
  return kp;
}

std::string sign(std::string_view message, const std::string& secret_key) {
  (void)crypto_init();
  std::string sig(crypto_sign_BYTES, '\0');
  if (secret_key.size() != crypto_sign_SECRETKEYBYTES) return {};
  crypto_sign_detached(reinterpret_cast<unsigned char*>(sig.data()), nullptr,
                       reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                       reinterpret_cast<const unsigned char*>(secret_key.data()));
  return sig;
}

bool verify(std::string_view message, std::string_view signature, const std::string& public_key) {
  (void)crypto_init();
  if (signature.size() != crypto_sign_BYTES || public_key.size() != crypto_sign_PUBLICKEYBYTES)
    return false;
  return crypto_sign_verify_detached(reinterpret_cast<const unsigned char*>(signature.data()),
                                     reinterpret_cast<const unsigned char*>(message.data()),
                                     message.size(),
                                     reinterpret_cast<const unsigned char*>(public_key.data())) == 0;
}

}  // namespace mesh::common
