// Issue 5 against real processes: nats-server, mesh-control, mesh-host and mesh. Each test shows
// a refusal AND that nothing was applied or recorded because of the refused message.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <optional>
#include <future>
#include <mutex>
#include <regex>
#include <thread>

#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/loader/loader.h"
#include "mesh/sdk/transport.h"
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using namespace std::chrono_literals;
using mesh::testing::eventually;
using TrustTest = MeshTest;

/// A raw broker client, as an attacker on the broker (or a curious host) would use it.
class Raw : public BrokerClient {
 public:
  explicit Raw(const std::string& url) : BrokerClient(url) {
    if (!connected) throw std::runtime_error(connected.error().message);
  }
  void publish(const sdk::Message& m) {
    ASSERT_TRUE(t->publish(m));
    (void)t->flush(2s);
  }
};

std::string error_code(const sdk::Message& reply) {
  auto v = common::parse_json(reply.body);
  return v && v->find("error") ? v->find("error")->get_string("code") : "";
}

sdk::Value node_json(MeshTest& t, const std::string& node) {
  auto r = t.mesh({"node", "show", node, "--output", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json(r.out);
}

/// `mesh operator add NAME --role ROLE`, saved to a 0600 file.
std::string add_operator(MeshTest& t, const std::string& name, const std::string& role) {
  auto r = t.mesh({"operator", "add", name, "--role", role});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const fs::path p = t.dir() / (name + ".identity");
  write_text(p, r.out);
  ::chmod(p.c_str(), 0600);
  return p.string();
}

std::string secret_key_of(const Host& h) {
  std::string hex = read_text(h.state / "node.key");
  while (!hex.empty() && hex.back() == '\n') hex.pop_back();
  return *common::from_hex(hex);
}

TEST_F(TrustTest, OperatorRequestsThatAreUnsignedReplayedOrOfTheWrongRoleAreRefused) {
  Host& h = add_host("op-01");
  (void)h;
  const std::string decl = (dir() / "decl.json").string();
  write_text(decl, file_declaration({{(dir() / "x.txt").string(), "x\n"}}));

  // No identity at all: mesh refuses before sending anything.
  auto none = mesh_as("", {"declare", "op-01", decl});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no operator identity: use --identity FILE or the NOX_MESH_IDENTITY"), std::string::npos)
      << none.err;

  // An unsigned request sent by hand: permission_denied, nothing declared.
  Raw raw(nats_->url());
  sdk::Value params = sdk::Value::object();
  params.set("node", "op-01");
  params.set("declaration", read_text(decl));
  auto unsigned_reply = raw->request(protocol::make_message(protocol::api_subject("declare"), params.to_json()), 5s);
  ASSERT_TRUE(unsigned_reply);
  EXPECT_EQ(error_code(*unsigned_reply), "permission_denied") << unsigned_reply->body;
  EXPECT_NE(unsigned_reply->body.find("unsigned request"), std::string::npos) << unsigned_reply->body;
  EXPECT_EQ(mesh({"history", "op-01", "--output", "json"}).out, "[]\n") << "nothing was declared";

  // Wrong role: a reader may look, not declare, and is told which role it needs.
  const std::string reader = add_operator(*this, "viewer", "reader");
  auto refused = mesh_as(reader, {"declare", "op-01", decl});
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("operator viewer (role reader) may not run declare: it needs role deployer"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(mesh({"history", "op-01", "--output", "json"}).out, "[]\n") << "nothing was declared";
  EXPECT_EQ(mesh_as(reader, {"nodes"}).exit_code, 0) << "a reader may list nodes";
  const std::string deployer = add_operator(*this, "ci", "deployer");
  auto tokens = mesh_as(deployer, {"token", "list"});
  EXPECT_EQ(tokens.exit_code, 2);
  EXPECT_NE(tokens.err.find("it needs role admin"), std::string::npos) << tokens.err;
  EXPECT_EQ(mesh_as(deployer, {"token", "issue", "op-02"}).exit_code, 2);
  EXPECT_EQ(mesh_as(deployer, {"operator", "add", "eve", "--role", "admin"}).exit_code, 2);
  auto ops = mesh({"operator", "list", "--output", "json"});
  ASSERT_EQ(ops.exit_code, 0) << ops.err;
  EXPECT_EQ(json(ops.out).as_array().size(), 3u) << ops.out << "eve was not added";
  EXPECT_EQ(ops.out.find("secret"), std::string::npos) << "secrets are never stored or listed";

  // Replay: a deployer's signed declare, captured on the broker and sent again.
  raw.capture("mesh.api.declare");
  auto first = mesh_as(deployer, {"declare", "op-01", decl, "--output", "json"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_TRUE(eventually([&] { return raw.captured().size() == 1; }, 3000));
  sdk::Message replay = raw.captured()[0];
  replay.reply.clear();
  auto again = raw->request(replay, 5s);
  ASSERT_TRUE(again);
  // A declare is idempotent on its nonce (protocol.md "Nonces"): the replay gets the first
  // answer, and writes nothing.
  EXPECT_EQ(*again->header(protocol::kHeaderStatus), "ok") << again->body;
  EXPECT_EQ(json(again->body).get_int("delivery", 0), json(first.out).get_int("delivery", -1)) << again->body;
  auto history = json(mesh({"history", "op-01", "--output", "json"}).out);
  EXPECT_EQ(history.as_array().size(), 1u) << "the replay declared nothing: " << history.to_json();

  // A removed operator's identity stops working at once.
  EXPECT_EQ(mesh({"operator", "remove", "ci"}).exit_code, 0);
  auto gone = mesh_as(deployer, {"nodes"});
  EXPECT_EQ(gone.exit_code, 2);
  EXPECT_NE(gone.err.find("unknown operator 'ci'"), std::string::npos) << gone.err;
  auto last_admin = mesh({"operator", "remove", "admin"});
  EXPECT_EQ(last_admin.exit_code, 1) << last_admin.err;
  EXPECT_NE(last_admin.err.find("last admin"), std::string::npos) << last_admin.err;

  // The admin identity mesh-control wrote is private.
  struct stat st {};
  ASSERT_EQ(::stat(admin_identity().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir() / "control" / "control.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(TrustTest, ATokenWorksOnceEvenWhenUsedTwiceAtOnceAndExpires) {
  Host& h = add_host("tok-01");
  // The same token again (the fixture's enrol used it): refused, and the node keeps its key.
  const std::string key_before = read_text(h.state / "identity.json");
  Raw wire(nats_->url());
  wire.capture("_INBOX.>");
  auto tok = mesh({"token", "issue", "tok-02", "--output", "json"});
  ASSERT_EQ(tok.exit_code, 0);
  const std::string token = json(tok.out).get_string("token");
  ASSERT_TRUE(eventually([&] { return !wire.captured().empty(); }, 3000));
  for (const auto& m : wire.captured())
    EXPECT_EQ(m.body.find(token.substr(0, token.rfind('.'))), std::string::npos)
        << "the token crossed the broker readable: " << m.body;
  const std::string id = json(tok.out).get_string("id");
  auto list = mesh({"token", "list", "--output", "json"});
  EXPECT_NE(list.out.find(id), std::string::npos);
  EXPECT_EQ(list.out.find(token), std::string::npos) << "never the secret";

  // Two hosts (two state directories) race with one token for the same name: exactly one wins.
  auto config = [&](const std::string& tag) {
    const fs::path cfg = dir() / ("tok-02-" + tag + ".toml");
    write_text(cfg, "[node]\nname = \"tok-02\"\nstate_dir = \"" + (dir() / ("state-" + tag)).string() +
                        "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\nload = [\"file\"]\n\n[transport]\n"
                        "servers = [\"" + nats_->url() + "\"]\n");
    return cfg.string();
  };
  const std::string a = config("a"), b = config("b");
  auto run_a = std::async(std::launch::async, [&] {
    return mesh::testing::run_process({bin("mesh-host"), "enrol", "--config", a, "--token", token});
  });
  auto run_b = mesh::testing::run_process({bin("mesh-host"), "enrol", "--config", b, "--token", token});
  auto ra = run_a.get();
  EXPECT_EQ((ra.exit_code == 0) + (run_b.exit_code == 0), 1) << ra.err << run_b.err;
  const auto& loser = ra.exit_code == 0 ? run_b : ra;
  EXPECT_EQ(loser.exit_code, 2) << "a used token is refused credentials";
  EXPECT_NE(loser.err.find("enrolment refused"), std::string::npos) << loser.err;
  EXPECT_FALSE(fs::exists(dir() / (ra.exit_code == 0 ? "state-b" : "state-a") / "identity.json"))
      << "the loser saved nothing";
  auto show = node_json(*this, "tok-02");
  EXPECT_EQ(show.get_int("generation", 0), 1);
  // And once more, after the race: used.
  auto third = mesh::testing::run_process({bin("mesh-host"), "enrol", "--config", a, "--token", token});
  EXPECT_EQ(third.exit_code, 2);
  EXPECT_NE(third.err.find("used"), std::string::npos) << third.err;
  EXPECT_EQ(node_json(*this, "tok-02").get_int("generation", 0), 1) << "nothing changed";
  EXPECT_EQ(read_text(h.state / "identity.json"), key_before);

  // An expired token.
  auto brief = mesh({"token", "issue", "tok-03", "--ttl", "1s", "--output", "json"});
  ASSERT_EQ(brief.exit_code, 0) << brief.err;
  std::this_thread::sleep_for(1500ms);
  const fs::path c3 = dir() / "tok-03.toml";
  write_text(c3, "[node]\nname = \"tok-03\"\nstate_dir = \"" + (dir() / "state-3").string() +
                     "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\nload = [\"file\"]\n\n[transport]\n"
                     "servers = [\"" + nats_->url() + "\"]\n");
  auto late = mesh::testing::run_process(
      {bin("mesh-host"), "enrol", "--config", c3.string(), "--token", json(brief.out).get_string("token")});
  EXPECT_EQ(late.exit_code, 2);
  EXPECT_NE(late.err.find("expired"), std::string::npos) << late.err;
  EXPECT_EQ(mesh({"node", "show", "tok-03"}).exit_code, 2) << "the node was not enrolled";
  EXPECT_FALSE(fs::exists(dir() / "state-3" / "identity.json"));

  // A token whose control key part was swapped (a look-alike control plane's): the host seals the
  // token to that key, the real control plane cannot open it, nothing is enrolled or saved. Its
  // refusal is signed with its own key, not the one the token names, so the host cannot tell it
  // from a forgery: no verified answer (exit 3), and it says which key it wanted.
  auto t5 = json(mesh({"token", "issue", "tok-05", "--output", "json"}).out).get_string("token");
  const std::string swapped =
      t5.substr(0, t5.rfind('.') + 1) + common::base64url_encode(common::generate_keypair().public_key);
  const fs::path c5 = dir() / "tok-05.toml";
  write_text(c5, "[node]\nname = \"tok-05\"\nstate_dir = \"" + (dir() / "state-5").string() +
                     "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\nload = [\"file\"]\n\n[transport]\n"
                     "servers = [\"" + nats_->url() + "\"]\n");
  auto other_key = mesh::testing::run_process({bin("mesh-host"), "enrol", "--config", c5.string(), "--token", swapped});
  EXPECT_EQ(other_key.exit_code, 3) << other_key.out << other_key.err;
  EXPECT_NE(other_key.err.find("the token is from another control plane"), std::string::npos) << other_key.err;
  EXPECT_FALSE(fs::exists(dir() / "state-5" / "identity.json"));
  EXPECT_EQ(mesh({"node", "show", "tok-05"}).exit_code, 2);
  EXPECT_EQ(control_->stderr_text().find(t5.substr(0, t5.rfind('.'))), std::string::npos) << "tokens are never logged";

  // Revoke is admin-only and works.
  auto t4 = json(mesh({"token", "issue", "tok-04", "--output", "json"}).out);
  const std::string reader = add_operator(*this, "viewer", "reader");
  EXPECT_EQ(mesh_as(reader, {"token", "revoke", t4.get_string("id")}).exit_code, 2);
  EXPECT_NE(mesh({"token", "list"}).out.find(t4.get_string("id")), std::string::npos) << "still outstanding";
  EXPECT_EQ(mesh({"token", "revoke", t4.get_string("id")}).exit_code, 0);
  EXPECT_EQ(mesh({"token", "list"}).out.find(t4.get_string("id")), std::string::npos);
}

TEST_F(TrustTest, AReenrolledNodesOldHeartbeatsAndReportsNoLongerCount) {
  Host& h = add_host("re-01", "1s");
  Raw raw(nats_->url());
  raw.capture(protocol::heartbeat_subject("re-01"));
  start_host(h);
  ASSERT_TRUE(eventually([&] { return raw.captured().size() >= 2; }, 10000));
  const sdk::Message old_heartbeat = raw.captured().back();
  const std::string old_key = secret_key_of(h);
  EXPECT_TRUE(old_heartbeat.header(trust::kHeaderMac)) << "heartbeats carry a MAC";
  ASSERT_EQ(h.proc->stop(SIGTERM, 3000), 0);

  enrol(h, /*reenrol=*/true);
  EXPECT_EQ(node_json(*this, "re-01").get_int("generation", 0), 2);
  std::this_thread::sleep_for(600ms);  // the old host's last heartbeat may still be in a flush batch
  sdk::Value before;
  ASSERT_TRUE(eventually([&] {
    before = node_json(*this, "re-01");
    return before.find("last_contact")->is_string();
  }, 5000));
  std::this_thread::sleep_for(1500ms);  // so that a counted heartbeat would move last contact
  for (int i = 0; i < 3; ++i) raw.publish(old_heartbeat);
  EXPECT_TRUE(control_->wait_for_output("heartbeat MAC does not verify with the node's current key", 5000))
      << control_->stderr_text();
  std::this_thread::sleep_for(600ms);  // past a heartbeat flush
  EXPECT_EQ(node_json(*this, "re-01").get_string("last_contact"), before.get_string("last_contact"))
      << "the old identity's heartbeat did not count as contact";

  // A report signed with the old key: refused, not recorded.
  sdk::Value report = sdk::Value::object();
  report.set("node", "re-01");
  report.set("revision", 7);
  report.set("at", "2026-11-29T07:00:01Z");
  report.set("outcome", "applied");
  report.set("owned", sdk::Value::array());
  auto m = protocol::make_message(protocol::report_subject("re-01"), report.to_json());
  trust::sign_report(m, old_key);
  auto reply = raw->request(m, 5s);
  ASSERT_TRUE(reply);
  EXPECT_EQ(error_code(*reply), "permission_denied") << reply->body;
  auto after = node_json(*this, "re-01");
  EXPECT_EQ(after.find("applies")->as_array().size(), 0u) << after.to_json();
  EXPECT_EQ(after.get_int("applied_revision", -1), 0);

  // The new identity's heartbeats do count.
  start_host(h);
  ASSERT_TRUE(eventually([&] {
    return node_json(*this, "re-01").get_string("last_contact") != before.get_string("last_contact");
  }, 10000));
}

TEST_F(TrustTest, ADeclarationReplayedOrAlteredOrMisaddressedIsRefusedAndNothingIsApplied) {
  Host& h = add_host("decl-01");
  Host& other = add_host("decl-02");
  start_host(h);
  start_host(other);
  Raw raw(nats_->url());
  raw.capture(protocol::decl_subject("decl-01"));
  const auto f = (dir() / "managed.txt").string();
  auto d1 = declare("decl-01", file_declaration({{f, "one\n"}}));
  ASSERT_EQ(count(report(d1.get_int("delivery", 0), "20s"), "applied"), 1u);
  auto d2 = declare("decl-01", file_declaration({{f, "two\n"}}));
  ASSERT_EQ(count(report(d2.get_int("delivery", 0), "20s"), "applied"), 1u);
  ASSERT_TRUE(eventually([&] { return raw.captured().size() == 2; }, 3000));
  const sdk::Message rev1 = raw.captured()[0];
  ASSERT_TRUE(rev1.header(trust::kHeaderSignature)) << "pushed declarations are signed";

  // 1. Replay of the captured revision 1 after revision 2 was applied.
  raw.publish(rev1);
  ASSERT_TRUE(h.proc->wait_for_output("older than the applied revision 2", 5000)) << h.proc->stderr_text();
  EXPECT_EQ(read_text(f), "two\n");

  // 2. One byte changed, presented as a newer revision (3): it would be applied if believed.
  sdk::Message altered = rev1;
  const auto pos = altered.body.find("\"one\\n\"");
  ASSERT_NE(pos, std::string::npos) << altered.body;
  altered.body[pos + 3] = 'f';  // "onf\n"
  altered.body.replace(altered.body.find("\"revision\":1"), 12, "\"revision\":3");
  altered.set_header(protocol::kHeaderRevision, "3");
  raw.publish(altered);
  ASSERT_TRUE(h.proc->wait_for_output("declaration signature does not verify", 5000)) << h.proc->stderr_text();
  // 3. The same without any signature.
  sdk::Message bare = altered;
  bare.headers.erase(std::remove_if(bare.headers.begin(), bare.headers.end(),
                                    [](const auto& kv) { return kv.first == trust::kHeaderSignature; }),
                     bare.headers.end());
  raw.publish(bare);
  ASSERT_TRUE(h.proc->wait_for_output("unsigned declaration", 5000)) << h.proc->stderr_text();
  // 4. decl-01's genuine revision 1, re-published on decl-02's subject.
  sdk::Message misaddressed = rev1;
  misaddressed.subject = protocol::decl_subject("decl-02");
  raw.publish(misaddressed);
  ASSERT_TRUE(other.proc->wait_for_output("misaddressed", 5000)) << other.proc->stderr_text();

  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(read_text(f), "two\n") << "nothing was applied";
  EXPECT_TRUE(control_->wait_for_output("refused a declaration message it was sent", 5000));
  auto show = node_json(*this, "decl-01");
  EXPECT_EQ(show.get_int("applied_revision", 0), 2);
  EXPECT_EQ(show.get_string("last_outcome"), "applied");
  for (const auto& a : show.find("applies")->as_array())
    EXPECT_EQ(a.get_string("outcome"), "applied") << "no refusal was recorded as the node's report: " << show.to_json();
  EXPECT_EQ(node_json(*this, "decl-02").find("applies")->as_array().size(), 0u);
  // The forged "revision 3" did not take the real revision 3's place.
  auto d3 = declare("decl-01", file_declaration({{f, "three\n"}}));
  EXPECT_EQ(d3.get_int("revision", 0), 3);
  auto rep = report(d3.get_int("delivery", 0), "20s");
  EXPECT_EQ(count(rep, "applied"), 1u) << rep.to_json();
  EXPECT_EQ(read_text(f), "three\n");
}

TEST_F(TrustTest, AReportClaimingAnotherNodeIsDropped) {
  Host& a = add_host("rep-a");
  add_host("rep-b");
  Raw raw(nats_->url());
  sdk::Value report = sdk::Value::object();
  report.set("node", "rep-b");
  report.set("revision", 1);
  report.set("at", "2026-11-29T07:00:01Z");
  report.set("outcome", "failed");
  report.set("resource", "file:/etc/x");
  report.set("reason", "forged");
  report.set("owned", sdk::Value::array());
  // rep-a's key, rep-b's subject and body.
  auto m = protocol::make_message(protocol::report_subject("rep-b"), report.to_json());
  trust::sign_report(m, secret_key_of(a));
  auto r1 = raw->request(m, 5s);
  ASSERT_TRUE(r1);
  EXPECT_EQ(error_code(*r1), "permission_denied") << r1->body;
  // rep-a's key and subject, claiming rep-b in the body.
  auto m2 = protocol::make_message(protocol::report_subject("rep-a"), report.to_json());
  trust::sign_report(m2, secret_key_of(a));
  auto r2 = raw->request(m2, 5s);
  ASSERT_TRUE(r2);
  EXPECT_EQ(error_code(*r2), "invalid_argument") << r2->body;
  EXPECT_NE(r2->body.find("body names node 'rep-b'"), std::string::npos) << r2->body;
  // Unsigned.
  auto r3 = raw->request(protocol::make_message(protocol::report_subject("rep-b"), report.to_json()), 5s);
  ASSERT_TRUE(r3);
  EXPECT_EQ(error_code(*r3), "permission_denied") << r3->body;
  for (const char* n : {"rep-a", "rep-b"}) {
    auto show = node_json(*this, n);
    EXPECT_EQ(show.find("applies")->as_array().size(), 0u) << show.to_json();
    // Its last contact is its latest briefing's receipt — none for the briefing of its enrolment
    // (decision record 195) — nothing later.
    const sdk::Value* b = show.find("briefing");
    if (b && b->is_object() && !b->get_bool("enrolment", false))
      EXPECT_EQ(show.get_string("last_contact"), b->get_string("at")) << "an unverified report is not contact";
    else
      EXPECT_TRUE(show.find("last_contact")->is_null()) << "an unverified report is not contact";
  }
}

TEST_F(TrustTest, AnIneligibleNodeIsShownWarnedAboutAndClearedByABriefing) {
  Host& h = hosts_["brief-01"];
  h.name = "brief-01";
  h.state = dir() / "host-brief-01";
  h.config = dir() / "brief-01.toml";
  auto write_config = [&](const std::string& min_free_mib) {
    write_text(h.config, "[node]\nname = \"brief-01\"\nstate_dir = \"" + h.state.string() +
                             "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\nload = [\"file\"]\n\n[transport]\n"
                             "servers = [\"" + nats_->url() + "\"]\n\n[timers]\nheartbeat = \"1s\"\n\n"
                             "[briefing]\nmin_free_mib = " + min_free_mib + "\n");
  };
  write_config("999999999999");  // no disk is that large: the disk line fails
  auto tok = mesh({"token", "issue", "brief-01", "--output", "json"});
  ASSERT_EQ(tok.exit_code, 0);
  auto en = mesh::testing::run_process(
      {bin("mesh-host"), "enrol", "--config", h.config.string(), "--token", json(tok.out).get_string("token")});
  EXPECT_EQ(en.exit_code, 0) << "enrolment always completes: " << en.out << en.err;
  EXPECT_NE(en.out.find("briefing brief-01: fail"), std::string::npos) << en.out;
  EXPECT_NE(en.out.find("fail   disk:"), std::string::npos) << en.out;
  EXPECT_NE(en.out.find("pass   clock:"), std::string::npos) << en.out;
  EXPECT_NE(en.out.find("pass   plugin:file"), std::string::npos) << en.out;
  EXPECT_NE(en.out.find("info   os:"), std::string::npos) << en.out;
  EXPECT_NE(en.out.find("info   service_manager:"), std::string::npos) << en.out;
  EXPECT_NE(en.out.find("info   container_engine:"), std::string::npos) << en.out;
  EXPECT_NE(en.out.find("eligible: no"), std::string::npos) << en.out;

  auto nodes = json(mesh({"nodes", "--output", "json"}).out);
  ASSERT_EQ(nodes.as_array().size(), 1u);
  EXPECT_FALSE(nodes.as_array()[0].get_bool("eligible", true));
  EXPECT_NE(mesh({"nodes"}).out.find("no"), std::string::npos);
  auto show = node_json(*this, "brief-01");
  ASSERT_TRUE(show.find("briefing")->is_object()) << show.to_json();
  EXPECT_EQ(show.find("briefing")->get_string("outcome"), "fail");
  auto show_text = mesh({"node", "show", "brief-01"});
  EXPECT_NE(show_text.out.find("fail   disk"), std::string::npos) << show_text.out;

  // Declaring still works, with a warning naming the failed line.
  start_host(h);
  const auto f = (dir() / "b.txt").string();
  write_text(dir() / "b.json", file_declaration({{f, "b\n"}}));
  auto d = mesh({"declare", "brief-01", (dir() / "b.json").string()});
  EXPECT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(d.err.find("warning: node brief-01 is not eligible for assignment"), std::string::npos) << d.err;
  EXPECT_NE(d.err.find("disk:"), std::string::npos) << d.err;

  // Fixed; a new briefing clears it.
  write_config("0");
  auto b = mesh::testing::run_process({bin("mesh-host"), "brief", "--config", h.config.string()});
  EXPECT_EQ(b.exit_code, 0) << b.out << b.err;
  EXPECT_NE(b.out.find("briefing brief-01: pass"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("eligible: yes"), std::string::npos) << b.out;
  nodes = json(mesh({"nodes", "--output", "json"}).out);
  EXPECT_TRUE(nodes.as_array()[0].get_bool("eligible", false));
  auto d2 = mesh({"declare", "brief-01", (dir() / "b.json").string()});
  EXPECT_EQ(d2.exit_code, 0);
  EXPECT_EQ(d2.err.find("warning"), std::string::npos) << d2.err;
}

std::vector<std::string> outbox_files(const Host& h) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(h.state / "outbox", ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(TrustTest, AForgedOrReplayedReportAckLeavesTheReportInTheOutbox) {
  Host& h = add_host("ack-01", "1s", "1s");  // a drift scan (and its report) every second
  Raw wire(nats_->url());
  wire.capture("_INBOX.>");  // what an attacker on an open broker sees: the control plane's acks
  start_host(h);
  const std::string f = (dir() / "ack.txt").string();
  auto d = declare("ack-01", file_declaration({{f, "ack\n"}}));
  ASSERT_EQ(count(report(d.get_int("delivery", 0), "20s"), "applied"), 1u) << h.proc->stderr_text();
  // A genuine ack, signed by the control plane for one report.
  std::optional<sdk::Message> genuine;
  ASSERT_TRUE(eventually([&] {
    for (const auto& m : wire.captured())
      if (m.header(trust::kHeaderSignature) && m.body.find("\"recorded\"") != std::string::npos) genuine = m;
    return genuine.has_value();
  }, 10000));

  // The control plane goes away; the attacker answers every report of ack-01, alternately with an
  // unsigned ack and with the genuine ack of another report replayed.
  std::atomic<int> answered{0};
  auto forge = [&](sdk::Message&& m) {
    if (m.reply.empty()) return;
    sdk::Message r;
    if (answered++ % 2 == 0) {
      r = protocol::make_message(m.reply, "{\"recorded\":true}");
      r.set_header(protocol::kHeaderStatus, "ok");
    } else {
      r = *genuine;
      r.subject = m.reply;
    }
    (void)wire->publish(r);
  };
  control_.reset();
  auto forger_drift = wire->subscribe("mesh.drift.ack-01", "", forge);
  auto forger_report = wire->subscribe("mesh.report.ack-01", "", forge);
  ASSERT_TRUE(forger_drift && forger_report);
  std::vector<std::string> kept;
  ASSERT_TRUE(eventually([&] {
    const std::string log = h.proc->stderr_text();
    kept = outbox_files(h);
    return answered >= 4 && log.find("unsigned acknowledgement") != std::string::npos &&
           log.find("acknowledgement signature does not verify") != std::string::npos && kept.size() >= 2;
  }, 20000)) << "answered=" << answered << "\n" << h.proc->stderr_text();
  EXPECT_NE(h.proc->stderr_text().find("report ack not trusted node=ack-01"), std::string::npos);
  EXPECT_NE(h.proc->stderr_text().find("reply_subject=_INBOX."), std::string::npos) << "logged with the sender's subject";
  const std::string log_before = h.proc->stderr_text();
  for (const auto& k : kept) EXPECT_EQ(k.rfind("drift-", 0), 0u) << k;

  // The control plane is back (and the attacker gone): the kept reports are sent again and
  // acknowledged for real, so they leave the outbox.
  forger_drift->reset();
  forger_report->reset();
  start_control();
  ASSERT_TRUE(eventually([&] {
    auto now = outbox_files(h);
    for (const auto& k : kept)
      if (std::find(now.begin(), now.end(), k) != now.end()) return false;
    return true;
  }, 30000)) << h.proc->stderr_text();
  auto show = node_json(*this, "ack-01");
  EXPECT_FALSE(show.find("last_scan_at")->is_null()) << show.to_json();
}

TEST_F(TrustTest, AHostWhoseClockIsOffStillFetchesItsLatestDeclaration) {
  Host& h = add_host("skew-01");
  // Declared while the host is down: it must fetch mesh.latest.skew-01 when it starts.
  const std::string f = (dir() / "skew.txt").string();
  auto d = declare("skew-01", file_declaration({{f, "skew\n"}}));
  Raw wire(nats_->url());
  wire.capture("mesh.latest.skew-01");
  // Five minutes behind the control plane (the tolerance is 60 s).
  start_host(h, {"NOX_MESH_CLOCK_OFFSET_MS_FOR_TEST=-300000"});
  auto rep = report(d.get_int("delivery", 0), "30s");
  ASSERT_EQ(count(rep, "applied"), 1u) << rep.to_json() << h.proc->stderr_text();
  EXPECT_EQ(read_text(f), "skew\n");
  ASSERT_TRUE(eventually([&] {
    const std::string log = h.proc->stderr_text();
    return log.find("clock offset node=skew-01 offset_ms=") != std::string::npos &&
           log.find("ms behind the control plane's") != std::string::npos;
  }, 5000)) << h.proc->stderr_text();
  {
    const std::string log = h.proc->stderr_text();
    const auto at = log.find("clock offset node=skew-01 offset_ms=") + 36;
    const long long offset = std::atoll(log.c_str() + at);
    EXPECT_NEAR(offset, 300000, 5000) << log.substr(at - 36, 200);
  }
  ASSERT_TRUE(eventually([&] { return control_->stderr_text().find("request expired") != std::string::npos; }, 5000));
  // Its heartbeats count although its clock is off (they are stamped with the corrected clock).
  ASSERT_TRUE(eventually([&] { return !node_json(*this, "skew-01").get_string("state").empty(); }, 10000));

  // Replays are still refused: the accepted (corrected) request, sent again, and the first one
  // (expired: its refusal carries the control plane's time again, for that request only).
  std::vector<sdk::Message> seen;
  ASSERT_TRUE(eventually([&] { return (seen = wire.captured()).size() >= 2; }, 5000));
  sdk::Message accepted = seen[1];
  accepted.reply.clear();
  auto again = wire->request(accepted, 5s);
  ASSERT_TRUE(again);
  EXPECT_EQ(error_code(*again), "permission_denied") << again->body;
  EXPECT_NE(again->body.find("replayed"), std::string::npos) << again->body;
  sdk::Message first = seen[0];
  first.reply.clear();
  auto expired = wire->request(first, 5s);
  ASSERT_TRUE(expired);
  EXPECT_NE(expired->body.find("expired"), std::string::npos) << expired->body;
  const auto pinned = *common::from_hex(json(read_text(h.state / "identity.json")).get_string("control_key"));
  auto t = trust::verify_time(*expired, first, pinned);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_LE(std::llabs(*t - common::now_ms()), 5000) << "the control plane's clock";
  EXPECT_FALSE(trust::verify_time(*expired, accepted, pinned)) << "bound to the request it answers";
}

/// The control plane's signing secret (what only mesh-control holds), to answer as it would.
std::string control_secret_key(MeshTest& t) {
  std::string hex = read_text(t.dir() / "control" / "control.key");
  while (!hex.empty() && hex.back() == '\n') hex.pop_back();
  return common::keypair_from_seed(*common::from_hex(hex)).secret_key;
}

sdk::Message none_reply(const sdk::Message& request, const std::string& node) {
  auto r = protocol::make_message(request.reply);
  r.set_header(protocol::kHeaderStatus, "none");
  r.set_header(protocol::kHeaderNode, node);
  return r;
}

TEST_F(TrustTest, ForgedOrReplayedLatestAndRecoveryRepliesAreNotBelievedAndRemoveNothing) {
  Host& h = add_host("rec-01");  // enrolled, no local state: it asks for its recovery copy
  const std::string victim = (dir() / "unmanaged.txt").string();
  write_text(victim, "precious\n");
  const std::string secret = control_secret_key(*this);

  // The control plane is gone; the attacker answers mesh.latest.rec-01: first with an unsigned
  // `none`, then with a genuinely signed `none` made for the first request (replayed), and only
  // once the test allows it with a `none` signed for the very request (as mesh-control would),
  // which lets the host go on to ask for its recovery copy.
  control_.reset();
  Raw wire(nats_->url());
  std::mutex mu;
  std::optional<sdk::Message> first_request;
  std::atomic<int> latest_answers{0}, recovery_answers{0};
  std::atomic<bool> honest{false};
  auto latest = wire->subscribe("mesh.latest.rec-01", "", [&](sdk::Message&& m) {
    if (m.reply.empty()) return;
    sdk::Message r = none_reply(m, "rec-01");
    std::lock_guard lock(mu);
    if (!first_request) {
      first_request = m;  // answered unsigned
    } else if (!honest) {
      trust::sign_reply(r, *first_request, secret);  // genuine, but for another request
    } else {
      trust::sign_reply(r, m, secret);
    }
    (void)wire->publish(r);
    ++latest_answers;
  });
  // Every recovery request gets an unsigned copy naming a file the host never managed.
  auto recovery = wire->subscribe("mesh.recovery.rec-01", "", [&](sdk::Message&& m) {
    if (m.reply.empty()) return;
    auto r = protocol::make_message(m.reply, "{\"owned\":[\"file:" + victim + "\"],\"revision\":1}");
    r.set_header(protocol::kHeaderStatus, "ok");
    (void)wire->publish(r);
    ++recovery_answers;
  });
  ASSERT_TRUE(latest && recovery);
  (void)wire->flush(2s);
  start_host(h);

  ASSERT_TRUE(eventually([&] {
    const std::string log = h.proc->stderr_text();
    return latest_answers >= 2 && log.find("unsigned reply: no Mesh-Reply-Signature") != std::string::npos &&
           log.find("reply signature does not verify") != std::string::npos;
  }, 20000)) << "latest_answers=" << latest_answers << "\n" << h.proc->stderr_text();
  {
    const std::string log = h.proc->stderr_text();
    EXPECT_NE(log.find("reply not trusted node=rec-01 subject=mesh.latest.rec-01 reply_subject=_INBOX."),
              std::string::npos) << log;
    EXPECT_EQ(log.find("no declaration yet"), std::string::npos) << "a forged `none` is not believed\n" << log;
    EXPECT_EQ(recovery_answers, 0) << "nothing acted on the forged `none`";
  }

  // A `none` signed for its own request is believed; the forged recovery copy that follows is not.
  honest = true;
  ASSERT_TRUE(eventually([&] {
    const std::string log = h.proc->stderr_text();
    return log.find("no declaration yet node=rec-01") != std::string::npos && recovery_answers >= 1 &&
           log.find("reply not trusted node=rec-01 subject=mesh.recovery.rec-01") != std::string::npos;
  }, 20000)) << h.proc->stderr_text();
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(read_text(victim), "precious\n") << "the forged recovery copy removed nothing";
  EXPECT_EQ(h.proc->stderr_text().find("removing orphans"), std::string::npos) << h.proc->stderr_text();
  latest->reset();
  recovery->reset();
}

TEST_F(TrustTest, TheControlPlaneSignsItsRepliesToLatestAndRecoveryForThatRequestOnly) {
  Host& h = add_host("sig-01");
  // Listening before the host starts: its first requests go out as soon as it connects.
  Raw wire(nats_->url());
  wire.capture("mesh.latest.sig-01");
  wire.capture("mesh.recovery.sig-01");
  start_host(h);
  const auto pinned = *common::from_hex(json(read_text(h.state / "identity.json")).get_string("control_key"));
  // The host's own requests (signed by it) get signed replies; replayed by us, the same request
  // is refused as a replay, and that refusal is signed too — for that request only.
  ASSERT_TRUE(eventually([&] { return wire.captured().size() >= 2; }, 20000)) << h.proc->stderr_text();
  EXPECT_NE(h.proc->stderr_text().find("no declaration yet node=sig-01"), std::string::npos) << h.proc->stderr_text();
  EXPECT_EQ(h.proc->stderr_text().find("reply not trusted"), std::string::npos) << h.proc->stderr_text();
  auto seen = wire.captured();
  sdk::Message req = seen[0];
  req.reply.clear();
  auto refused = wire->request(req, 5s);
  ASSERT_TRUE(refused);
  EXPECT_EQ(error_code(*refused), "permission_denied") << refused->body;
  EXPECT_TRUE(trust::verify_reply(*refused, req, pinned)) << "error replies are signed";
  EXPECT_FALSE(trust::verify_reply(*refused, seen[1], pinned)) << "bound to the request it answers";
  // An unsigned request (no nonce) is refused with a signed error that no node request matches.
  auto anon = wire->request(protocol::make_message("mesh.recovery.sig-01"), 5s);
  ASSERT_TRUE(anon);
  EXPECT_EQ(error_code(*anon), "permission_denied") << anon->body;
  EXPECT_NE(anon->header(trust::kHeaderReplySignature), nullptr);
}

TEST_F(TrustTest, TheControlPlaneAnswersOnlyOnTheRequestersOwnInbox) {
  Host& h = add_host("refl-01");
  (void)h;
  Raw wire(nats_->url());
  wire.capture("mesh.decl.>");
  wire.capture("_INBOX.node.>");
  wire.capture("_INBOX.enrol.>");
  wire.capture("_INBOX.control.>");
  auto req = [](const std::string& subject, const std::string& reply) {
    auto m = protocol::make_message(subject, "{}");
    m.reply = reply;
    return m;
  };
  // Each would be answered (with an error) on its reply subject if reply subjects were believed.
  wire.publish(req("mesh.latest.refl-01", "mesh.decl.web-02"));
  wire.publish(req("mesh.api.nodes", "mesh.decl.web-02"));
  wire.publish(req("mesh.enrol", "mesh.decl.web-02"));
  wire.publish(req("mesh.report.refl-01", "mesh.decl.refl-01"));
  wire.publish(req("mesh.latest.refl-01", "_INBOX.node.web-02.x"));  // another node's inbox
  wire.publish(req("mesh.api.nodes", "_INBOX.node.refl-01.x"));      // a node's inbox, for an API reply
  wire.publish(req("mesh.api.nodes", "_INBOX.enrol.x"));
  wire.publish(req("mesh.recovery.refl-01", "_INBOX.node.refl-012.x"));  // a prefix of its name is not its inbox
  // The control plane's own inboxes (its store's replies; decision record 185): never, even on an
  // open broker and for requests that may otherwise be answered anywhere under _INBOX.
  wire.publish(req("mesh.api.nodes", "_INBOX.control.x.1"));
  wire.publish(req("mesh.enrol", "_INBOX.control.x.2"));
  wire.publish(req("mesh.latest.refl-01", "_INBOX.control.x.3"));
  // Allowed: the node's own inbox prefix, and (no broker permissions here) any other inbox.
  wire.publish(req("mesh.latest.refl-01", "_INBOX.node.refl-01.ok"));
  auto answered = wire->request(protocol::make_message("mesh.recovery.refl-01"), 5s);
  ASSERT_TRUE(answered);
  EXPECT_EQ(error_code(*answered), "permission_denied");
  ASSERT_TRUE(eventually([&] { return !wire.captured().empty(); }, 5000));
  std::this_thread::sleep_for(300ms);
  auto seen = wire.captured();
  ASSERT_EQ(seen.size(), 1u) << seen.back().subject;
  EXPECT_EQ(seen[0].subject, "_INBOX.node.refl-01.ok");
  ASSERT_TRUE(eventually([&] {
    return control_->stderr_text().find("reply_subject=mesh.decl.web-02") != std::string::npos;
  }, 5000)) << control_->stderr_text();
  // Logged with the subject and the reply subject (the workers run in parallel: whichever came first).
  EXPECT_TRUE(std::regex_search(control_->stderr_text(),
                                std::regex("dropped subject=mesh\\.[a-z.0-9-]+ reply_subject=(mesh\\.decl|_INBOX)")))
      << control_->stderr_text();
  // Rate-limited, not one line per message: the next warning (a second later) counts the others.
  std::this_thread::sleep_for(1100ms);
  wire.publish(req("mesh.api.nodes", "mesh.decl.last"));
  ASSERT_TRUE(eventually([&] {
    return control_->stderr_text().find("reply_subject=mesh.decl.last") != std::string::npos;
  }, 5000)) << control_->stderr_text();
  const std::string log = control_->stderr_text();
  EXPECT_TRUE(std::regex_search(log, std::regex("reply_subject=mesh\\.decl\\.last: .*\\(10 more dropped since the last warning\\)")))
      << log;
  std::size_t lines = 0;
  for (auto at = log.find(" reply_subject="); at != std::string::npos; at = log.find(" reply_subject=", at + 1)) ++lines;
  EXPECT_EQ(lines, 2u) << "one warning per second, not one per message\n" << log;
}

TEST_F(TrustTest, AHugeNodeNameIsNotEchoedInFullAndAnEnrolmentWithoutAProtocolHeaderIsUnsupported) {
  Raw wire(nats_->url());
  sdk::Value req = sdk::Value::object();
  req.set("node", std::string(900 * 1024, 'a'));
  req.set("token", "x");
  req.set("public_key", std::string(64, '0'));
  auto r = wire->request(protocol::make_message(protocol::kEnrolSubject, req.to_json()), 10s);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(error_code(*r), "invalid_argument") << r->body.substr(0, 300);
  EXPECT_LT(r->body.size(), 1024u) << r->body.substr(0, 300);
  EXPECT_NE(r->body.find("(921600 bytes)"), std::string::npos) << r->body;
  ASSERT_TRUE(eventually([&] { return control_->stderr_text().find("(921600 bytes)") != std::string::npos; }, 5000));
  EXPECT_EQ(control_->stderr_text().find(std::string(1000, 'a')), std::string::npos) << "the log shows a prefix";

  sdk::Message bare;
  bare.subject = protocol::kEnrolSubject;
  bare.body = "{\"node\":\"bare-01\",\"token\":\"x\",\"public_key\":\"" + std::string(64, '0') + "\"}";
  auto unsupported = wire->request(bare, 5s);
  ASSERT_TRUE(unsupported);
  EXPECT_EQ(error_code(*unsupported), "unsupported") << unsupported->body;
  EXPECT_NE(unsupported->body.find("no Mesh-Protocol header"), std::string::npos) << unsupported->body;
}

}  // namespace
}  // namespace mesh::itest
