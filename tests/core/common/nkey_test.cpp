// The NATS nkey text form (nkey.cpp): CRC-16/XMODEM, and the shape of user seeds and public keys.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "mesh/common/nkey.h"

namespace mesh::common {
namespace {

TEST(NkeyTest, Crc16IsXmodem) {
  // The catalogue's check value of CRC-16/XMODEM: "123456789" -> 0x31C3.
  const std::string check = "123456789";
  EXPECT_EQ(nkey_crc16(reinterpret_cast<const std::uint8_t*>(check.data()), check.size()), 0x31C3);
  EXPECT_EQ(nkey_crc16(nullptr, 0), 0);
}

TEST(NkeyTest, UserKeysHaveTheirPrefixAndLengthAndRefuseOtherSizes) {
  const std::string key(32, '\x01'), other(32, '\x02');
  const std::string pub = nkey_user_public(key);
  EXPECT_EQ(pub.size(), 56u);
  EXPECT_EQ(pub[0], 'U');
  EXPECT_NE(pub, nkey_user_public(other));
  EXPECT_EQ(pub.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"), std::string::npos) << pub;
  const std::string seed = nkey_user_seed(key);
  EXPECT_EQ(seed.size(), 58u);
  EXPECT_EQ(seed.substr(0, 2), "SU");
  EXPECT_EQ(nkey_user_public(std::string(31, 'x')), "");
  EXPECT_EQ(nkey_user_seed(std::string(33, 'x')), "");
}

}  // namespace
}  // namespace mesh::common
