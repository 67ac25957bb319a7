// Crypto (crypto.cpp): SHA-256, Ed25519 signatures, tokens, hex.
#include <gtest/gtest.h>

#include "mesh/common/crypto.h"

namespace mesh::common {
namespace {

TEST(CryptoTest, HashSignVerify) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto kp = generate_keypair();
  auto sig = sign("node\n1\nbody", kp.secret_key);
  EXPECT_TRUE(verify("node\n1\nbody", sig, kp.public_key));
  EXPECT_FALSE(verify("node\n1\nbodz", sig, kp.public_key));
  EXPECT_NE(random_token(), random_token());
  EXPECT_GE(random_token().size(), 43u);
  EXPECT_EQ(*from_hex(to_hex("\x01\xff")), "\x01\xff");
}

}  // namespace
}  // namespace mesh::common
