// The host's pin of the control plane key (key_pin.cpp, decision record 98): identity.json is
// rewritten with the new key and nothing else changes, so the identity still loads whole.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include "mesh/common/crypto.h"
#include "mesh/common/fs.h"
#include "mesh/host/identity.h"
#include "mesh/host/key_pin.h"
#include "mesh/testing/temp_dir.h"

namespace mesh::host {
namespace {

TEST(KeyPinTest, PinningRewritesOnlyTheControlKeyAndTheIdentityStillLoads) {
  (void)common::crypto_init();
  mesh::testing::TempDir tmp;
  const std::string dir = tmp.path().string();
  auto node = common::generate_keypair();
  Identity id{"web-01", 1234, 3, node.public_key, node.secret_key, common::generate_keypair().public_key,
              common::random_bytes(32)};
  ASSERT_TRUE(save_identity(dir, id, std::string("SUAEXAMPLESEED")));
  const std::string fresh = common::generate_keypair().public_key;
  ASSERT_TRUE(pin_control_key(dir, fresh));
  auto back = load_identity(dir);
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ((*back)->control_key, fresh);
  EXPECT_EQ((*back)->node, "web-01");
  EXPECT_EQ((*back)->generation, 3u);
  EXPECT_EQ((*back)->secret_key, node.secret_key);
  EXPECT_EQ((*back)->heartbeat_key, id.heartbeat_key);
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/identity.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  auto bad = pin_control_key(dir, "short");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find(dir + "/identity.json"), std::string::npos) << bad.error().message;
  auto still = load_identity(dir);
  ASSERT_TRUE(still && still->has_value());
  EXPECT_EQ((*still)->control_key, fresh);
}

TEST(KeyPinTest, AnIdentityThatIsNotJsonIsNamedAndLeftAsItWas) {
  mesh::testing::TempDir tmp;
  const std::string dir = tmp.path().string();
  ASSERT_TRUE(common::write_file_atomic(dir + "/identity.json", "not json\n", 0600));
  (void)common::crypto_init();
  auto r = pin_control_key(dir, common::generate_keypair().public_key);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find(dir + "/identity.json"), std::string::npos) << r.error().message;
  EXPECT_EQ(*common::read_file(dir + "/identity.json"), "not json\n");
}

}  // namespace
}  // namespace mesh::host
