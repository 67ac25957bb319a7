// Operator identity files: what a damaged one is told.
#include <gtest/gtest.h>

#include "mesh/common/crypto.h"
#include "mesh/common/json.h"
#include "mesh/common/trust.h"

namespace mesh::trust {
namespace {

std::string identity_text() {
  (void)common::crypto_init();
  auto kp = common::generate_keypair();
  return operator_identity_json(OperatorIdentity{"ci", "deployer", kp.public_key, kp.secret_key, {}});
}

TEST(OperatorIdentityTest, AMissingSecretKeyIsCalledMissing) {
  auto v = common::parse_json(identity_text());
  ASSERT_TRUE(v);
  ASSERT_TRUE(parse_operator_identity(v->to_json(), "ci.identity")) << "the file as written parses";
  v->erase("secret_key");
  auto r = parse_operator_identity(v->to_json(), "ci.identity");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("ci.identity: secret_key: is missing"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("64 hex"), std::string::npos) << r.error().message;

  v->set("secret_key", "abcd");
  r = parse_operator_identity(v->to_json(), "ci.identity");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("secret_key: must be 64 hex characters"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace mesh::trust
