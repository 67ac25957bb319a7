#include "mesh/common/crypto.h"

#include <sodium.h>

#include "mesh/support/hex.h"
#include "mesh/support/sha256.h"

namespace mesh::common {

sdk::Result<void> crypto_init() {
  static const int rc = sodium_init();
  if (rc < 0) return sdk::fail(sdk::ErrorCode::Internal, "libsodium failed to initialise");
  return {};
}

std::string sha256_hex(std::string_view data) { return support::sha256_hex(data); }

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

std::string to_hex(std::string_view bytes) { return support::to_hex(bytes); }

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

KeyPair keypair_from_seed(std::string_view seed) {
  (void)crypto_init();
  if (seed.size() != crypto_sign_SEEDBYTES) return {};
  KeyPair kp{std::string(crypto_sign_PUBLICKEYBYTES, '\0'), std::string(crypto_sign_SECRETKEYBYTES, '\0')};
  crypto_sign_seed_keypair(reinterpret_cast<unsigned char*>(kp.public_key.data()),
                           reinterpret_cast<unsigned char*>(kp.secret_key.data()),
                           reinterpret_cast<const unsigned char*>(seed.data()));
  return kp;
}

std::string seed_of(const std::string& secret_key) {
  (void)crypto_init();
  if (secret_key.size() != crypto_sign_SECRETKEYBYTES) return {};
  std::string seed(crypto_sign_SEEDBYTES, '\0');
  crypto_sign_ed25519_sk_to_seed(reinterpret_cast<unsigned char*>(seed.data()),
                                 reinterpret_cast<const unsigned char*>(secret_key.data()));
  return seed;
}

std::string base64url_encode(std::string_view bytes) {
  (void)crypto_init();
  std::string out(sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_URLSAFE_NO_PADDING), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  out.resize(std::char_traits<char>::length(out.c_str()));
  return out;
}

sdk::Result<std::string> base64url_decode(std::string_view text) {
  (void)crypto_init();
  std::string out(text.size(), '\0');
  std::size_t len = 0;
  const char* end = nullptr;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(), text.size(), nullptr,
                        &len, &end, sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
      end != text.data() + text.size())
    return sdk::fail(sdk::ErrorCode::InvalidArgument, "not URL-safe base64 text");
  out.resize(len);
  return out;
}

std::string random_bytes(std::size_t bytes) {
  (void)crypto_init();
  std::string raw(bytes, '\0');
  randombytes_buf(raw.data(), raw.size());
  return raw;
}

std::string mac(std::string_view message, const std::string& key) {
  (void)crypto_init();
  if (key.size() != crypto_auth_KEYBYTES) return {};
  std::string tag(crypto_auth_BYTES, '\0');
  crypto_auth(reinterpret_cast<unsigned char*>(tag.data()),
              reinterpret_cast<const unsigned char*>(message.data()), message.size(),
              reinterpret_cast<const unsigned char*>(key.data()));
  return tag;
}

bool mac_verify(std::string_view message, std::string_view tag, const std::string& key) {
  (void)crypto_init();
  if (key.size() != crypto_auth_KEYBYTES || tag.size() != crypto_auth_BYTES) return false;
  return crypto_auth_verify(reinterpret_cast<const unsigned char*>(tag.data()),
                            reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                            reinterpret_cast<const unsigned char*>(key.data())) == 0;
}

sdk::Result<std::string> seal_to(std::string_view message, const std::string& ed25519_public_key) {
  (void)crypto_init();
  unsigned char x_pk[crypto_box_PUBLICKEYBYTES];
  if (ed25519_public_key.size() != crypto_sign_PUBLICKEYBYTES ||
      crypto_sign_ed25519_pk_to_curve25519(
          x_pk, reinterpret_cast<const unsigned char*>(ed25519_public_key.data())) != 0)
    return sdk::fail(sdk::ErrorCode::InvalidArgument, "not a valid Ed25519 public key");
  std::string out(message.size() + crypto_box_SEALBYTES, '\0');
  crypto_box_seal(reinterpret_cast<unsigned char*>(out.data()),
                  reinterpret_cast<const unsigned char*>(message.data()), message.size(), x_pk);
  return out;
}

sdk::Result<std::string> open_sealed(std::string_view sealed, const KeyPair& keys) {
  (void)crypto_init();
  unsigned char x_pk[crypto_box_PUBLICKEYBYTES];
  unsigned char x_sk[crypto_box_SECRETKEYBYTES];
  if (sealed.size() < crypto_box_SEALBYTES || keys.public_key.size() != crypto_sign_PUBLICKEYBYTES ||
      keys.secret_key.size() != crypto_sign_SECRETKEYBYTES ||
      crypto_sign_ed25519_pk_to_curve25519(
          x_pk, reinterpret_cast<const unsigned char*>(keys.public_key.data())) != 0 ||
      crypto_sign_ed25519_sk_to_curve25519(
          x_sk, reinterpret_cast<const unsigned char*>(keys.secret_key.data())) != 0)
    return sdk::fail(sdk::ErrorCode::PermissionDenied, "sealed box cannot be opened with this key");
  std::string out(sealed.size() - crypto_box_SEALBYTES, '\0');
  int rc = crypto_box_seal_open(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(sealed.data()), sealed.size(),
                                x_pk, x_sk);
  sodium_memzero(x_sk, sizeof x_sk);
  if (rc != 0)
    return sdk::fail(sdk::ErrorCode::PermissionDenied, "sealed box is not for this key or was altered");
  return out;
}

}  // namespace mesh::common
