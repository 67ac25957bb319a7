// Authentication (nkey, user/password) and permission violations against a configured server.
#include <chrono>
#include <thread>

#include "mesh/testing/nats_server.h"
#include "mesh/testing/temp_dir.h"
#include "nkey.h"
#include "test_support.h"

namespace mesh::transports::nats::test {
namespace {

using mesh::testing::eventually;
using sdk::ErrorCode;
using sdk::Message;

Ed25519Seed seed_bytes(std::uint8_t base) {
  Ed25519Seed raw{};
  for (std::size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<std::uint8_t>(base + i * 3);
  return raw;
}

class NatsTransportAuthTest : public TransportTestBase {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const auto path = dir_.path() / name;
    write_text(path, text);
    return path.string();
  }
  mesh::testing::TempDir dir_;
};

TEST_F(NatsTransportAuthTest, NkeyServerAcceptsTheRightSeedAndRefusesOthers) {
  const std::string good_seed = nkey_encode_user_seed(seed_bytes(1));
  const std::string other_seed = nkey_encode_user_seed(seed_bytes(99));
  auto good_pub = nkey_public_from_seed_text(good_seed);
  ASSERT_TRUE(good_pub);
  const std::string conf =
      write("nkey.conf", "authorization {\n  users = [ { nkey: \"" + *good_pub + "\" } ]\n}\n");
  mesh::testing::NatsServer server({"-c", conf});

  sdk::Value ok = config_for(server.url());
  ok.set("nkey_seed", write("good.nk", good_seed + "\n"));
  auto t = make(ok);
  auto r = t->connect(2s, false);
  ASSERT_TRUE(r) << describe(r.error()) << "\nserver log:\n" << server.log_path();
  EXPECT_EQ(t->settings_for_test().nkey_public, *good_pub);
  Inbox inbox;
  auto sub = t->subscribe("mesh.auth", "", inbox.handler());
  ASSERT_TRUE(sub);
  ASSERT_TRUE(t->publish(Message{"mesh.auth", "", {}, "hello"}));
  ASSERT_TRUE(inbox.wait_for(1));

  sdk::Value wrong = config_for(server.url());
  wrong.set("nkey_seed", write("other.nk", other_seed + "\n"));
  auto refused = make(wrong);
  auto rr = refused->connect(2s, false);
  ASSERT_FALSE(rr);
  EXPECT_EQ(rr.error().code, ErrorCode::PermissionDenied) << describe(rr.error());

  auto anonymous = make(config_for(server.url()));
  auto ra = anonymous->connect(2s, false);
  ASSERT_FALSE(ra);
  EXPECT_EQ(ra.error().code, ErrorCode::PermissionDenied) << describe(ra.error());
}

TEST_F(NatsTransportAuthTest, UserAndPasswordFile) {
  const std::string conf = write(
      "users.conf",
      "authorization {\n  users = [ { user: \"node1\", password: \"s3cret\" } ]\n}\n");
  mesh::testing::NatsServer server({"-c", conf});

  sdk::Value ok = config_for(server.url());
  ok.set("user", "node1");
  ok.set("password_file", write("good.pw", "s3cret\n"));
  auto t = connect(ok);
  EXPECT_TRUE(t->connected());

  sdk::Value bad = config_for(server.url());
  bad.set("user", "node1");
  bad.set("password_file", write("bad.pw", "guess\n"));
  auto refused = make(bad);
  auto r = refused->connect(2s, false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::PermissionDenied) << describe(r.error());
}

TEST_F(NatsTransportAuthTest, RefusedCredentialsWithRetryInBackground) {
  const std::string conf = write(
      "users.conf",
      "authorization {\n  users = [ { user: \"node1\", password: \"s3cret\" } ]\n}\n");
  mesh::testing::NatsServer server({"-c", conf});
  sdk::Value bad = config_for(server.url());
  bad.set("user", "node1");
  bad.set("password_file", write("bad.pw", "guess\n"));
  auto t = make(bad);
  EventRecorder events;
  t->on_link_event(events.handler());
  // nats.c reports "not yet connected" here; the transport recognises the refusal, gives up
  // instead of retrying and reports no link event for the refused attempt.
  auto r = t->connect(2s, true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::PermissionDenied) << describe(r.error());
  EXPECT_NE(r.error().message.find("Authorization Violation"), std::string::npos)
      << r.error().message;
  std::this_thread::sleep_for(600ms);
  EXPECT_FALSE(t->connected());
  EXPECT_TRUE(events.events().empty());

  // Fixed credentials: connect() may be called again on the same object.
  ASSERT_TRUE(t->configure([&] {
    sdk::Value good = config_for(server.url());
    good.set("user", "node1");
    good.set("password_file", write("good.pw", "s3cret"));
    return good;
  }()));
  ASSERT_TRUE(t->connect(2s, true));
  EXPECT_TRUE(t->connected());
  t->close();
  EXPECT_EQ(events.events(), std::vector<sdk::LinkEvent>{sdk::LinkEvent::Closed});
}

TEST_F(NatsTransportAuthTest, PermissionViolationsAreLoggedAndRefusedSubscriptionsFail) {
  const std::string conf = write("perms.conf", R"(
authorization {
  users = [
    { user: "node1", password: "pw",
      permissions: { publish: { deny: ["forbidden.>"] }, subscribe: { deny: ["secret.>"] } } }
  ]
}
)");
  mesh::testing::NatsServer server({"-c", conf});
  sdk::Value c = config_for(server.url());
  c.set("user", "node1");
  c.set("password_file", write("pw", "pw"));
  auto t = connect(c);

  // A refused publish is only known asynchronously: the error handler logs it.
  ASSERT_TRUE(t->publish(Message{"forbidden.deploy", "", {}, "x"}));
  ASSERT_TRUE(t->flush(2s));
  EXPECT_TRUE(eventually(
      [&] {
        return logger_.contains({"transport=nats event=error", "subject=forbidden.deploy",
                                 "Permissions Violation"},
                                sdk::LogLevel::Error);
      },
      5000))
      << logger_.dump();

  // A refused subscription is detected with a round trip.
  auto sub = t->subscribe("secret.keys", "", [](Message&&) {});
  ASSERT_FALSE(sub);
  EXPECT_EQ(sub.error().code, ErrorCode::PermissionDenied) << describe(sub.error());
  EXPECT_NE(sub.error().message.find("secret.keys"), std::string::npos);
  EXPECT_TRUE(eventually(
      [&] { return logger_.contains({"subject=secret.keys", "Permissions Violation"}); }, 5000))
      << logger_.dump();

  // The connection stays usable.
  Inbox inbox;
  auto allowed = t->subscribe("public.news", "", inbox.handler());
  ASSERT_TRUE(allowed) << describe(allowed.error());
  ASSERT_TRUE(t->publish(Message{"public.news", "", {}, "ok"}));
  ASSERT_TRUE(inbox.wait_for(1));
  EXPECT_TRUE(t->connected());
}

}  // namespace
}  // namespace mesh::transports::nats::test
