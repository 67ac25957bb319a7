// mesh-sim end to end (decision records 95-97): a real nats-server, mesh-control with the sqlite
// store, `mesh`, and one mesh-sim process simulating 50 hosts over shared connections. The hosts
// enrol with tokens mesh-sim issues with the admin identity, brief, heartbeat; a module deployed
// to all of them reaches all of them; a failure rate shows as failed nodes in the deploy report,
// node for node as the simulator decided; after a nats-server restart (a reconnect storm of every
// connection at once) every host is connected again, its last contact advances, and no report
// or outcome changed.
#include <set>
#include <thread>

#include "mesh/common/clock.h"
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

constexpr std::size_t kHosts = 50;

class SimTest : public MeshTest {
 public:
  void TearDown() override {
    if (sim_ && HasFailure()) std::cerr << "---- mesh-sim log\n" << sim_->stderr_text().substr(0, 200000) << "\n";
    sim_.reset();
    MeshTest::TearDown();
  }

  void start_sim(double failure_rate) {
    sim_ = std::make_unique<BackgroundProcess>(std::vector<std::string>{
        bin("mesh-sim"), "run", "--server", nats_->url(), "--plugin-dir", MESH_TEST_PLUGIN_DIR, "--hosts",
        std::to_string(kHosts), "--hosts-per-connection", "8", "--workers", "4", "--identity", admin_identity(),
        "--state", (dir() / "sim-state.jsonl").string(), "--heartbeat", "500ms", "--apply-time", "20ms",
        "--apply-jitter", "10ms", "--failure-rate", std::to_string(failure_rate), "--seed", "11",
        "--reconnect-jitter", "300ms", "--status", status_path().string(), "--log-level", "info"});
  }

  fs::path status_path() const { return dir() / "sim-status.json"; }

  sdk::Value status() {
    auto text = read_text(status_path());
    auto v = common::parse_json(text);
    return v ? *v : sdk::Value::object();
  }
  std::int64_t status_count(const char* key) { return status().get_int(key, -1); }

  /// `mesh nodes --output json`, as name → node view.
  std::map<std::string, sdk::Value> nodes() {
    auto r = mesh({"nodes", "--output", "json"});
    std::map<std::string, sdk::Value> out;
    if (r.exit_code != 0) return out;
    const sdk::Value list = json(r.out);
    for (const auto& n : list.as_array()) out[n.get_string("name")] = n;
    return out;
  }

  /// Every node's last contact (epoch ms; -1 never heard from).
  std::map<std::string, std::int64_t> contacts() {
    std::map<std::string, std::int64_t> out;
    for (const auto& [name, n] : nodes()) {
      const sdk::Value* c = n.find("last_contact");
      out[name] = c && c->is_string() ? common::parse_rfc3339(c->as_string()).value_or(-1) : -1;
    }
    return out;
  }

  std::unique_ptr<BackgroundProcess> sim_;
};

TEST_F(SimTest, FiftyHostsEnrolDeployFailHonestlyAndSurviveAReconnectStorm) {
  start_sim(0.2);
  // Enrolled (tokens issued through the operator API), briefed, heard from: all fifty.
  ASSERT_TRUE(mesh::testing::eventually([&] { return status_count("enrolled") == static_cast<std::int64_t>(kHosts); },
                                        120000))
      << sim_->stderr_text();
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        auto c = contacts();
        if (c.size() != kHosts) return false;
        for (const auto& [n, ms] : c)
          if (ms < 0) return false;
        return true;
      },
      60000))
      << "every simulated host heard from";
  for (const auto& [name, n] : nodes()) {
    EXPECT_EQ(name.rfind("sim-", 0), 0u) << name;
    EXPECT_TRUE(n.get_bool("eligible", false)) << name << " briefed and eligible: " << n.to_json();
  }

  // One module for every simulated host, by name.
  const fs::path module = dir() / "module.json";
  write_text(module,
             R"({"module": "motd", "version": "1.0", "resources": [{"type": "file", "id": "/srv/sim/{{node.name}}/motd",
                 "properties": {"content": "{{node.name}} on {{facts.os.id}}\n", "mode": "0644"}}]})");
  ASSERT_EQ(mesh({"module", "push", module.string()}).exit_code, 0);
  ASSERT_EQ(mesh({"assign", "motd", "name=sim-*"}).exit_code, 0);
  auto dep = mesh({"deploy", "motd", "1.0", "--wait", "60s", "--output", "json"});
  ASSERT_TRUE(dep.exit_code == 0 || dep.exit_code == 1) << dep.out << dep.err;
  auto rep = json(dep.out);
  EXPECT_EQ(rep.get_int("declared", 0), static_cast<std::int64_t>(kHosts)) << dep.out;
  EXPECT_EQ(count(rep, "outstanding"), 0u) << dep.out;
  EXPECT_EQ(count(rep, "applied") + count(rep, "failed"), kHosts) << dep.out;
  // The failure rate shows as failed nodes, as many as the simulator failed, each with its reason.
  // (The status file is rewritten every second: wait until it counts every apply.)
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        auto s = status();
        return s.get_int("applied", 0) + s.get_int("failed", 0) >= static_cast<std::int64_t>(kHosts) &&
               s.get_int("reports_pending", -1) == 0;
      },
      30000))
      << status().to_json();
  const std::int64_t failed_by_sim = status_count("hosts_failed");
  EXPECT_GT(failed_by_sim, 0) << "a failure rate of 0.2 over 50 hosts (seed 11) fails some";
  EXPECT_LT(failed_by_sim, static_cast<std::int64_t>(kHosts));
  EXPECT_EQ(static_cast<std::int64_t>(count(rep, "failed")), failed_by_sim) << dep.out;
  EXPECT_EQ(dep.exit_code, 1) << "a report with a failed node exits 1";
  std::set<std::string> failed_nodes, applied_nodes;
  for (const auto& f : rep.find("failed")->as_array()) {
    failed_nodes.insert(f.get_string("node"));
    EXPECT_EQ(f.get_string("resource"), "file:/srv/sim/" + f.get_string("node") + "/motd") << f.to_json();
    EXPECT_NE(f.get_string("reason").find("simulated failure"), std::string::npos) << f.to_json();
    EXPECT_EQ(f.get_string("code"), "failed") << f.to_json();
  }
  for (const auto& a : rep.find("applied")->as_array()) applied_nodes.insert(a.get_string("node"));
  EXPECT_EQ(failed_nodes.size() + applied_nodes.size(), kHosts) << "each node in exactly one list";
  // What each node says of itself (its heartbeat's state and last outcome) agrees with the report.
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        for (const auto& [name, n] : nodes())
          if ((n.get_string("state") == "failed") != (failed_nodes.count(name) == 1)) return false;
        return true;
      },
      20000))
      << "node states follow the reports";

  // The reconnect storm: the broker goes away and comes back; every connection reconnects at once.
  const std::int64_t down_ms = common::now_ms();
  nats_->stop();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  nats_->start();
  // Every host connected again and synced (asked its latest declaration, got a verified answer).
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        auto s = status();
        return s.get_int("reconnects", 0) > 0 && s.get_int("connections_up", -1) == s.get_int("connections", -2) &&
               s.get_int("hosts_synced", -1) == static_cast<std::int64_t>(kHosts);
      },
      60000))
      << status().to_json();
  // Every host's last contact comes after the outage (the control plane's clock, whole seconds)...
  std::map<std::string, std::int64_t> after;
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        after = contacts();
        if (after.size() != kHosts) return false;
        for (const auto& [n, ms] : after)
          if (ms < down_ms / 1000 * 1000 + 1000) return false;
        return true;
      },
      60000))
      << "every host heard from after the restart";
  // ...and keeps advancing.
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        auto later = contacts();
        for (const auto& [n, ms] : after)
          if (later[n] <= ms) return false;
        return true;
      },
      30000))
      << "last contact advancing for every host";
  // No host wrongly marked: the same report, node for node, and no apply again (no revision was
  // declared, the hosts had applied or failed it: asking `latest` after the storm changes nothing).
  auto again = mesh({"deploy", "--show", std::to_string(rep.get_int("deploy", 0)), "--output", "json"});
  auto rep2 = json(again.out);
  EXPECT_EQ(count(rep2, "outstanding"), 0u) << again.out;
  std::set<std::string> failed2, applied2;
  for (const auto& f : rep2.find("failed")->as_array()) failed2.insert(f.get_string("node"));
  for (const auto& a : rep2.find("applied")->as_array()) applied2.insert(a.get_string("node"));
  EXPECT_EQ(failed2, failed_nodes);
  EXPECT_EQ(applied2, applied_nodes);
  // The failed hosts asked for their latest declaration after the storm and retried it (as a real
  // host retries a failed revision): it failed again, and the control plane kept one outcome.
  EXPECT_EQ(status_count("hosts_failed"), failed_by_sim) << "the same hosts failed";
  EXPECT_EQ(status_count("refused"), 0);
  for (const auto& [name, n] : nodes()) EXPECT_EQ(n.get_string("state") == "failed", failed_nodes.count(name) == 1) << name;

  // A clean stop; started again, the simulator takes its identities from its state file: nobody
  // enrols again (each node keeps generation 1) and every host is back in sync.
  EXPECT_EQ(sim_->stop(SIGTERM, 10000), 0) << sim_->stderr_text();
  fs::remove(status_path());
  start_sim(0.2);
  ASSERT_TRUE(mesh::testing::eventually(
      [&] { return status_count("hosts_synced") == static_cast<std::int64_t>(kHosts); }, 60000))
      << sim_->stderr_text();
  EXPECT_EQ(status_count("enrolled"), static_cast<std::int64_t>(kHosts));
  EXPECT_EQ(status_count("enrolled_this_run"), 0);
  EXPECT_EQ(status_count("briefed_this_run"), 0);
  for (const char* node : {"sim-00001", "sim-00050"}) {
    auto show = mesh({"node", "show", node, "--output", "json"});
    ASSERT_EQ(show.exit_code, 0) << show.err;
    EXPECT_EQ(json(show.out).get_int("generation", 0), 1) << node << " was not enrolled again";
  }
  EXPECT_EQ(sim_->stderr_text().find("enrolled count="), std::string::npos) << "no enrolment on the second start";
  EXPECT_EQ(sim_->stop(SIGTERM, 10000), 0) << sim_->stderr_text();
}

// A stop while the broker is away and every connection reconnects: SIGTERM during the token
// requests of a large enrolment (the server stopped under them) ends mesh-sim with 0. It used to
// ask again each timed-out request (20 s each, up to 300 times) and never looked at the stop.
TEST_F(SimTest, ExitsOnSigtermWhileReconnectingDuringEnrolment) {
  sim_ = std::make_unique<BackgroundProcess>(std::vector<std::string>{
      bin("mesh-sim"), "run", "--server", nats_->url(), "--plugin-dir", MESH_TEST_PLUGIN_DIR, "--hosts", "3000",
      "--hosts-per-connection", "100", "--workers", "2", "--identity", admin_identity(), "--log-level", "info"});
  ASSERT_TRUE(sim_->wait_for_output("issuing tokens count=3000", 60000)) << sim_->stderr_text();
  nats_->stop();
  ASSERT_TRUE(sim_->wait_for_output("event=disconnected", 10000)) << sim_->stderr_text();
  // Reconnecting now (nats.c retries every ~250 ms, forever); the token requests in flight wait.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_TRUE(sim_->running()) << sim_->stderr_text();
  // SIGTERM: a clean exit, not the SIGKILL stop() sends if it is still running after 30 s.
  EXPECT_EQ(sim_->stop(SIGTERM, 30000), 0) << sim_->stderr_text();
  EXPECT_NE(sim_->stderr_text().find("signal 15 received: stopping"), std::string::npos) << sim_->stderr_text();
  nats_->start();
}

// Tokens from a file of "NODE TOKEN" lines (as `mesh token issue` prints them); a bad line is
// refused naming the file and the line, before anything is sent.
TEST_F(SimTest, TokensFromAFile) {
  const fs::path bad = dir() / "bad-tokens.txt";
  write_text(bad, "# tokens\nsim-00001\n");
  auto refused = mesh::testing::run_process({bin("mesh-sim"), "run", "--server", nats_->url(), "--plugin-dir",
                                             MESH_TEST_PLUGIN_DIR, "--hosts", "1", "--tokens", bad.string()});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find(bad.string() + ":2: expected \"NODE TOKEN\""), std::string::npos) << refused.err;
  // --server takes a list joined with commas, as mesh does: each entry is checked on its own.
  auto listed = mesh::testing::run_process({bin("mesh-sim"), "run", "--server", nats_->url() + ",not-a-url",
                                            "--plugin-dir", MESH_TEST_PLUGIN_DIR, "--hosts", "1", "--identity",
                                            admin_identity()});
  EXPECT_EQ(listed.exit_code, 2) << listed.err;
  EXPECT_NE(listed.err.find("servers[1]"), std::string::npos) << listed.err;

  std::string lines;
  for (const char* node : {"sim-00001", "sim-00002", "sim-00003"}) {
    auto tok = mesh({"token", "issue", node, "--output", "json"});
    ASSERT_EQ(tok.exit_code, 0) << tok.err;
    lines += std::string(node) + " " + json(tok.out).get_string("token") + "\n";
  }
  const fs::path tokens = dir() / "tokens.txt";
  write_text(tokens, lines);
  sim_ = std::make_unique<BackgroundProcess>(std::vector<std::string>{
      bin("mesh-sim"), "run", "--server", nats_->url(), "--plugin-dir", MESH_TEST_PLUGIN_DIR, "--hosts", "3",
      "--tokens", tokens.string(), "--heartbeat", "500ms", "--status", status_path().string()});
  ASSERT_TRUE(mesh::testing::eventually([&] { return status_count("hosts_synced") == 3; }, 60000))
      << sim_->stderr_text();
  auto n = nodes();
  ASSERT_EQ(n.size(), 3u);
  for (const auto& [name, v] : n) EXPECT_TRUE(v.get_bool("eligible", false)) << name;
  // A used token does not enrol again: a second simulator with the same file is refused.
  auto again = mesh::testing::run_process({bin("mesh-sim"), "run", "--server", nats_->url(), "--plugin-dir",
                                           MESH_TEST_PLUGIN_DIR, "--hosts", "1", "--tokens", tokens.string()},
                                          {}, 60000);
  EXPECT_EQ(again.exit_code, 2) << again.err;
  EXPECT_NE(again.err.find("enrolment of sim-00001 refused"), std::string::npos) << again.err;
}

}  // namespace
}  // namespace mesh::itest
