// Authentication (nkey, user/password) and permission violations against a configured server.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "mesh/testing/nats_server.h"
#include "mesh/testing/temp_dir.h"
#include "mesh/support/nkey_keys.h"
#include "test_support.h"

namespace mesh::transports::nats::test {
namespace {

using mesh::testing::eventually;
using sdk::ErrorCode;
using sdk::Message;

using support::nkey_public_from_seed_text;

/// A 32-byte Ed25519 seed made from `base`.
std::string seed_bytes(std::uint8_t base) {
  std::string raw(32, '\0');
  for (std::size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<char>(base + i * 3);
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
  std::string reload_text_;
};

TEST_F(NatsTransportAuthTest, NkeyServerAcceptsTheRightSeedAndRefusesOthers) {
  const std::string good_seed = support::nkey_user_seed(seed_bytes(1));
  const std::string other_seed = support::nkey_user_seed(seed_bytes(99));
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

/// Rewrites a server's authorization and makes it reload (SIGHUP), as mesh-control does.
void reload(const std::string& conf, const std::string& pid_file, const std::string& users) {
  write_text(conf, "pid_file: \"" + pid_file + "\"\nauthorization {\n  users = [ " + users + " ]\n}\n");
  std::ifstream in(pid_file);
  long pid = 0;
  in >> pid;
  ASSERT_GT(pid, 1);
  ASSERT_EQ(::kill(static_cast<pid_t>(pid), SIGHUP), 0);
}

TEST_F(NatsTransportAuthTest, RefusedCredentialsWithRetryInBackgroundAreRetriedUntilAccepted) {
  const std::string pid_file = (dir_.path() / "nats.pid").string();
  const std::string conf = write("users.conf", "");
  reload_text_ = "{ user: \"node1\", password: \"s3cret\" }";
  write_text(conf, "pid_file: \"" + pid_file + "\"\nauthorization {\n  users = [ " + reload_text_ + " ]\n}\n");
  mesh::testing::NatsServer server({"-c", conf});
  sdk::Value cfg = config_for(server.url());
  cfg.set("user", "node1");
  cfg.set("password_file", write("node1.pw", "later\n"));
  auto t = make(cfg);
  EventRecorder events;
  t->on_link_event(events.handler());
  // The broker refuses the credentials (as while mesh-control rewrites its authorization): not
  // final with retry_in_background. connect() says so and keeps trying, with backoff.
  auto r = t->connect(2s, true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Unavailable) << describe(r.error());
  EXPECT_NE(r.error().message.find("credentials refused"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("Authorization Violation"), std::string::npos) << r.error().message;
  Inbox inbox;
  auto sub = t->subscribe("mesh.later", "", inbox.handler());
  ASSERT_TRUE(sub) << "subscribing is allowed while the transport retries: " << describe(sub.error());
  ASSERT_TRUE(eventually([&] {
    return logger_.contains({"event=credentials_refused", "server=" + server.url(), "attempt=1"});
  }, 8000)) << logger_.dump();
  EXPECT_FALSE(t->connected());
  EXPECT_TRUE(events.events().empty());

  // The server now accepts them: the transport gets in, says Connected, and the subscription
  // made meanwhile works.
  reload(conf, pid_file, "{ user: \"node1\", password: \"later\" }");
  ASSERT_TRUE(eventually([&] { return t->connected(); }, 10000)) << logger_.dump();
  ASSERT_TRUE(eventually([&] { return events.count(sdk::LinkEvent::Connected) == 1; }, 2000));
  auto other = connect([&] {
    sdk::Value c = config_for(server.url());
    c.set("user", "node1");
    c.set("password_file", write("node1b.pw", "later\n"));
    return c;
  }());
  ASSERT_TRUE(other->publish(Message{"mesh.later", "", {}, "hello"}));
  ASSERT_TRUE(inbox.wait_for(1)) << logger_.dump();
  other->close();

  // Established, then refused: the server drops the user at a reload, nats.c reconnects, is
  // refused twice by the same server and closes the connection for good. The transport redials.
  reload(conf, pid_file, "{ user: \"someone-else\", password: \"x\" }");
  ASSERT_TRUE(eventually([&] {
    return logger_.contains({"event=closed_by_client_library", "action=redial"});
  }, 10000)) << logger_.dump();
  EXPECT_FALSE(t->connected());
  EXPECT_EQ(events.count(sdk::LinkEvent::Closed), 0) << "a redial is not the end of the link";
  reload(conf, pid_file, "{ user: \"node1\", password: \"later\" }");
  ASSERT_TRUE(eventually([&] { return t->connected(); }, 20000)) << logger_.dump();
  ASSERT_TRUE(eventually([&] { return events.count(sdk::LinkEvent::Connected) == 2; }, 2000));
  auto third = connect([&] {
    sdk::Value c = config_for(server.url());
    c.set("user", "node1");
    c.set("password_file", write("node1c.pw", "later\n"));
    return c;
  }());
  ASSERT_TRUE(third->publish(Message{"mesh.later", "", {}, "again"}));
  ASSERT_TRUE(inbox.wait_for(2)) << "the subscription was made again on the new connection\n" << logger_.dump();
  third->close();
  sub->reset();
  t->close();
  EXPECT_EQ(events.events().back(), sdk::LinkEvent::Closed);
}

TEST_F(NatsTransportAuthTest, RefusedCredentialsWithoutRetryArePermissionDenied) {
  const std::string conf = write(
      "users.conf",
      "authorization {\n  users = [ { user: \"node1\", password: \"s3cret\" } ]\n}\n");
  mesh::testing::NatsServer server({"-c", conf});
  sdk::Value bad = config_for(server.url());
  bad.set("user", "node1");
  bad.set("password_file", write("bad.pw", "guess\n"));
  auto t = make(bad);
  auto r = t->connect(2s, false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::PermissionDenied) << describe(r.error());
  // Fixed credentials: connect() may be called again on the same object.
  ASSERT_TRUE(t->configure([&] {
    sdk::Value good = config_for(server.url());
    good.set("user", "node1");
    good.set("password_file", write("good.pw", "s3cret"));
    return good;
  }()));
  ASSERT_TRUE(t->connect(2s, true));
  EXPECT_TRUE(t->connected());
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
