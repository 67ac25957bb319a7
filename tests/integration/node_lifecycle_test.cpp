// Retiring a node (`mesh node remove`, decision record 37) and reports kept through a full store,
// against real nats-server, mesh-control and mesh-host processes.
#include <sys/stat.h>

#include <chrono>
#include <thread>

#include "mesh/common/crypto.h"
#include "mesh/common/protocol.h"
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using namespace std::chrono_literals;
using mesh::testing::eventually;

const sdk::Value* find_node(const sdk::Value& list, const std::string& name) {
  if (!list.is_array()) return nullptr;
  for (const auto& n : list.as_array())
    if (n.get_string("name") == name) return &n;
  return nullptr;
}

std::string last_contact_of(const sdk::Value& list, const std::string& name) {
  const sdk::Value* n = find_node(list, name);
  if (!n) return "(absent)";
  const sdk::Value* c = n->find("last_contact");
  return c && c->is_string() ? c->as_string() : "(null)";
}

using NodeLifecycleTest = MeshTest;

TEST_F(NodeLifecycleTest, ARemovedNodesMessagesAreRefusedItIsListedOnlyWithAllAndANewTokenEnrolsItAgain) {
  Host& a = add_host("node-a", "1s", "1s");
  add_host("node-b");
  start_host(a);
  const std::string f = (dir() / "a.txt").string();
  auto d1 = declare("node-a", file_declaration({{f, "one\n"}}));
  auto r1 = report(d1.get_int("delivery", 0), "30s");
  ASSERT_EQ(count(r1, "applied"), 1u) << r1.to_json();
  ASSERT_TRUE(eventually([&] {
    auto l = mesh({"nodes", "--output", "json"});
    return l.exit_code == 0 && last_contact_of(json(l.out), "node-a") != "(null)";
  }, 15000));

  // Only an admin removes nodes.
  auto reader = mesh({"operator", "add", "auditor", "--role", "reader"});
  ASSERT_EQ(reader.exit_code, 0) << reader.err;
  write_text(dir() / "auditor.identity", reader.out);
  auto denied = mesh_as((dir() / "auditor.identity").string(), {"node", "remove", "node-a"});
  EXPECT_EQ(denied.exit_code, 2) << denied.out << denied.err;
  EXPECT_NE(denied.err.find("role admin"), std::string::npos) << denied.err;

  auto removed = mesh({"node", "remove", "node-a"});
  ASSERT_EQ(removed.exit_code, 0) << removed.out << removed.err;
  EXPECT_NE(removed.out.find("node node-a removed at"), std::string::npos) << removed.out;
  EXPECT_NE(removed.out.find("mesh token issue node-a"), std::string::npos) << removed.out;
  auto twice = mesh({"node", "remove", "node-a"});
  EXPECT_EQ(twice.exit_code, 2) << twice.out << twice.err;
  EXPECT_NE(twice.err.find("already removed"), std::string::npos) << twice.err;

  auto listed = mesh({"nodes", "--output", "json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const sdk::Value enrolled = json(listed.out);
  EXPECT_EQ(find_node(enrolled, "node-a"), nullptr) << listed.out;
  EXPECT_NE(find_node(enrolled, "node-b"), nullptr) << listed.out;
  auto all = mesh({"nodes", "--all", "--output", "json"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const sdk::Value everyone = json(all.out);
  const sdk::Value* gone = find_node(everyone, "node-a");
  ASSERT_NE(gone, nullptr) << all.out;
  EXPECT_TRUE(gone->find("removed_at") && gone->find("removed_at")->is_string()) << all.out;
  ASSERT_NE(find_node(everyone, "node-b"), nullptr) << all.out;
  EXPECT_EQ(find_node(everyone, "node-b")->find("removed_at"), nullptr) << all.out;
  auto all_text = mesh({"nodes", "--all"});
  EXPECT_NE(all_text.out.find("REMOVED"), std::string::npos) << all_text.out;

  // The host still runs with its old key: the control plane records nothing it sends.
  const std::string contact = last_contact_of(everyone, "node-a");
  ASSERT_TRUE(eventually([&] {
    return control_->stderr_text().find("subject=mesh.heartbeat.node-a field=subject: node node-a is not enrolled") !=
           std::string::npos;
  }, 10000)) << control_->stderr_text();
  write_text(f, "changed by hand\n");  // drift: repaired and reported by the host
  ASSERT_TRUE(eventually([&] {
    return control_->stderr_text().find("subject=mesh.drift.node-a field=subject: node node-a is not enrolled") !=
           std::string::npos;
  }, 15000)) << control_->stderr_text() << a.proc->stderr_text();
  std::this_thread::sleep_for(2s);
  all = mesh({"nodes", "--all", "--output", "json"});
  EXPECT_EQ(last_contact_of(json(all.out), "node-a"), contact) << "heartbeats of a removed node are not recorded";
  EXPECT_EQ(mesh({"declare", "node-a", (dir() / "decl-1.json").string()}).exit_code, 2)
      << "nothing can be declared to a removed node";

  // Enrolled again with a new, plain token: a new identity, revisions continuing.
  a.proc.reset();
  fs::remove_all(a.state);
  enrol(a, /*reenrol=*/false);
  start_host(a);
  const std::string g = (dir() / "a2.txt").string();
  auto d2 = declare("node-a", file_declaration({{g, "two\n"}}));
  EXPECT_EQ(d2.get_int("revision", 0), 2) << d2.to_json();
  auto r2 = report(d2.get_int("delivery", 0), "30s");
  EXPECT_EQ(count(r2, "applied"), 1u) << r2.to_json() << a.proc->stderr_text();
  EXPECT_EQ(read_text(g), "two\n");
  auto show = mesh({"node", "show", "node-a", "--output", "json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(json(show.out).get_int("generation", 0), 2) << show.out;
  listed = mesh({"nodes", "--output", "json"});
  const sdk::Value again = json(listed.out);
  EXPECT_NE(find_node(again, "node-a"), nullptr) << listed.out;
}

// An enrolment whose answer is lost (decision record 133): the host sends the same request again
// and the control plane answers it again for the same key — one enrolment, the token not burned
// for a host that never got its identity; the same token with another key is still refused.
TEST_F(NodeLifecycleTest, AnEnrolmentWhoseAnswerIsLostIsAnsweredAgainForTheSameKeyOnly) {
  control_.reset();
  control_ = std::make_unique<BackgroundProcess>(
      std::vector<std::string>{bin("mesh-control"), "run", "--config", (dir() / "control.toml").string(),
                               "--log-level", "debug"},
      std::vector<std::string>{"NOX_MESH_CONTROL_DROP_ENROL_ANSWERS_FOR_TEST=1"});
  ASSERT_TRUE(eventually([&] { return mesh({"nodes"}).exit_code == 0; }, 15000)) << control_->stderr_text();
  auto tok = mesh({"token", "issue", "lost-01", "--output", "json"});
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  const std::string token = json(tok.out).get_string("token");
  auto config = [&](const std::string& state) {
    const fs::path c = dir() / ("lost-" + state + ".toml");
    write_text(c, "[node]\nname = \"lost-01\"\nstate_dir = \"" + (dir() / state).string() +
                      "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\nload = [\"file\"]\n\n[transport]\n"
                      "plugin = \"nats\"\nservers = [\"" + nats_->url() + "\"]\n");
    return c.string();
  };
  auto en = mesh::testing::run_process({bin("mesh-host"), "enrol", "--config", config("host-a"), "--token", token});
  ASSERT_EQ(en.exit_code, 0) << en.out << en.err << control_->stderr_text();
  EXPECT_NE(en.err.find("enrolment request sent again node=lost-01"), std::string::npos) << en.err;
  EXPECT_TRUE(control_->wait_for_output("enrolment answered again node=lost-01 generation=1", 5000))
      << control_->stderr_text();
  auto shown = mesh({"node", "show", "lost-01", "--output", "json"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(json(shown.out).get_int("generation", 0), 1) << "one enrolment, not two";
  // The same token from another machine (another key): the token was used.
  auto other = mesh::testing::run_process({bin("mesh-host"), "enrol", "--config", config("host-b"), "--token", token});
  EXPECT_NE(other.exit_code, 0) << other.out << other.err;
  EXPECT_NE(other.err.find("already used"), std::string::npos) << other.err;
  EXPECT_FALSE(fs::exists(dir() / "host-b" / "identity.json"));
}

TEST_F(NodeLifecycleTest, ANodeNeverBriefedIsNotEligibleYetAndAnAbortedEnrolmentCanBeRemoved) {
  // An enrolment that stopped before its briefing: the control plane has the node, nothing else.
  auto tok = mesh({"token", "issue", "half", "--output", "json"});
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  BrokerClient client(nats_->url());
  ASSERT_TRUE(client.connected);
  auto keys = common::generate_keypair();
  sdk::Value req = sdk::Value::object();
  req.set("node", "half");
  req.set("token", json(tok.out).get_string("token"));
  req.set("public_key", common::to_hex(keys.public_key));
  auto reply = client->request(protocol::make_message(protocol::kEnrolSubject, req.to_json()), 5s);
  ASSERT_TRUE(reply) << reply.error().message;

  auto listed = mesh({"nodes", "--output", "json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const sdk::Value list = json(listed.out);
  const sdk::Value* half = find_node(list, "half");
  ASSERT_NE(half, nullptr) << listed.out;
  ASSERT_NE(half->find("eligible"), nullptr) << listed.out;
  EXPECT_TRUE(half->find("eligible")->is_null()) << "never briefed: not known to be eligible: " << listed.out;
  auto text = mesh({"nodes"});
  EXPECT_NE(text.out.find("unknown"), std::string::npos) << text.out;
  auto show = mesh({"node", "show", "half"});
  EXPECT_NE(show.out.find("unknown (no briefing yet"), std::string::npos) << show.out;

  auto removed = mesh({"node", "remove", "half", "--purge"});
  ASSERT_EQ(removed.exit_code, 0) << removed.out << removed.err;
  EXPECT_NE(removed.out.find("history was deleted"), std::string::npos) << removed.out;
  auto empty = mesh({"nodes"});
  EXPECT_NE(empty.out.find("no nodes enrolled"), std::string::npos) << empty.out;
  auto unknown = mesh({"node", "remove", "never-was"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out << unknown.err;
  EXPECT_NE(unknown.err.find("never enrolled"), std::string::npos) << unknown.err;
}

// --- a full store -----------------------------------------------------------------------------------

class StoreFullTest : public MeshTest {
 public:
  /// Restarts mesh-control on the same state, with `[store] max_size` when non-zero.
  void restart_control(std::int64_t max_size) {
    control_.reset();
    const fs::path cfg = dir() / "control.toml";
    write_text(cfg, "[control]\nstate_dir = \"" + (dir() / "control").string() + "\"\n\n[plugins]\ndir = \"" +
                        MESH_TEST_PLUGIN_DIR + "\"\n\n[store]\nplugin = \"sqlite\"\npath = \"" +
                        (dir() / "control" / "mesh.db").string() + "\"\n" +
                        (max_size > 0 ? "max_size = " + std::to_string(max_size) + "\n" : "") +
                        "\n[transport]\nplugin = \"nats\"\nservers = [\"" + nats_->url() + "\"]\n");
    control_ = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{bin("mesh-control"), "run", "--config", cfg.string(), "--log-level", "debug"});
    ASSERT_TRUE(eventually([&] { return mesh({"nodes"}).exit_code == 0; }, 15000)) << control_->stderr_text();
  }
};

TEST_F(StoreFullTest, AReportTheStoreCannotTakeStaysInTheOutboxAndIsRecordedOnceThereIsRoom) {
  Host& a = add_host("node-a", "1s");
  std::vector<std::pair<std::string, std::string>> files;
  for (int i = 0; i < 300; ++i)
    files.emplace_back((dir() / "files" / ("f" + std::to_string(i) + ".txt")).string(), "content\n");
  fs::create_directories(dir() / "files");
  auto d = declare("node-a", file_declaration(files));
  const std::int64_t delivery = d.get_int("delivery", 0);
  ASSERT_GT(delivery, 0) << d.to_json();

  // The store is full from now on: nothing that grows the file can be written.
  control_.reset();
  const auto size = static_cast<std::int64_t>(fs::file_size(dir() / "control" / "mesh.db"));
  restart_control(size);
  start_host(a);
  ASSERT_TRUE(eventually([&] {
    return a.proc->stderr_text().find("report not taken yet node=node-a key=apply-") != std::string::npos;
  }, 30000)) << a.proc->stderr_text() << control_->stderr_text();
  EXPECT_NE(control_->stderr_text().find("database or disk is full"), std::string::npos) << control_->stderr_text();
  EXPECT_FALSE(fs::is_empty(a.state / "outbox")) << "the report is kept until it is recorded";
  auto waiting = report(delivery);
  EXPECT_EQ(count(waiting, "applied"), 0u) << waiting.to_json();
  EXPECT_EQ(count(waiting, "outstanding"), 1u) << waiting.to_json();

  // Space returns: the host's next retry is recorded.
  restart_control(0);
  auto done = report(delivery, "30s");
  EXPECT_EQ(count(done, "applied"), 1u) << done.to_json() << a.proc->stderr_text() << control_->stderr_text();
  ASSERT_TRUE(eventually([&] { return fs::is_empty(a.state / "outbox"); }, 10000));
}

// --- broker credentials ----------------------------------------------------------------------------

using NodeRemovalBrokerTest = PermissionedMeshTest;

ino_t inode_of(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? st.st_ino : 0;
}

TEST_F(NodeRemovalBrokerTest, ARemovedNodesBrokerCredentialsAreRefusedAndANewEnrolmentGetsNewOnes) {
  Host& a = enrolled_host("node-a");
  start_host(a);
  const std::string f = (dir() / "a.txt").string();
  write_text(dir() / "a.json", file_declaration({{f, "a\n"}}));
  ASSERT_EQ(op({"declare", "node-a", (dir() / "a.json").string()}).exit_code, 0);
  auto rep = op({"report", "--wait", "30s", "--output", "json"});
  ASSERT_EQ(count(json(rep.out), "applied"), 1u) << rep.out << a.proc->stderr_text();
  ASSERT_NE(read_text(dir() / "auth.conf").find("# node node-a generation 1"), std::string::npos);

  auto removed = op({"node", "remove", "node-a"});
  ASSERT_EQ(removed.exit_code, 0) << removed.out << removed.err;
  const std::string auth = read_text(dir() / "auth.conf");
  EXPECT_EQ(auth.find("node-a"), std::string::npos) << "its nkey is gone from the authorization file: " << auth;
  // The broker refuses its credentials (the server was reloaded).
  ASSERT_TRUE(eventually([&] {
    BrokerClient as_a(nats_->url(), {{"nkey_seed", (a.state / "broker.nk").string()}}, 2s);
    return !as_a.connected;
  }, 15000)) << "node-a's nkey still connects";
  auto all = op({"nodes", "--all", "--output", "json"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const sdk::Value everyone = json(all.out);
  const sdk::Value* gone = find_node(everyone, "node-a");
  ASSERT_NE(gone, nullptr) << all.out;
  EXPECT_NE(gone->find("removed_at"), nullptr) << all.out;

  // A new plain token enrols the name again, with new broker credentials.
  a.proc.reset();
  fs::remove_all(a.state);
  enrolled_host("node-a");
  EXPECT_NE(read_text(dir() / "auth.conf").find("# node node-a generation 2"), std::string::npos)
      << read_text(dir() / "auth.conf");
  start_host(a);
  const std::string g = (dir() / "b.txt").string();
  write_text(dir() / "b.json", file_declaration({{g, "b\n"}}));
  ASSERT_EQ(op({"declare", "node-a", (dir() / "b.json").string()}).exit_code, 0);
  rep = op({"report", "--wait", "30s", "--output", "json"});
  EXPECT_EQ(count(json(rep.out), "applied"), 1u) << rep.out << a.proc->stderr_text();
}

TEST_F(NodeRemovalBrokerTest, ARestartRewritesNoFileThatDidNotChange) {
  const fs::path seed = dir() / "control" / "broker.nk";
  const fs::path auth = dir() / "auth.conf";
  const ino_t seed_inode = inode_of(seed), auth_inode = inode_of(auth);
  ASSERT_NE(seed_inode, 0u);
  const std::string seed_text = read_text(seed);
  control_.reset();
  auto w = mesh::testing::run_process({bin("mesh-control"), "broker-config", "--config", config_.string()});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_EQ(inode_of(seed), seed_inode) << "broker.nk was rewritten although it did not change";
  EXPECT_EQ(inode_of(auth), auth_inode) << "the authorization file was rewritten although it did not change";
  EXPECT_EQ(read_text(seed), seed_text);
}

}  // namespace
}  // namespace mesh::itest
