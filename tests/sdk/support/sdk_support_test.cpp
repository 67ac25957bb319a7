// NoxMesh::support, the part that links nothing: errno text, hex and the nkey codec.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "mesh/support/errno_text.h"
#include "mesh/support/hex.h"
#include "mesh/support/nkey.h"

namespace mesh::support {
namespace {

TEST(ErrnoTextTest, NamesKnownAndUnknownValues) {
  EXPECT_EQ(errno_text(EACCES), "Permission denied");
  EXPECT_EQ(errno_text(ENOENT), "No such file or directory");
  const std::string unknown = errno_text(4711);
  EXPECT_FALSE(unknown.empty());
  EXPECT_NE(unknown.find("4711"), std::string::npos) << unknown;
}

TEST(HexTest, LowerCaseHighNibbleFirst) {
  EXPECT_EQ(to_hex(""), "");
  EXPECT_EQ(to_hex(std::string("\x01\xab\xff\x00", 4)), "01abff00");
}

TEST(Base32Test, Rfc4648Vectors) {
  // RFC 4648 §10, without the padding nkeys leaves out.
  EXPECT_EQ(base32_encode(""), "");
  EXPECT_EQ(base32_encode("f"), "MY");
  EXPECT_EQ(base32_encode("fo"), "MZXQ");
  EXPECT_EQ(base32_encode("foo"), "MZXW6");
  EXPECT_EQ(base32_encode("foob"), "MZXW6YQ");
  EXPECT_EQ(base32_encode("fooba"), "MZXW6YTB");
  EXPECT_EQ(base32_encode("foobar"), "MZXW6YTBOI");
  std::string out;
  ASSERT_TRUE(base32_decode("MZXW6YTBOI", out));
  EXPECT_EQ(out, "foobar");
  out.clear();
  EXPECT_FALSE(base32_decode("MZXW6ytb", out));  // lower case is not the alphabet
  out.clear();
  EXPECT_FALSE(base32_decode("MZXW6YTBOI======", out));  // nor is padding
}

TEST(NkeyCodecTest, Crc16IsXmodem) {
  const std::string check = "123456789";  // the CRC catalogue's check input
  EXPECT_EQ(nkey_crc16(reinterpret_cast<const std::uint8_t*>(check.data()), check.size()), 0x31C3);
  EXPECT_EQ(nkey_crc16(nullptr, 0), 0);
}

TEST(NkeyCodecTest, KnownUserSeedDecodesAndEncodesBack) {
  // The user key pair of the NATS documentation's nkey examples.
  const std::string seed_text = "SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY";
  auto seed = nkey_decode_user_seed(seed_text);
  ASSERT_TRUE(seed) << seed.error().message;
  EXPECT_EQ(seed->size(), 32u);
  EXPECT_EQ(nkey_user_seed(*seed), seed_text);
}

TEST(NkeyCodecTest, TypesGiveTheirLetters) {
  const std::string key(32, '\x5a');
  EXPECT_EQ(nkey_encode_public(NkeyType::User, key).front(), 'U');
  EXPECT_EQ(nkey_encode_public(NkeyType::Account, key).front(), 'A');
  EXPECT_EQ(nkey_encode_public(NkeyType::Operator, key).front(), 'O');
  EXPECT_EQ(nkey_encode_public(NkeyType::Server, key).front(), 'N');
  EXPECT_EQ(nkey_encode_public(NkeyType::Cluster, key).front(), 'C');
  EXPECT_EQ(nkey_user_public(key).size(), kNkeyPublicChars);
  EXPECT_EQ(nkey_user_seed(key).substr(0, 2), "SU");
  EXPECT_EQ(nkey_user_seed(key).size(), kNkeySeedChars);
  EXPECT_EQ(nkey_encode_seed(NkeyType::Account, key).substr(0, 2), "SA");
  EXPECT_EQ(nkey_user_public(std::string(31, 'x')), "");
  EXPECT_EQ(nkey_user_seed(std::string(33, 'x')), "");
}

TEST(NkeyCodecTest, RefusesDamageAndOtherTypes) {
  std::string raw(32, '\0');
  for (std::size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<char>(i * 7 + 1);
  const std::string seed = nkey_user_seed(raw);
  auto back = nkey_decode_user_seed(seed);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, raw);

  std::string damaged = seed;
  damaged[20] = damaged[20] == 'A' ? 'B' : 'A';
  auto bad = nkey_decode_user_seed(damaged);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, sdk::ErrorCode::InvalidArgument);
  EXPECT_EQ(bad.error().message, "nkey seed checksum mismatch");

  auto account = nkey_decode_user_seed(nkey_encode_seed(NkeyType::Account, raw));
  ASSERT_FALSE(account);
  EXPECT_EQ(account.error().message, "not a NATS user nkey seed");

  auto short_seed = nkey_decode_user_seed("SUABC");
  ASSERT_FALSE(short_seed);
  EXPECT_EQ(short_seed.error().message, "malformed nkey seed");
}

TEST(NkeyCodecTest, FindsTheSeedInACredsFile) {
  const std::string seed = nkey_user_seed(std::string(32, '\x11'));
  const std::string creds = "-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1QifQ\n------END NATS USER JWT------\n"
                            "-----BEGIN USER NKEY SEED-----\n" + seed + "\n------END USER NKEY SEED------\n";
  EXPECT_EQ(nkey_find_user_seed(creds), seed);
  EXPECT_EQ(nkey_find_user_seed(seed + "\n"), seed);
  EXPECT_TRUE(nkey_find_user_seed("no seed here").empty());
  // Part of a longer base32 run is not a seed.
  EXPECT_TRUE(nkey_find_user_seed("A" + seed).empty());
  EXPECT_TRUE(nkey_find_user_seed(seed + "A").empty());
}

}  // namespace
}  // namespace mesh::support
