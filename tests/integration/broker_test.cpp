// Issue 5 point 6 against a real nats-server with authorization: mesh-control maintains the
// server's authorization file (one nkey per node, publish only under its own name) and reloads the
// server at every enrolment; nodes enrol through a user that may only publish mesh.enrol.
#include <signal.h>

#include <chrono>
#include <thread>

#include "mesh/common/clock.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/loader/loader.h"
#include "mesh/sdk/transport.h"
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using namespace std::chrono_literals;
using mesh::testing::eventually;

/// A broker user with explicit credentials (the [transport] keys of the nats plugin).
using Client = BrokerClient;

class BrokerPermissionsTest : public PermissionedMeshTest {
 public:
  /// A host enrolled through the enrolment user, whose briefing went out under its own nkey.
  Host& enrolled_host(const std::string& name) {
    Host& h = PermissionedMeshTest::enrolled_host(name);
    EXPECT_NE(last_enrol_.out.find("broker credentials in"), std::string::npos) << last_enrol_.out;
    EXPECT_NE(last_enrol_.out.find("briefing " + name + ": pass"), std::string::npos)
        << "the briefing went out under the node's own credentials: " << last_enrol_.out << last_enrol_.err;
    return h;
  }
};

TEST_F(BrokerPermissionsTest, ANodeMayPublishOnlyUnderItsOwnName) {
  // Without credentials, nobody gets in.
  Client anonymous(nats_->url(), {});
  EXPECT_FALSE(anonymous.connected) << "the broker refuses unauthenticated clients";
  // The enrolment user may enrol and nothing else.
  Client enrol_user(nats_->url(), {{"user", "mesh-enrol"}, {"password_file", (dir() / "enrol.pw").string()}});
  ASSERT_TRUE(enrol_user.connected) << enrol_user.connected.error().message;
  auto api = enrol_user.t->request(protocol::make_message(protocol::api_subject("nodes"), "{}"), 2s);
  EXPECT_FALSE(api) << "the enrolment user cannot reach the API";
  // `mesh` without the operators' user: refused by the broker, exit 2, and told what to do.
  auto bare = mesh::testing::run_process({bin("mesh"), "--server", nats_->url(), "--plugin-dir", MESH_TEST_PLUGIN_DIR,
                                          "--identity", admin_identity(), "nodes"},
                                         {}, 30000);
  EXPECT_EQ(bare.exit_code, 2) << bare.err;
  EXPECT_NE(bare.err.find("user = \"mesh-operator\""), std::string::npos) << bare.err;

  Host& a = enrolled_host("node-a");
  enrolled_host("node-b");
  const std::string auth = read_text(dir() / "auth.conf");
  EXPECT_NE(auth.find("\"mesh.heartbeat.node-a\""), std::string::npos) << auth;
  EXPECT_NE(auth.find("\"mesh.decl.node-b\""), std::string::npos) << auth;

  // node-a works under its own nkey: declared, applied, reported, heartbeats counted.
  start_host(a);
  const auto f = (dir() / "a.txt").string();
  write_text(dir() / "a.json", file_declaration({{f, "a\n"}}));
  ASSERT_EQ(op({"declare", "node-a", (dir() / "a.json").string()}).exit_code, 0);
  auto rep = op({"report", "--wait", "20s", "--output", "json"});
  EXPECT_EQ(count(json(rep.out), "applied"), 1u) << rep.out << a.proc->stderr_text();
  EXPECT_EQ(read_text(f), "a\n");

  // node-a's credentials, node-b's subjects: the broker refuses them.
  Client as_a(nats_->url(), {{"nkey_seed", (a.state / "broker.nk").string()}});
  // node-a's public nkey, as the authorization file lists it for node-a.
  const std::string marker = "}  # node node-a generation 1";
  const auto line_end = auth.find(marker);
  ASSERT_NE(line_end, std::string::npos) << auth;
  const auto key_at = auth.rfind("{nkey: \"", line_end) + 8;
  const std::string a_public = auth.substr(key_at, 56);
  ASSERT_TRUE(as_a.connected) << as_a.connected.error().message;
  sdk::Value hb = sdk::Value::object();
  hb.set("node", "node-b");
  hb.set("at", "2026-11-29T07:00:00Z");
  hb.set("applied_revision", 0);
  hb.set("host_version", "0.1.0");
  hb.set("state", "idle");
  (void)as_a.t->publish(protocol::make_message(protocol::heartbeat_subject("node-b"), hb.to_json()));
  (void)as_a.t->flush(2s);
  auto latest = as_a.t->request(protocol::make_message(protocol::latest_subject("node-b")), 2s);
  EXPECT_FALSE(latest) << "node-a cannot ask for node-b's declaration";
  // Nor send a part of a report in node-b's name to an instance's own subject (decision 170).
  const std::string b_part = protocol::instance_subject(std::string(32, '0'), protocol::report_subject("node-b"));
  (void)as_a.t->publish(protocol::make_message(b_part, "{}"));
  (void)as_a.t->flush(2s);
  auto sub = as_a.t->subscribe(protocol::decl_subject("node-b"), "", [](sdk::Message&&) {});
  if (sub) (void)as_a.t->flush(2s);
  ASSERT_TRUE(eventually([&] {
    const std::string log = read_text(nats_->log_path());
    // nats-server: `Publish Violation - Nkey "U…", Subject "…"`.
    return log.find("Publish Violation - Nkey \"" + a_public + "\", Subject \"mesh.heartbeat.node-b\"") != std::string::npos &&
           log.find("Publish Violation - Nkey \"" + a_public + "\", Subject \"mesh.latest.node-b\"") != std::string::npos &&
           log.find("Publish Violation - Nkey \"" + a_public + "\", Subject \"" + b_part + "\"") != std::string::npos &&
           log.find("Subscription Violation - Nkey \"" + a_public + "\", Subject \"mesh.decl.node-b\"") != std::string::npos;
  }, 5000)) << read_text(nats_->log_path());
  auto nodes = json(op({"nodes", "--output", "json"}).out);
  for (const auto& n : nodes.as_array())
    if (n.get_string("name") == "node-b") {
      // Its last contact is its own briefing, if any that counts (not its enrolment's: decision
      // record 195): nothing else reached the control plane as node-b (no heartbeat: no state).
      const sdk::Value show = json(op({"node", "show", "node-b", "--output", "json"}).out);
      const sdk::Value* b = show.find("briefing");
      if (b && b->is_object() && !b->get_bool("enrolment", false))
        EXPECT_EQ(n.get_string("last_contact"), b->get_string("at")) << "nothing reached the control plane as node-b";
      else
        EXPECT_TRUE(n.find("last_contact")->is_null()) << "nothing reached the control plane as node-b";
      EXPECT_EQ(n.get_string("state"), "") << "no heartbeat of node-b counted";
    }

  // Re-enrolling node-a replaces its broker key: the old seed no longer gets in.
  const std::string old_seed = read_text(a.state / "broker.nk");
  write_text(dir() / "old-a.nk", old_seed);
  ASSERT_EQ(a.proc->stop(SIGTERM, 3000), 0);
  auto tok = op({"token", "issue", "node-a", "--reenrol", "--output", "json"});
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  auto en = mesh::testing::run_process(
      {bin("mesh-host"), "enrol", "--config", a.config.string(), "--token", json(tok.out).get_string("token")});
  ASSERT_EQ(en.exit_code, 0) << en.out << en.err;
  EXPECT_NE(read_text(a.state / "broker.nk"), old_seed);
  ASSERT_TRUE(eventually([&] {
    Client old(nats_->url(), {{"nkey_seed", (dir() / "old-a.nk").string()}});
    return !old.connected;
  }, 5000)) << "the old nkey was dropped from the authorization";
}

TEST_F(BrokerPermissionsTest, ContentByDigestReachesANodeUnderItsOwnNkey) {
  // mesh.content.<node> is among a node's subjects, its replies on the node's own inbox prefix.
  Host& a = enrolled_host("node-c");
  EXPECT_NE(read_text(dir() / "auth.conf").find("\"mesh.content.node-c\""), std::string::npos);
  start_host(a);
  std::string bytes;
  for (int i = 0; i < 300000; ++i) bytes += static_cast<char>('a' + i % 23);
  write_text(dir() / "payload.bin", bytes);
  auto pushed = op({"content", "push", (dir() / "payload.bin").string(), "--output", "json"});
  ASSERT_EQ(pushed.exit_code, 0) << pushed.err;
  const std::string digest = json(pushed.out).get_string("digest");
  const auto f = (dir() / "c.bin").string();
  write_text(dir() / "c.json", "{\"resources\":[{\"type\":\"file\",\"id\":\"" + f +
                                   "\",\"properties\":{\"source\":\"" + digest + "\"}}]}");
  ASSERT_EQ(op({"declare", "node-c", (dir() / "c.json").string()}).exit_code, 0);
  auto rep = op({"report", "--wait", "30s", "--output", "json"});
  EXPECT_EQ(count(json(rep.out), "applied"), 1u) << rep.out << a.proc->stderr_text();
  EXPECT_TRUE(read_text(f) == bytes);
}

TEST_F(BrokerPermissionsTest, RepliesAreReadableOnlyByTheNodeTheyAreFor) {
  Host& a = enrolled_host("node-a");
  enrolled_host("node-b");
  const std::string auth = read_text(dir() / "auth.conf");
  EXPECT_NE(auth.find("\"_INBOX.node.node-a.>\""), std::string::npos) << auth;
  EXPECT_EQ(auth.find("\"_INBOX.>\"]}}  # node"), std::string::npos) << "no node reads every inbox: " << auth;

  // node-a works with its own inbox prefix: it fetches its latest declaration and gets its
  // reports acknowledged, all replies on _INBOX.node.node-a.
  start_host(a);
  const auto f = (dir() / "a.txt").string();
  write_text(dir() / "a.json", file_declaration({{f, "a\n"}}));
  ASSERT_EQ(op({"declare", "node-a", (dir() / "a.json").string()}).exit_code, 0);
  auto rep = op({"report", "--wait", "20s", "--output", "json"});
  EXPECT_EQ(count(json(rep.out), "applied"), 1u) << rep.out << a.proc->stderr_text();
  ASSERT_EQ(a.proc->stop(SIGTERM, 3000), 0);
  start_host(a);  // fetches mesh.latest.node-a at start
  ASSERT_TRUE(eventually([&] {
    return a.proc->stderr_text().find("declaration already applied node=node-a revision=1") != std::string::npos;
  }, 15000)) << a.proc->stderr_text();

  // node-a's credentials: every inbox but its own is refused.
  Client as_a(nats_->url(), {{"nkey_seed", (a.state / "broker.nk").string()}, {"inbox_prefix", "_INBOX.node.node-a"}});
  ASSERT_TRUE(as_a.connected) << as_a.connected.error().message;
  for (const char* subject : {"_INBOX.>", "_INBOX.node.node-b.>", "_INBOX.node.>", "_INBOX.abc.*"}) {
    auto sub = as_a.t->subscribe(subject, "", [](sdk::Message&&) {});
    EXPECT_FALSE(sub) << "node-a may not read " << subject;
    if (!sub) {
      EXPECT_EQ(sub.error().code, sdk::ErrorCode::PermissionDenied) << sub.error().message;
    }
  }
  auto own = as_a.t->subscribe("_INBOX.node.node-a.>", "", [](sdk::Message&&) {});
  EXPECT_TRUE(own) << own.error().message;
  // Nor may it answer anyone's request (a forged reply).
  (void)as_a.t->publish(protocol::make_message("_INBOX.node.node-b.x.1", "{}"));
  (void)as_a.t->flush(2s);
  ASSERT_TRUE(eventually([&] {
    return read_text(nats_->log_path()).find("Publish Violation - Nkey") != std::string::npos &&
           read_text(nats_->log_path()).find("Subject \"_INBOX.node.node-b.x.1\"") != std::string::npos;
  }, 5000)) << read_text(nats_->log_path());

  // The enrolment user reads only enrolment replies.
  Client enrol_user(nats_->url(), {{"user", "mesh-enrol"}, {"password_file", (dir() / "enrol.pw").string()},
                                   {"inbox_prefix", "_INBOX.enrol"}});
  ASSERT_TRUE(enrol_user.connected) << enrol_user.connected.error().message;
  for (const char* subject : {"_INBOX.>", "_INBOX.node.node-a.>", "_INBOX.node.>", "_INBOX.*.*"}) {
    auto sub = enrol_user.t->subscribe(subject, "", [](sdk::Message&&) {});
    EXPECT_FALSE(sub) << "the enrolment user may not read " << subject;
  }
  EXPECT_TRUE(enrol_user.t->subscribe("_INBOX.enrol.>", "", [](sdk::Message&&) {}));

  // The operators' user reads its own replies, never a node's or an enrolment's.
  Client operator_user(nats_->url(), {{"user", "mesh-operator"}, {"password_file", (dir() / "operator.pw").string()}});
  ASSERT_TRUE(operator_user.connected) << operator_user.connected.error().message;
  for (const char* subject : {"_INBOX.node.node-a.>", "_INBOX.node.>", "_INBOX.enrol.>", "_INBOX.control.>"}) {
    auto sub = operator_user.t->subscribe(subject, "", [](sdk::Message&&) {});
    EXPECT_FALSE(sub) << "the operators' user may not read " << subject;
  }
  EXPECT_EQ(op({"nodes"}).exit_code, 0) << "mesh still gets its replies";
}

TEST_F(BrokerPermissionsTest, AHostStartedWhileTheBrokerRefusesItConnectsOnceAccepted) {
  Host& a = enrolled_host("node-a");
  const fs::path auth_file = dir() / "auth.conf";
  const std::string auth = read_text(auth_file);
  // The broker does not know node-a yet (as while mesh-control rewrites the file and the server
  // has not reloaded it): node-a's line is left out.
  const std::string marker = "  # node node-a generation 1\n";
  const auto line_end = auth.find(marker);
  ASSERT_NE(line_end, std::string::npos) << auth;
  const auto line_start = auth.rfind("\n", line_end) + 1;
  const std::string without_a = auth.substr(0, line_start) + auth.substr(line_end + marker.size());
  ASSERT_EQ(without_a.find("node node-a"), std::string::npos) << without_a;
  const auto sighup = [&] {
    const long pid = std::stol(read_text(dir() / "nats.pid"));
    ASSERT_EQ(::kill(static_cast<pid_t>(pid), SIGHUP), 0);
  };
  write_text(auth_file, without_a);
  sighup();
  ASSERT_TRUE(eventually([&] {
    Client c(nats_->url(), {{"nkey_seed", (a.state / "broker.nk").string()}});
    return !c.connected;
  }, 5000));

  start_host(a);
  ASSERT_TRUE(eventually([&] {
    const std::string log = a.proc->stderr_text();
    return log.find("event=credentials_refused server=" + nats_->url()) != std::string::npos &&
           log.find("attempt=1") != std::string::npos;
  }, 10000)) << a.proc->stderr_text();
  EXPECT_NE(a.proc->stderr_text().find("Authorization Violation"), std::string::npos) << a.proc->stderr_text();

  // The broker accepts node-a again: the host gets in without a restart, and works.
  write_text(auth_file, auth);
  sighup();
  ASSERT_TRUE(eventually([&] {
    auto nodes = json(op({"nodes", "--output", "json"}).out);
    for (const auto& n : nodes.as_array())
      if (n.get_string("name") == "node-a" && !n.get_string("state").empty()) return true;  // a heartbeat's
    return false;
  }, 40000)) << "a heartbeat of node-a counted\n" << a.proc->stderr_text();
  const auto f = (dir() / "late.txt").string();
  write_text(dir() / "late.json", file_declaration({{f, "late\n"}}));
  ASSERT_EQ(op({"declare", "node-a", (dir() / "late.json").string()}).exit_code, 0);
  auto rep = op({"report", "--wait", "20s", "--output", "json"});
  EXPECT_EQ(count(json(rep.out), "applied"), 1u) << rep.out << a.proc->stderr_text();
  EXPECT_EQ(read_text(f), "late\n");
}

// Issue 11 point 5: refused credentials exit 2 everywhere, with the config and the user named.
TEST_F(BrokerPermissionsTest, EnrolWithoutTheEnrolmentUserExits2NamingTheConfigAndTheUser) {
  const fs::path cfg = dir() / "no-user.toml";
  write_text(cfg, "[node]\nname = \"nouser-01\"\nstate_dir = \"" + (dir() / "host-nouser").string() +
                      "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\nload = [\"file\"]\n\n[transport]\n"
                      "servers = [\"" + nats_->url() + "\"]\n");
  auto tok = op({"token", "issue", "nouser-01", "--output", "json"});
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  auto en = mesh::testing::run_process(
      {bin("mesh-host"), "enrol", "--config", cfg.string(), "--token", json(tok.out).get_string("token")});
  EXPECT_EQ(en.exit_code, 2) << en.err;
  EXPECT_NE(en.err.find(cfg.string()), std::string::npos) << en.err;
  EXPECT_NE(en.err.find("mesh-enrol"), std::string::npos) << en.err;
}

// Issue 11 point 7: an enrolment killed after the identity but before the broker credentials.
TEST_F(BrokerPermissionsTest, RunNamesAnEnrolmentLeftWithoutItsBrokerCredentials) {
  Host& h = enrolled_host("half-01");
  fs::remove(h.state / "broker.nk");
  auto run = mesh::testing::run_process({bin("mesh-host"), "run", "--config", h.config.string()}, {}, 30000);
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("incomplete"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("broker.nk"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("mesh token issue half-01 --reenrol"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("Permissions Violation"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace mesh::itest
