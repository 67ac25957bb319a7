// Several control planes (issue 15, item 2; decision records 90-92): mesh-control instances on a
// 3-node NATS cluster as one queue group, sharing keys_dir and one sqlite file (the test and
// single-machine setup), each with its own state_dir and instance id. Each request is served
// once; an instance killed with SIGKILL in the middle of its pushes to 20 hosts leaves no node
// stranded (another instance takes its work over), nothing reported twice; a NATS server killed
// in the middle of a deploy does not stop it.
#include <csignal>
#include <set>
#include <thread>

#include "cluster_fixture.h"
#include "mesh/common/crypto.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/testing/plugins.h"
#include "mesh/testing/text.h"

namespace mesh::itest {
namespace {

using ControlClusterTest = ClusterTest;

using mesh::testing::occurrences;

// Every node of a deploy report is listed once, in one list; returns how many are applied.
void expect_each_node_once(const sdk::Value& rep, std::size_t nodes) {
  std::multiset<std::string> seen;
  for (const char* list : {"applied", "failed", "outstanding", "superseded"})
    if (const sdk::Value* l = rep.find(list); l && l->is_array())
      for (const auto& e : l->as_array()) seen.insert(e.get_string("node"));
  EXPECT_EQ(seen.size(), nodes) << rep.to_json();
  for (const auto& n : seen) EXPECT_EQ(seen.count(n), 1u) << n << " listed twice: " << rep.to_json();
}

TEST_F(ControlClusterTest, InstancesShareKeysNotInstanceIdsAndServeEachRequestOnce) {
  // Both started at once on an empty keys_dir: one of them makes the key, the other reads it.
  start_control(0, {}, /*wait=*/false);
  start_control(1, {}, /*wait=*/false);
  for (std::size_t i = 0; i < 2; ++i)
    ASSERT_TRUE(mesh::testing::eventually(
        [&] { return controls_[i]->stderr_text().find("control started") != std::string::npos; }, 20000))
        << controls_[i]->stderr_text();
  EXPECT_EQ(occurrences(control_logs(), "signing key created"), 1u) << control_logs();
  EXPECT_EQ(occurrences(control_logs(), "first operator identity written"), 1u) << control_logs();
  ASSERT_TRUE(mesh::testing::eventually([&] { return mesh({"nodes"}).exit_code == 0; }, 15000)) << control_logs();
  // One key for both; each its own id, in its own state_dir.
  EXPECT_TRUE(fs::exists(keys_dir() / "control.key"));
  EXPECT_TRUE(fs::exists(keys_dir() / "admin.identity"));
  EXPECT_FALSE(fs::exists(dir() / "control-0" / "control.key"));
  EXPECT_FALSE(fs::exists(dir() / "control-1" / "control.key"));
  const std::string id0 = cluster_read(dir() / "control-0" / "instance.id");
  const std::string id1 = cluster_read(dir() / "control-1" / "instance.id");
  EXPECT_EQ(id0.size(), 33u);
  EXPECT_NE(id0, id1);
  EXPECT_FALSE(fs::exists(keys_dir() / "instance.id"));

  // 20 mutating requests: each handled by exactly one instance (the queue group), both used.
  constexpr int kRequests = 20;
  for (int i = 0; i < kRequests; ++i) {
    auto r = mesh({"token", "issue", "n-" + std::to_string(i), "--output", "json"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  const std::string log0 = controls_[0]->stderr_text();
  const std::string log1 = controls_[1]->stderr_text();
  const std::size_t by0 = occurrences(log0, "api operation=token.issue");
  const std::size_t by1 = occurrences(log1, "api operation=token.issue");
  EXPECT_EQ(by0 + by1, static_cast<std::size_t>(kRequests)) << log0 << log1;
  EXPECT_GT(by0, 0u) << "a queue group spreads requests";
  EXPECT_GT(by1, 0u) << "a queue group spreads requests";
  EXPECT_EQ(occurrences(log0 + log1, "replayed"), 0u);
  auto listed = mesh({"token", "list", "--output", "json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(cluster_json(listed.out).as_array().size(), static_cast<std::size_t>(kRequests)) << listed.out;

  // An operator added through one instance is known to the other (the shared operators file).
  auto added = mesh({"operator", "add", "ci", "--role", "reader"});
  ASSERT_EQ(added.exit_code, 0) << added.out << added.err;
  for (int i = 0; i < 6; ++i) {
    auto ops = mesh({"operator", "list", "--output", "json"});
    ASSERT_EQ(ops.exit_code, 0) << ops.err;
    EXPECT_EQ(cluster_json(ops.out).as_array().size(), 2u) << ops.out;
  }

  // Exactly one instance holds the lease on background work.
  EXPECT_TRUE(mesh::testing::eventually(
      [&] { return occurrences(controls_[0]->stderr_text() + controls_[1]->stderr_text(), "lease=background taken") >= 1; },
      10000));
  EXPECT_EQ(occurrences(controls_[0]->stderr_text() + controls_[1]->stderr_text(), "lease=background taken"), 1u);
}

// A node re-enrolled through one instance (a new identity: a new heartbeat MAC key) is verified
// by the other too, whose cache held the old identity (decision record 90).
TEST_F(ControlClusterTest, ANodeReEnrolledThroughOneInstanceIsVerifiedByTheOther) {
  start_control(0);
  start_control(1);
  ClusterHost& h = add_host("h1", 0);
  // Eight heartbeats, spread over both instances by the queue group: both cache the identity.
  ASSERT_TRUE(mesh::testing::eventually(
      [&] { return occurrences(h.proc->stderr_text(), "heartbeat") >= 1; }, 10000));
  std::this_thread::sleep_for(std::chrono::seconds(8));
  EXPECT_EQ(occurrences(control_logs(), "subject=mesh.heartbeat.h1"), 0u) << control_logs();

  h.proc.reset();
  auto tok = mesh({"token", "issue", "h1", "--reenrol", "--output", "json"});
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  auto en = mesh::testing::run_process({cluster_bin("mesh-host"), "enrol", "--config", h.config.string(), "--token",
                                        cluster_json(tok.out).get_string("token")});
  ASSERT_EQ(en.exit_code, 0) << en.out << en.err;

  // Reports signed with the new key before the host runs (so before any heartbeat of the new
  // identity could refresh a cache): the instance that did not serve the re-enrolment still
  // holds the old key. Eight, spread over both instances by the queue group: none is refused for
  // its signature (a report of a revision never declared is answered, not refused as forged).
  {
    auto plugin = mesh::testing::load_plugin("transport", "nats");
    ASSERT_TRUE(plugin) << plugin.error().message;
    auto raw = plugin->as<sdk::Transport>();
    sdk::Value cfg = sdk::Value::object();
    cfg.set("servers", sdk::Value(sdk::Value::Array{sdk::Value(nats_->url(0))}));
    ASSERT_TRUE(raw->configure(sdk::apply_defaults(raw->config_schema(), cfg)));
    ASSERT_TRUE(raw->connect(std::chrono::seconds(5), false));
    std::string hex = cluster_read(dir() / "host-h1" / "node.key");
    while (!hex.empty() && hex.back() == '\n') hex.pop_back();
    const std::string key = *common::from_hex(hex);
    for (int i = 0; i < 8; ++i) {
      sdk::Value body = sdk::Value::object();
      body.set("node", "h1");
      body.set("revision", 900 + i);
      body.set("at", "2026-11-29T07:00:01Z");
      body.set("outcome", "applied");
      body.set("owned", sdk::Value::array());
      auto m = protocol::make_message(protocol::report_subject("h1"), body.to_json());
      m.set_header(protocol::kHeaderNode, "h1");
      trust::sign_report(m, key);
      auto reply = raw->request(m, std::chrono::seconds(5));
      ASSERT_TRUE(reply) << reply.error().message;
      EXPECT_EQ(reply->body.find("permission_denied"), std::string::npos) << reply->body << control_logs();
    }
    raw->close();
  }

  start_host(h);
  auto contact = [&] {
    return cluster_json(mesh({"nodes", "--output", "json"}).out).as_array().at(0).get_string("last_contact");
  };
  const std::string before = contact();
  EXPECT_TRUE(mesh::testing::eventually([&] { return contact() != before; }, 20000));
  std::this_thread::sleep_for(std::chrono::seconds(6));  // more heartbeats of the new identity, on both
  // Not one heartbeat of the new identity refused by either instance.
  EXPECT_EQ(occurrences(control_logs(), "subject=mesh.heartbeat.h1"), 0u) << control_logs();

  // Its apply reports are verified with the key from the same cache: four deploys, their reports
  // spread over both instances by the queue group, each recorded (the instance that still held
  // the old identity reads it again when the cached key fails).
  for (int v = 0; v < 4; ++v) {
    const std::string version = "1." + std::to_string(v);
    push_motd("web", version, "{{node.name}} " + version + "\\n");
    if (v == 0) {
      ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
    }
    auto d = mesh({"deploy", "web", version, "--wait", "30s", "--output", "json"});
    ASSERT_EQ(d.exit_code, 0) << d.out << d.err << control_logs();
    EXPECT_EQ(cluster_count(cluster_json(d.out), "applied"), 1u) << d.out;
  }
  EXPECT_EQ(occurrences(control_logs(), "does not verify"), 0u) << control_logs();
}

TEST_F(ControlClusterTest, InstanceKilledMidDeployToTwentyHostsStrandsNothingAndReportsNothingTwice) {
  // A pause before each push, so that the kill lands among them (the reply comes after the
  // pushes: about 2 s).
  const std::vector<std::string> env{"NOX_MESH_CONTROL_PUSH_PAUSE_MS_FOR_TEST=100"};
  start_control(0, env);
  start_control(1, env);
  constexpr int kHosts = 20;
  for (int i = 0; i < kHosts; ++i) add_host("web-" + std::to_string(100 + i), static_cast<std::size_t>(i));
  push_motd("web", "1.0", "{{node.name}}\\n");
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);

  BackgroundProcess deploy(mesh_argv({"--timeout", "10s", "deploy", "web", "1.0", "--output", "json"}));
  // The instance that took the deploy: it logs its write, then pushes one node every 150 ms.
  std::optional<std::size_t> writer;
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        for (std::size_t i = 0; i < 2; ++i)
          if (controls_[i]->stderr_text().find("declared delivery=") != std::string::npos) writer = i;
        return writer.has_value();
      },
      30000))
      << control_logs();
  ASSERT_TRUE(mesh::testing::eventually(
      [&] { return occurrences(controls_[*writer]->stderr_text(), "declaration pushed") >= 3; }, 20000));
  EXPECT_EQ(controls_[*writer]->stop(SIGKILL), -SIGKILL);
  const std::size_t pushed_before_kill = occurrences(controls_[*writer]->stderr_text(), "declaration pushed");
  EXPECT_LT(pushed_before_kill, static_cast<std::size_t>(kHosts)) << "killed in the middle of its pushes";
  const std::size_t survivor = 1 - *writer;

  // The deploy command got no answer and asked again with the same request (decision record
  // 193): the survivor answers it from the store, as the dead one would have. The deploy is in
  // the store, and every node ends applied: the survivor re-pushed what the dead one stranded.
  ASSERT_TRUE(mesh::testing::eventually([&] { return !deploy.running(); }, 60000)) << deploy.stderr_text();
  EXPECT_EQ(deploy.exit_code(), 0) << deploy.stdout_text() << deploy.stderr_text();
  EXPECT_NE(deploy.stderr_text().find("asking again with the same request"), std::string::npos) << deploy.stderr_text();
  EXPECT_EQ(cluster_json(deploy.stdout_text()).get_int("deploy", 0), 1) << deploy.stdout_text();
  auto waited = mesh({"deploy", "--show", "1", "--wait", "120s", "--output", "json"}, 150000);
  EXPECT_EQ(waited.exit_code, 0) << waited.out << waited.err;
  auto rep = cluster_json(waited.out);
  EXPECT_EQ(cluster_count(rep, "applied"), static_cast<std::size_t>(kHosts)) << waited.out;
  EXPECT_EQ(cluster_count(rep, "outstanding"), 0u);
  EXPECT_EQ(cluster_count(rep, "failed"), 0u);
  expect_each_node_once(rep, kHosts);
  const std::string survivor_log = controls_[survivor]->stderr_text();
  EXPECT_TRUE(survivor_log.find("departed") != std::string::npos ||
              survivor_log.find("lease=background taken (from instance=") != std::string::npos)
      << survivor_log;
  EXPECT_NE(survivor_log.find("pending declaration(s) again"), std::string::npos) << survivor_log;

  // Nothing twice: one revision per node, on each host one file with its own name.
  for (int i = 0; i < kHosts; ++i) {
    const std::string node = "web-" + std::to_string(100 + i);
    auto h = mesh({"history", node, "--output", "json"});
    ASSERT_EQ(h.exit_code, 0) << h.err;
    EXPECT_EQ(cluster_json(h.out).as_array().size(), 1u) << node << ": " << h.out;
    EXPECT_EQ(motd_of(node), node + "\n");
  }
  // Read again (through the survivor, with no wait), the report says the same.
  auto show = mesh({"deploy", "--show", "1", "--output", "json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  expect_each_node_once(cluster_json(show.out), kHosts);
  EXPECT_EQ(cluster_count(cluster_json(show.out), "applied"), static_cast<std::size_t>(kHosts));
}

// Staged-deploy waves are moved on by the lease holder only; when it is killed between two waves,
// the other instance takes the lease over and writes the next ones.
TEST_F(ControlClusterTest, StagedDeployGoesOnWhenTheLeaseHolderIsKilledBetweenWaves) {
  start_control(0);
  start_control(1);
  constexpr int kHosts = 6;
  for (int i = 0; i < kHosts; ++i)
    add_host("web-" + std::to_string(100 + i), static_cast<std::size_t>(i), /*start=*/i != 0);
  push_motd("web", "1.0", "{{node.name}}\\n");
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  std::optional<std::size_t> holder;
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        for (std::size_t i = 0; i < 2; ++i)
          if (controls_[i]->stderr_text().find("lease=background taken") != std::string::npos) holder = i;
        return holder.has_value();
      },
      10000));

  // Wave 1 is web-100, whose host is not running: the deploy waits there.
  BackgroundProcess deploy(mesh_argv({"--timeout", "5s", "deploy", "web", "1.0", "--waves", "1,50%,100%",
                                      "--wave-timeout", "5m", "--wait", "120s", "--output", "json"}));
  ASSERT_TRUE(mesh::testing::eventually(
      [&] { return deploy.stderr_text().find("written; waiting") != std::string::npos; }, 30000))
      << deploy.stderr_text();
  EXPECT_EQ(controls_[*holder]->stop(SIGKILL), -SIGKILL);
  const std::size_t survivor = 1 - *holder;
  start_host(hosts_["web-100"]);

  ASSERT_TRUE(mesh::testing::eventually([&] { return !deploy.running(); }, 150000)) << deploy.stderr_text();
  EXPECT_EQ(deploy.exit_code(), 0) << deploy.stdout_text() << deploy.stderr_text();
  auto rep = cluster_json(deploy.stdout_text());
  EXPECT_EQ(rep.get_string("state"), "done") << deploy.stdout_text();
  EXPECT_EQ(cluster_count(rep, "applied"), static_cast<std::size_t>(kHosts)) << deploy.stdout_text();
  ASSERT_EQ(cluster_count(rep, "waves"), 3u) << deploy.stdout_text();
  EXPECT_EQ(rep.find("waves")->as_array()[0].find("nodes")->as_array().at(0).to_json().find("web-100") !=
                std::string::npos,
            true)
      << deploy.stdout_text();
  expect_each_node_once(rep, kHosts);
  const std::string survivor_log = controls_[survivor]->stderr_text();
  EXPECT_NE(survivor_log.find("lease=background taken"), std::string::npos) << survivor_log;
  EXPECT_NE(survivor_log.find("wave 3 written"), std::string::npos) << "the survivor wrote the last wave: "
                                                                    << survivor_log;
  for (int i = 0; i < kHosts; ++i) EXPECT_EQ(motd_of("web-" + std::to_string(100 + i)), "web-" + std::to_string(100 + i) + "\n");
}

TEST_F(ControlClusterTest, NatsServerKilledMidDeployDoesNotStopIt) {
  const std::vector<std::string> env{"NOX_MESH_CONTROL_PUSH_PAUSE_MS_FOR_TEST=100"};
  start_control(0, env);
  start_control(1, env);
  constexpr int kHosts = 20;
  for (int i = 0; i < kHosts; ++i) add_host("web-" + std::to_string(100 + i), static_cast<std::size_t>(i));
  push_motd("web", "1.0", "{{node.name}}\\n");
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  std::size_t on_server2 = 0;
  for (int i = 0; i < kHosts; ++i)
    if (nats_->server_of_client("web-" + std::to_string(100 + i)) == std::optional<std::size_t>(2)) ++on_server2;

  BackgroundProcess deploy(mesh_argv({"--timeout", "20s", "deploy", "web", "1.0", "--wait", "120s", "--output", "json"}));
  ASSERT_TRUE(mesh::testing::eventually([&] { return control_logs().find("declared delivery=") != std::string::npos; },
                                        30000))
      << control_logs();
  ASSERT_TRUE(mesh::testing::eventually([&] { return occurrences(control_logs(), "declaration pushed") >= 3; }, 20000));
  nats_->kill(2);  // hosts and perhaps a control plane on it move to the others

  ASSERT_TRUE(mesh::testing::eventually([&] { return !deploy.running(); }, 150000)) << deploy.stderr_text();
  EXPECT_EQ(deploy.exit_code(), 0) << deploy.stdout_text() << deploy.stderr_text();
  auto rep = cluster_json(deploy.stdout_text());
  EXPECT_EQ(cluster_count(rep, "applied"), static_cast<std::size_t>(kHosts)) << deploy.stdout_text();
  expect_each_node_once(rep, kHosts);
  for (int i = 0; i < kHosts; ++i) {
    const std::string node = "web-" + std::to_string(100 + i);
    EXPECT_EQ(motd_of(node), node + "\n");
    EXPECT_NE(nats_->server_of_client(node), std::optional<std::size_t>(2));
  }
  EXPECT_GT(on_server2, 0u) << "some hosts were on the killed server";
  EXPECT_TRUE(controls_[0]->running());
  EXPECT_TRUE(controls_[1]->running());
}

// newuser finding 8: one server of three dies while `mesh deploy` waits for its answer, and the
// deploy exited 3 ("no reply", or a store error) about one time in three. Here each instance is on
// a server of its own and `mesh` (and the host) on the third. The server of the instance that took
// the deploy hangs (SIGSTOP) before that instance answers (its answer comes after its pushes), so
// the answer goes into a socket nobody reads, then dies (SIGKILL): the answer is lost with it, as
// in a crash under load. `mesh` asks again with the same signed request, an instance answers it
// from the store (decision records 28, 193), and the deploy is written once.
TEST_F(ControlClusterTest, AServerKilledWithTheDeployInFlightCostsARetryNotAnExit3) {
  pinned_ = true;  // control i on server i; hosts and mesh on the last server
  const std::vector<std::string> env{"NOX_MESH_CONTROL_PUSH_PAUSE_MS_FOR_TEST=1000"};  // answer after the pushes
  start_control(0, env);
  start_control(1, env);
  add_host("web-100", 0);
  push_motd("web", "1.0", "{{node.name}}\\n");
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);

  BackgroundProcess deploy(mesh_argv({"--timeout", "5s", "deploy", "web", "1.0", "--output", "json"}));
  std::optional<std::size_t> writer;
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        for (std::size_t i = 0; i < 2; ++i)
          if (controls_[i]->stderr_text().find("declared delivery=") != std::string::npos) writer = i;
        return writer.has_value();
      },
      30000))
      << control_logs();
  const pid_t server = static_cast<pid_t>(std::stol(cluster_read(nats_->pid_path(*writer))));
  ASSERT_EQ(::kill(server, SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // the writer answers into it meanwhile
  nats_->kill(*writer);

  ASSERT_TRUE(mesh::testing::eventually([&] { return !deploy.running(); }, 60000)) << deploy.stderr_text();
  EXPECT_EQ(deploy.exit_code(), 0) << deploy.stdout_text() << deploy.stderr_text();
  EXPECT_NE(deploy.stderr_text().find("asking again with the same request"), std::string::npos)
      << deploy.stderr_text();
  EXPECT_EQ(cluster_json(deploy.stdout_text()).get_int("deploy", 0), 1) << deploy.stdout_text();
  EXPECT_NE(control_logs().find("retried: answered as the first time"), std::string::npos) << control_logs();
  // Written once: one revision on the node, one deploy.
  auto h = mesh({"history", "web-100", "--output", "json"});
  ASSERT_EQ(h.exit_code, 0) << h.err;
  EXPECT_EQ(cluster_json(h.out).as_array().size(), 1u) << h.out;
  EXPECT_NE(mesh({"deploy", "--show", "2"}).exit_code, 0) << "a second deploy was written";
}

// Broker permissions on a cluster (decision record 91; PermissionedClusterTest in
// cluster_fixture.h): every server includes one authorization file; each instance writes it after
// its own enrolments and at every lease round, and reloads every server listed in its [broker]
// pid_file. A host enrolled through either instance connects with its own nkey to whichever
// server it picks, and gets its declaration.
TEST_F(PermissionedClusterTest, EveryServerGetsTheNodesPermissionsWhicheverInstanceEnrolledThem) {
  start_control(0);
  start_control(1);
  // Permissions in force on every server: an anonymous client is refused by each.
  for (std::size_t i = 0; i < nats_->size(); ++i) {
    auto anon = mesh::testing::run_process({cluster_bin("mesh"), "--server", nats_->url(i), "--plugin-dir",
                                            MESH_TEST_PLUGIN_DIR, "--identity", admin_identity(), "nodes"});
    EXPECT_NE(anon.exit_code, 0) << "server " << i << " let an anonymous client in: " << anon.out;
    EXPECT_NE(anon.err.find("Authorization Violation"), std::string::npos) << anon.err;
  }
  // Six hosts, enrolled through whichever instance the queue group picks, each listing the
  // servers from a different first one.
  constexpr int kHosts = 6;
  for (int i = 0; i < kHosts; ++i) add_host("web-" + std::to_string(100 + i), static_cast<std::size_t>(i));
  const std::string logs = control_logs();
  EXPECT_GT(occurrences(logs, "broker permissions written"), 0u) << logs;
  push_motd("web", "1.0", "{{node.name}}\\n");
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  auto d = mesh({"deploy", "web", "1.0", "--wait", "60s", "--output", "json"});
  ASSERT_EQ(d.exit_code, 0) << d.out << d.err;
  auto rep = cluster_json(d.out);
  EXPECT_EQ(cluster_count(rep, "applied"), static_cast<std::size_t>(kHosts)) << d.out;
  std::set<std::size_t> servers;
  for (int i = 0; i < kHosts; ++i) {
    const std::string node = "web-" + std::to_string(100 + i);
    EXPECT_EQ(motd_of(node), node + "\n");
    EXPECT_TRUE(fs::exists(dir() / ("host-" + node) / "broker.nk")) << node << " has its own nkey";
    if (auto s = nats_->server_of_client(node)) servers.insert(*s);
  }
  EXPECT_GT(servers.size(), 1u) << "hosts spread over the servers";
}

}  // namespace
}  // namespace mesh::itest
