// The jetstream-kv store under broker permissions (decision records 185 and 187), on a real
// nats-server with JetStream and an authorization block: its replies (JetStream API answers and
// ordered consumers' deliveries) all come under its `inbox_prefix`, so a user that may subscribe
// only there runs it; and a JetStream subject the servers refuse is reported as a permission
// refusal naming the subject, not as the request's "Timeout".
#include <gtest/gtest.h>

#include <fstream>

#include "jetstream_kv_fixture.h"

namespace mesh::stores::jetstream_kv::testing {
namespace {

class JetStreamKvPermissionsTest : public ::testing::Test {
 protected:
  JetStreamKvPermissionsTest() {
    host_.logger = &logger_;
    host_.role = "tool";
    // User "store" may use the JetStream API of MESH_P only, and read only _INBOX.control.>.
    std::ofstream(dir_.path() / "nats.conf")
        << "authorization {\n  users = [\n"
           "    {user: \"store\", password: \"pw\", permissions: {publish: {allow: [\"$JS.API.INFO\", "
           "\"$JS.API.STREAM.*.MESH_P\", \"$JS.API.STREAM.MSG.GET.MESH_P\", \"$JS.API.DIRECT.GET.MESH_P.>\", "
           "\"$JS.API.CONSUMER.*.MESH_P\", \"$JS.API.CONSUMER.*.MESH_P.>\", \"$JS.FC.MESH_P.>\", "
           "\"$JS.ACK.MESH_P.>\", \"MESH_P.>\"]}, subscribe: {allow: [\"_INBOX.control.>\"]}}}\n"
           "  ]\n}\n";
    std::ofstream(dir_.path() / "pw") << "pw\n";
    server_ = std::make_unique<mesh::testing::NatsServer>(
        std::vector<std::string>{"-c", (dir_.path() / "nats.conf").string()}, true);
  }

  sdk::Value config(const std::string& prefix, const std::string& local, const std::string& inbox) {
    sdk::Value c = store_config({server_->url()}, prefix, 1, (dir_.path() / local).string());
    c.set("user", "store");
    c.set("password_file", (dir_.path() / "pw").string());
    c.set("timeout", std::int64_t{1000});
    if (!inbox.empty()) c.set("inbox_prefix", inbox);
    return c;
  }

  sdk::NullLogger logger_;
  sdk::HostContext host_;
  mesh::testing::TempDir dir_;
  std::unique_ptr<mesh::testing::NatsServer> server_;
};

TEST_F(JetStreamKvPermissionsTest, EveryReplyComesUnderTheInboxPrefixSoAUserThatReadsOnlyThereRunsTheStore) {
  auto a = open_store(host_, config("MESH_P", "a.db", "_INBOX.control"));
  ASSERT_TRUE(a);
  for (int i = 0; i < 80; ++i)
    ASSERT_TRUE(a->add_token(sdk::TokenRecord{"t" + std::to_string(i), "web-" + std::to_string(i), "h" + std::to_string(i),
                                              1000, 1'000'000, false, {}, false}));
  // A second instance catches up through an ordered consumer (more than 64 messages behind):
  // its deliveries come under the prefix too.
  auto b = open_store(host_, config("MESH_P", "b.db", "_INBOX.control"));
  ASSERT_TRUE(b);
  auto tokens = b->tokens(2000);
  ASSERT_TRUE(tokens) << tokens.error().describe();
  EXPECT_EQ(tokens->size(), 80u);
}

TEST_F(JetStreamKvPermissionsTest, WithoutThePrefixTheRepliesAreRefusedAndSaidSo) {
  JetStreamKvStore s(host_);
  ASSERT_TRUE(s.configure(config("MESH_P", "c.db", "")));
  auto opened = s.open();
  ASSERT_FALSE(opened) << "replies on _INBOX.<random> cannot be read by this user";
  EXPECT_EQ(opened.error().code, sdk::ErrorCode::PermissionDenied) << opened.error().describe();
  EXPECT_NE(opened.error().message.find("Permissions Violation for Subscription to"), std::string::npos)
      << opened.error().message;
}

TEST_F(JetStreamKvPermissionsTest, AStreamWhoseJetStreamRightsTheUserLacksIsAPermissionRefusalNamingTheSubject) {
  JetStreamKvStore s(host_);
  ASSERT_TRUE(s.configure(config("MESH_R1", "d.db", "_INBOX.control")));
  auto opened = s.open();
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().code, sdk::ErrorCode::PermissionDenied) << opened.error().describe();
  EXPECT_EQ(opened.error().path, "prefix");
  const std::string& m = opened.error().message;
  EXPECT_NE(m.find("Permissions Violation for Publish to"), std::string::npos) << m;
  EXPECT_NE(m.find("$JS.API.STREAM.CREATE.MESH_R1"), std::string::npos) << m;
  EXPECT_NE(m.find("user 'store'"), std::string::npos) << m;
  EXPECT_NE(m.find("broker-config"), std::string::npos) << m;
  EXPECT_EQ(m.find("Timeout"), std::string::npos) << "not reported as a timeout: " << m;
}

TEST_F(JetStreamKvPermissionsTest, AnInboxPrefixThatIsNotASubjectPrefixIsRefusedNamingTheKey) {
  for (const char* bad : {"_INBOX.>", "_INBOX.*", "_INBOX..x", "_INBOX. x", ".x", "x."}) {
    JetStreamKvStore s(host_);
    auto r = s.configure(config("MESH_P", "e.db", bad));
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().path, "inbox_prefix") << bad;
  }
}

}  // namespace
}  // namespace mesh::stores::jetstream_kv::testing
