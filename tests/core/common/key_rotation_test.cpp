// Key rotation (key_rotation.cpp): statements, the chain's encodings, the walk from a pinned key
// and check_with_rotation's verdicts (decision record 98).
#include <gtest/gtest.h>

#include "mesh/common/crypto.h"
#include "mesh/common/key_rotation.h"

namespace mesh::common {
namespace {

struct Keys {
  Keys() {
    (void)crypto_init();
    for (auto& p : k) p = generate_keypair();
  }
  KeyPair k[4];
};

sdk::Message signed_by(const KeyPair& key, const std::vector<KeyRotation>& chain) {
  sdk::Message m;
  m.subject = "mesh.decl.n1";
  m.body = "body";
  m.set_header("Sig", sign(m.body, key.secret_key));
  if (!chain.empty()) m.set_header(kHeaderKeyChain, key_chain_header(chain));
  return m;
}

sdk::Result<void> verifies(const sdk::Message& m, const std::string& key) {
  const std::string* sig = m.header("Sig");
  if (sig && verify(m.body, *sig, key)) return {};
  return sdk::fail(sdk::ErrorCode::PermissionDenied, "signature does not verify");
}

TEST(KeyRotationTest, AChainWalksFromAnyOfItsKeysToTheNewest) {
  Keys t;
  std::vector<KeyRotation> chain{make_key_rotation(t.k[0], t.k[1], 1), make_key_rotation(t.k[1], t.k[2], 2)};
  auto back = parse_key_chain_header(key_chain_header(chain));
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].new_signature, chain[1].new_signature);
  auto from0 = walk_key_chain(*back, t.k[0].public_key);
  ASSERT_TRUE(from0) << from0.error().message;
  EXPECT_EQ(from0->key, t.k[2].public_key);
  EXPECT_EQ(from0->steps, 2u);
  auto from1 = walk_key_chain(*back, t.k[1].public_key);
  ASSERT_TRUE(from1);
  EXPECT_EQ(from1->steps, 1u);
  auto from2 = walk_key_chain(*back, t.k[2].public_key);
  ASSERT_TRUE(from2);
  EXPECT_EQ(from2->steps, 0u) << "the newest key walks no step";
}

TEST(KeyRotationTest, AForgedStatementALoopOrAForeignChainIsRefused) {
  Keys t;
  // Signed by another key than the one it names as old.
  auto forged = make_key_rotation(t.k[3], t.k[1], 1);
  forged.old_key = t.k[0].public_key;
  auto w = walk_key_chain({forged}, t.k[0].public_key);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code, sdk::ErrorCode::PermissionDenied);
  EXPECT_NE(w.error().message.find("the old key's signature does not verify"), std::string::npos) << w.error().message;
  // The new key's proof of possession missing.
  auto unproved = make_key_rotation(t.k[0], t.k[1], 1);
  unproved.new_signature = sign(key_rotation_text(unproved), t.k[3].secret_key);
  w = walk_key_chain({unproved}, t.k[0].public_key);
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message.find("the new key's signature does not verify"), std::string::npos) << w.error().message;
  // A chain back to a key already walked.
  w = walk_key_chain({make_key_rotation(t.k[0], t.k[1], 1), make_key_rotation(t.k[1], t.k[0], 2)}, t.k[0].public_key);
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message.find("leads back to a key already walked"), std::string::npos) << w.error().message;
  // Well signed, but not about the pinned key.
  w = walk_key_chain({make_key_rotation(t.k[1], t.k[2], 1)}, t.k[0].public_key);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code, sdk::ErrorCode::NotFound);
  EXPECT_NE(w.error().message.find("names the pinned key " + to_hex(t.k[0].public_key)), std::string::npos);
}

TEST(KeyRotationTest, BadEncodingsAreNamed) {
  auto a = parse_key_chain_header("!!!");
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("Mesh-Key-Chain header"), std::string::npos) << a.error().message;
  auto b = parse_key_chain(R"({"rotations":[{"old_key":"00"}]})", "signing.json");
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("signing.json: rotation statement 0: old_key"), std::string::npos)
      << b.error().message;
}

TEST(KeyRotationTest, CheckWithRotationBelievesOnlyAMessageOfTheChainsNewestKey) {
  Keys t;
  const std::vector<KeyRotation> chain{make_key_rotation(t.k[0], t.k[1], 1)};
  auto with = [&](const std::string& key) { return [&, key](const sdk::Message& m) {
    return check_with_rotation(m, key, [&](const std::string& k) { return verifies(m, k); });
  }; };
  // Pinned key: no rotation looked at.
  auto plain = with(t.k[0].public_key)(signed_by(t.k[0], chain));
  EXPECT_TRUE(plain.verified);
  EXPECT_TRUE(plain.new_key.empty());
  // Signed by the new key, pinned to the old: believed, with the new key to pin.
  auto rotated = with(t.k[0].public_key)(signed_by(t.k[1], chain));
  EXPECT_TRUE(rotated.verified);
  EXPECT_EQ(rotated.new_key, t.k[1].public_key);
  EXPECT_EQ(rotated.steps, 1u);
  // Signed by a third key with a genuine chain: refused, nothing to pin.
  auto thief = with(t.k[0].public_key)(signed_by(t.k[3], chain));
  EXPECT_FALSE(thief.verified);
  EXPECT_TRUE(thief.new_key.empty());
  EXPECT_NE(thief.chain_refused.find("does not verify with the chain's newest key"), std::string::npos);
  // Pinned to the new key, signed by the old one with the chain replayed: refused.
  auto old = with(t.k[1].public_key)(signed_by(t.k[0], chain));
  EXPECT_FALSE(old.verified);
  EXPECT_TRUE(old.new_key.empty());
  EXPECT_TRUE(old.chain_refused.empty()) << old.chain_refused;
}

}  // namespace
}  // namespace mesh::common
