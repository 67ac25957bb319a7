// NoxMesh::support_sodium: SHA-256 (FIPS 180-4 vectors) and an nkey's public key from its seed.
#include <gtest/gtest.h>

#include <string>

#include "mesh/support/nkey_keys.h"
#include "mesh/support/sha256.h"

namespace mesh::support {
namespace {

TEST(Sha256Test, Fips180Vectors) {
  // FIPS 180-4's examples (NIST, "SHA256.pdf" example values).
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, PiecesHashLikeTheWhole) {
  const std::string text(100'000, 'q');
  Sha256 h;
  h.update(nullptr, 0);
  for (std::size_t at = 0; at < text.size(); at += 4096)
    h.update(std::string_view(text).substr(at, 4096));
  EXPECT_EQ(h.hex_digest(), sha256_hex(text));
}

TEST(NkeyKeysTest, DerivesThePublicKeyOfAKnownSeed) {
  // The user key pair of the NATS documentation's nkey examples.
  auto pub = nkey_public_from_seed_text("SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY\n");
  ASSERT_TRUE(pub) << pub.error().message;
  EXPECT_EQ(*pub, "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4");
}

TEST(NkeyKeysTest, ReadsACredsBlockAndRefusesDamage) {
  std::string raw(32, '\0');
  for (std::size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<char>(i * 7 + 1);
  const std::string seed = nkey_user_seed(raw);
  auto pub = nkey_public_from_seed_text("-----BEGIN USER NKEY SEED-----\n" + seed +
                                        "\n------END USER NKEY SEED------\n");
  ASSERT_TRUE(pub) << pub.error().message;
  EXPECT_EQ(pub->size(), kNkeyPublicChars);
  EXPECT_EQ(pub->front(), 'U');

  std::string damaged = seed;
  damaged[20] = damaged[20] == 'A' ? 'B' : 'A';
  auto bad = nkey_public_from_seed_text(damaged);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, sdk::ErrorCode::InvalidArgument);
  auto none = nkey_public_from_seed_text("SUABC");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().message, "no NATS user nkey seed (SU...) found");
}

}  // namespace
}  // namespace mesh::support
