// Configuration checks and subject syntax (no server needed). The nkey codec's own tests are in
// tests/sdk/support.
#include "mesh/testing/temp_dir.h"
#include "mesh/support/nkey.h"
#include "test_support.h"

namespace mesh::transports::nats::test {
namespace {

using sdk::ErrorCode;

class NatsTransportConfigTest : public TransportTestBase {
 protected:
  /// configure()'s error for `config` (fails the test when it succeeds).
  sdk::Error config_error(const sdk::Value& config) {
    NatsTransport t(host_);
    auto r = t.configure(config);
    EXPECT_FALSE(r) << "configure succeeded for " << config.to_json();
    return r ? sdk::Error{} : r.error();
  }
  mesh::testing::TempDir dir_;
};

TEST_F(NatsTransportConfigTest, SchemaListsTheKeys) {
  const sdk::Schema& s = NatsTransport::schema();
  ASSERT_NE(s.find("servers"), nullptr);
  EXPECT_TRUE(s.find("servers")->required);
  EXPECT_EQ(s.find("servers")->type, sdk::ValueType::StringList);
  for (const char* key : {"name", "nkey_seed", "user", "password_file", "tls_ca"}) {
    ASSERT_NE(s.find(key), nullptr) << key;
    EXPECT_FALSE(s.find(key)->required) << key;
    EXPECT_FALSE(s.find(key)->description.empty()) << key;
  }
  EXPECT_EQ(s.find("connect_timeout"), nullptr);
  NatsTransport t(host_);
  EXPECT_EQ(&t.config_schema(), &s);
}

// send_asap (decision 113): on unless the config turns it off; not a bool is refused by name.
TEST_F(NatsTransportConfigTest, SendAsapIsOnByDefaultAndCanBeTurnedOff) {
  {
    NatsTransport t(host_);
    ASSERT_TRUE(t.configure(config_for("nats://127.0.0.1:4222")));
    EXPECT_TRUE(t.settings_for_test().send_asap);
    EXPECT_FALSE(t.settings_for_test().shared_delivery);
  }
  sdk::Value off = config_for("nats://127.0.0.1:4222");
  off.set("send_asap", false);
  NatsTransport t(host_);
  ASSERT_TRUE(t.configure(off));
  EXPECT_FALSE(t.settings_for_test().send_asap);
  sdk::Value bad = config_for("nats://127.0.0.1:4222");
  bad.set("send_asap", "yes");
  auto e = config_error(bad);
  EXPECT_EQ(e.code, ErrorCode::InvalidArgument);
  EXPECT_EQ(e.path, "send_asap");
}

TEST_F(NatsTransportConfigTest, BadServerUrlsNameTheirIndex) {
  for (const std::string bad : {"http://127.0.0.1:4222", "127.0.0.1:4222", "nats://",
                                "nats://:4222", "nats://host:0", "nats://host:99999",
                                "nats://host:12ab", "nats://host/path", "nats://ho st"}) {
    auto e = config_error(config_for(std::vector<std::string>{"nats://127.0.0.1:4222", bad}));
    EXPECT_EQ(e.code, ErrorCode::InvalidArgument) << bad;
    EXPECT_EQ(e.path, "servers[1]") << bad;
  }
  auto e = config_error(config_for("localhost"));
  EXPECT_EQ(e.path, "servers[0]");
  EXPECT_EQ(config_error(config_for(std::vector<std::string>{})).path, "servers");
  for (const std::string good : {"nats://127.0.0.1:4222", "tls://nats.example.com",
                                 "nats://u:p@host:4222", "nats://[::1]:4222", "nats://host/"}) {
    NatsTransport t(host_);
    EXPECT_TRUE(t.configure(config_for(good))) << good;
  }
}

TEST_F(NatsTransportConfigTest, SchemaViolationsAreInvalidArgument) {
  sdk::Value c = config_for("nats://127.0.0.1:4222");
  c.set("connect_timeout", 5);  // passed to connect(), not configured
  auto e = config_error(c);
  EXPECT_EQ(e.code, ErrorCode::InvalidArgument);
  EXPECT_EQ(e.path, "connect_timeout");
  EXPECT_EQ(config_error(sdk::Value::object()).path, "servers");
  sdk::Value wrong_type = sdk::Value::object();
  wrong_type.set("servers", "nats://127.0.0.1:4222");
  EXPECT_EQ(config_error(wrong_type).path, "servers");
}

TEST_F(NatsTransportConfigTest, CredentialFilesMustBeReadable) {
  sdk::Value c = config_for("nats://127.0.0.1:4222");
  c.set("nkey_seed", (dir_.path() / "missing.nk").string());
  auto e = config_error(c);
  EXPECT_EQ(e.code, ErrorCode::InvalidArgument);
  EXPECT_EQ(e.path, "nkey_seed");
  EXPECT_NE(e.message.find("missing.nk"), std::string::npos) << e.message;

  c.set("nkey_seed", dir_.path().string());  // a directory: open works, read fails
  EXPECT_EQ(config_error(c).path, "nkey_seed");

  write_text(dir_.path() / "garbage.nk", "not a seed\n");
  c.set("nkey_seed", (dir_.path() / "garbage.nk").string());
  EXPECT_EQ(config_error(c).path, "nkey_seed");

  sdk::Value p = config_for("nats://127.0.0.1:4222");
  p.set("user", "node1");
  p.set("password_file", (dir_.path() / "missing.pw").string());
  EXPECT_EQ(config_error(p).path, "password_file");
  write_text(dir_.path() / "empty.pw", "\n");
  p.set("password_file", (dir_.path() / "empty.pw").string());
  EXPECT_EQ(config_error(p).path, "password_file");

  sdk::Value no_user = config_for("nats://127.0.0.1:4222");
  write_text(dir_.path() / "ok.pw", "secret\n");
  no_user.set("password_file", (dir_.path() / "ok.pw").string());
  EXPECT_EQ(config_error(no_user).path, "password_file");

  sdk::Value tls = config_for("tls://127.0.0.1:4222");
  tls.set("tls_ca", (dir_.path() / "missing-ca.pem").string());
  EXPECT_EQ(config_error(tls).path, "tls_ca");
  write_text(dir_.path() / "not-a-ca.pem", "hello\n");
  tls.set("tls_ca", (dir_.path() / "not-a-ca.pem").string());
  EXPECT_EQ(config_error(tls).path, "tls_ca");
}

TEST_F(NatsTransportConfigTest, NkeySeedAndUserAreExclusive) {
  write_text(dir_.path() / "user.nk", support::nkey_user_seed(std::string(32, '\0')) + "\n");
  sdk::Value c = config_for("nats://127.0.0.1:4222");
  c.set("nkey_seed", (dir_.path() / "user.nk").string());
  c.set("user", "node1");
  auto e = config_error(c);
  EXPECT_EQ(e.code, ErrorCode::InvalidArgument);
  EXPECT_EQ(e.path, "user");
}

TEST_F(NatsTransportConfigTest, ReadsCredentials) {
  write_text(dir_.path() / "pw", "s3cret\r\n");
  sdk::Value c = config_for("nats://127.0.0.1:4222");
  c.set("name", "node-1");
  c.set("user", "node1");
  c.set("password_file", (dir_.path() / "pw").string());
  NatsTransport t(host_);
  ASSERT_TRUE(t.configure(c));
  EXPECT_EQ(t.settings_for_test().password, "s3cret");
  EXPECT_EQ(t.settings_for_test().name, "node-1");
}

TEST_F(NatsTransportConfigTest, CallsBeforeConfigureOrConnectFail) {
  NatsTransport t(host_);
  auto r = t.connect(1s, false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::FailedPrecondition);
  ASSERT_TRUE(t.configure(config_for("nats://127.0.0.1:4222")));
  sdk::Message m{"a.b", "", {}, "x"};
  EXPECT_EQ(t.publish(m).error().code, ErrorCode::Unavailable);
  EXPECT_EQ(t.request(m, 100ms).error().code, ErrorCode::Unavailable);
  EXPECT_EQ(t.flush(100ms).error().code, ErrorCode::Unavailable);
  EXPECT_EQ(t.subscribe("a.b", "", [](sdk::Message&&) {}).error().code, ErrorCode::Unavailable);
  EXPECT_FALSE(t.connected());
  EXPECT_EQ(t.max_payload_bytes(), 0u);
  t.close();
  t.close();  // idempotent
  EXPECT_EQ(t.connect(1s, false).error().code, ErrorCode::Unavailable);
}

TEST(NatsTransportSubjectTest, SubjectSyntax) {
  EXPECT_TRUE(valid_subject("mesh.node.n1", false));
  EXPECT_TRUE(valid_subject("a", false));
  EXPECT_TRUE(valid_subject("mesh.*.n1", true));
  EXPECT_TRUE(valid_subject("mesh.>", true));
  EXPECT_FALSE(valid_subject("mesh.*", false));
  EXPECT_FALSE(valid_subject("mesh.>", false));
  EXPECT_FALSE(valid_subject("mesh.>.x", true));
  EXPECT_FALSE(valid_subject("", true));
  EXPECT_FALSE(valid_subject("a..b", true));
  EXPECT_FALSE(valid_subject(".a", true));
  EXPECT_FALSE(valid_subject("a.", true));
  EXPECT_FALSE(valid_subject("a b", true));
  EXPECT_FALSE(valid_subject("a\tb", true));
}

}  // namespace
}  // namespace mesh::transports::nats::test
