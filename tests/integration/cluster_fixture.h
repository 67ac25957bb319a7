// More than one machine, on loopback (decision records 90-92): a 3-node NATS cluster
// (mesh::testing::NatsCluster), several mesh-control instances sharing one keys_dir and one
// sqlite file (the test and single-machine setup; a real cluster uses the jetstream-kv store),
// each with its own state_dir, and hosts that list every server of the cluster.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mesh/common/json.h"
#include "mesh/testing/nats_server.h"
#include "mesh/testing/process.h"
#include "mesh/testing/temp_dir.h"

namespace mesh::itest {

namespace fs = std::filesystem;
using mesh::testing::BackgroundProcess;
using mesh::testing::NatsCluster;
using mesh::testing::ProcessResult;
using mesh::testing::TempDir;

inline std::string cluster_bin(const std::string& name) { return std::string(MESH_TEST_BIN_DIR) + "/" + name; }

inline void cluster_write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

inline std::string cluster_read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline sdk::Value cluster_json(const std::string& text) {
  auto v = common::parse_json(text);
  if (!v) throw std::runtime_error("not JSON: " + v.error().message + ": " + text);
  return *v;
}

inline std::size_t cluster_count(const sdk::Value& report, const char* key) {
  const sdk::Value* v = report.find(key);
  return v && v->is_array() ? v->as_array().size() : 0;
}

struct ClusterHost {
  std::string name;
  fs::path config;
  std::unique_ptr<BackgroundProcess> proc;
};

class ClusterTest : public ::testing::Test {
 public:
  /// More config for every server of the cluster (e.g. an include of an authorization file).
  virtual std::string cluster_config() { return ""; }

  void SetUp() override {
    nats_ = std::make_unique<NatsCluster>(3, cluster_config());
    // Routes up and JetStream agreed: messages published on one server reach the others.
    ASSERT_TRUE(nats_->wait_for_meta_leader(30000).has_value()) << cluster_read(nats_->log_path(0));
  }

  void TearDown() override {
    for (auto& [n, h] : hosts_)
      if (h.proc && HasFailure()) std::cerr << "---- host " << n << " log\n" << h.proc->stderr_text() << "\n";
    hosts_.clear();
    for (std::size_t i = 0; i < controls_.size(); ++i)
      if (controls_[i] && HasFailure())
        std::cerr << "---- control " << i << " log\n" << controls_[i]->stderr_text() << "\n";
    controls_.clear();
  }

  fs::path dir() const { return tmp_.path(); }
  fs::path keys_dir() const { return dir() / "keys"; }
  std::string admin_identity() const { return (keys_dir() / "admin.identity").string(); }

  /// The servers list of a config, starting at server `first` (then the others in order), so
  /// that clients spread over the cluster.
  std::string servers_toml(std::size_t first) const {
    if (pinned_) return "[\"" + nats_->url(first % nats_->size()) + "\"]";
    std::string out = "[";
    for (std::size_t k = 0; k < nats_->size(); ++k)
      out += (k ? ", \"" : "\"") + nats_->url((first + k) % nats_->size()) + "\"";
    return out + "]";
  }

  /// Writes control plane `i`'s config (own state_dir, shared keys_dir and sqlite file, a 2 s
  /// lease) and starts it; waits until the API answers through server i (when `wait`).
  void start_control(std::size_t i, std::vector<std::string> env = {}, bool wait = true) {
    if (controls_.size() <= i) controls_.resize(i + 1);
    const fs::path cfg = dir() / ("control-" + std::to_string(i) + ".toml");
    cluster_write(cfg, "[control]\nstate_dir = \"" + (dir() / ("control-" + std::to_string(i))).string() +
                           "\"\nkeys_dir = \"" + keys_dir().string() + "\"\nlease = \"2s\"\n\n[plugins]\ndir = \"" +
                           MESH_TEST_PLUGIN_DIR "\"\n\n[store]\nplugin = \"sqlite\"\npath = \"" +
                           (dir() / "mesh.db").string() + "\"\n\n[transport]\nplugin = \"nats\"\nname = \"control-" +
                           std::to_string(i) + "\"\nservers = " + servers_toml(i % nats_->size()) + "\n" +
                           extra_control_toml_);
    controls_[i] = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{cluster_bin("mesh-control"), "run", "--config", cfg.string(), "--log-level", "debug"},
        env);
    if (!wait) return;
    // Subscribed (queue group `mesh-control`), then the API answers.
    ASSERT_TRUE(mesh::testing::eventually(
        [&] { return controls_[i]->stderr_text().find("control started") != std::string::npos; }, 15000))
        << controls_[i]->stderr_text();
    ASSERT_TRUE(mesh::testing::eventually([&] { return mesh({"nodes"}).exit_code == 0; }, 15000))
        << controls_[i]->stderr_text();
  }

  /// `mesh` as the first admin, given every server of the cluster (it connects to one that runs).
  ProcessResult mesh(std::vector<std::string> args, int timeout_ms = 60000) {
    return mesh::testing::run_process(mesh_argv(std::move(args)), {}, timeout_ms);
  }
  std::vector<std::string> mesh_argv(std::vector<std::string> args) const {
    std::vector<std::string> argv{cluster_bin("mesh"), "--plugin-dir", MESH_TEST_PLUGIN_DIR, "--identity",
                                  admin_identity()};
    if (operator_config_.empty())
      argv.insert(argv.end(), {"--server", pinned_ ? nats_->url(nats_->size() - 1) : nats_->urls_joined()});
    else
      argv.insert(argv.end(), {"--config", operator_config_});
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  /// A host listing every server (starting at server `index % 3`), enrolled, labelled
  /// role=web and dir=<its folder>; started when `start`.
  ClusterHost& add_host(const std::string& name, std::size_t index, bool start = true) {
    ClusterHost& h = hosts_[name];
    h.name = name;
    h.config = dir() / (name + ".toml");
    cluster_write(h.config, "[node]\nname = \"" + name + "\"\nstate_dir = \"" + (dir() / ("host-" + name)).string() +
                                "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\nload = [\"file\"]\n\n[transport]\n"
                                "plugin = \"nats\"\nname = \"" + name + "\"\nservers = " +
                                servers_toml(pinned_ ? nats_->size() - 1 : index % nats_->size()) + "\n" +
                                host_transport_extra_ +
                                "\n[timers]\nheartbeat = \"1s\"\ndrift = \"1h\"\n");
    auto tok = mesh({"token", "issue", name, "--output", "json"});
    EXPECT_EQ(tok.exit_code, 0) << tok.err;
    const std::string token = cluster_json(tok.out).get_string("token");
    auto en = mesh::testing::run_process(
        {cluster_bin("mesh-host"), "enrol", "--config", h.config.string(), "--token", token});
    EXPECT_EQ(en.exit_code, 0) << en.out << en.err;
    fs::create_directories(dir() / "files" / name);
    auto l = mesh({"node", "label", name, "role=web", "dir=" + (dir() / "files" / name).string()});
    EXPECT_EQ(l.exit_code, 0) << l.out << l.err;
    if (start) start_host(h);
    return h;
  }

  void start_host(ClusterHost& h) {
    h.proc = std::make_unique<BackgroundProcess>(std::vector<std::string>{
        cluster_bin("mesh-host"), "run", "--config", h.config.string(), "--log-level", "debug"});
  }

  /// Pushes module `name`@`version`: one file `<labels.dir>/motd` holding `content`.
  void push_motd(const std::string& name, const std::string& version, const std::string& content) {
    const fs::path f = dir() / ("module-" + name + "-" + version + ".json");
    cluster_write(f, "{\"module\": \"" + name + "\", \"version\": \"" + version +
                         "\", \"resources\": [{\"type\": \"file\", \"id\": \"{{labels.dir}}/motd\", \"properties\": "
                         "{\"content\": \"" + content + "\", \"mode\": \"0644\"}}]}");
    auto r = mesh({"module", "push", f.string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }

  std::string motd_of(const std::string& node) const { return cluster_read(dir() / "files" / node / "motd"); }

  /// The control plane instances' logs, joined (what one of them said).
  std::string control_logs() const {
    std::string out;
    for (const auto& c : controls_)
      if (c) out += c->stderr_text();
    return out;
  }

  /// Set by a test before it starts anything: more control.toml (a [broker] table), more keys of
  /// the hosts' [transport] (the enrolment user), and the `mesh --config` file (broker user).
  std::string extra_control_toml_;
  std::string host_transport_extra_;
  std::string operator_config_;
  /// Set by a test before it starts anything: control plane i connects to server i only, hosts
  /// and `mesh` (without operator_config_) to the last server only, where no control plane is —
  /// so that the server there picks an instance of the queue group for every message anew, and
  /// every message crosses a route.
  bool pinned_ = false;

  TempDir tmp_;
  std::unique_ptr<NatsCluster> nats_;
  std::vector<std::unique_ptr<BackgroundProcess>> controls_;
  std::map<std::string, ClusterHost> hosts_;
};

/// Broker permissions on the cluster (decision record 91): every server includes one
/// authorization file, open until the first mesh-control writes it and reloads every server
/// (each instance's [broker] pid_file lists them all); hosts enrol through the enrolment user,
/// `mesh` runs as the operators' user (operator_config_).
class PermissionedClusterTest : public ClusterTest {
 public:
  /// More config for every server, besides the include of the authorization file.
  virtual std::string permissioned_extra_config() { return ""; }
  std::string cluster_config() override {
    // Open until mesh-control writes the file (at its start) and reloads the servers.
    cluster_write(dir() / "auth.conf", "\n");
    // nats-server includes relative to the config's folder: the cluster's temporary folder,
    // beside this test's (both made by TempDir under the same parent).
    return "include \"../" + dir().filename().string() + "/auth.conf\"\n" + permissioned_extra_config();
  }
  void SetUp() override {
    ClusterTest::SetUp();
    if (HasFatalFailure()) return;
    cluster_write(dir() / "enrol.pw", "enrol-secret\n");
    cluster_write(dir() / "operator.pw", "operator-secret\n");
    std::string pids = "[";
    for (std::size_t i = 0; i < nats_->size(); ++i) pids += (i ? ", \"" : "\"") + nats_->pid_path(i) + "\"";
    pids += "]";
    extra_control_toml_ = "\n[broker]\nauthorization_file = \"" + (dir() / "auth.conf").string() +
                          "\"\npid_file = " + pids + "\nenrol_password_file = \"" + (dir() / "enrol.pw").string() +
                          "\"\noperator_password_file = \"" + (dir() / "operator.pw").string() + "\"\n";
    host_transport_extra_ = "user = \"mesh-enrol\"\npassword_file = \"" + (dir() / "enrol.pw").string() + "\"\n";
    // `mesh` lists every server, or (pinned_) the last one only.
    std::string servers = "[";
    for (std::size_t i = pinned_ ? nats_->size() - 1 : 0; i < nats_->size(); ++i)
      servers += (servers.size() > 1 ? ", \"" : "\"") + nats_->url(i) + "\"";
    cluster_write(dir() / "operator.toml", "[transport]\nservers = " + servers + "]\nuser = \"mesh-operator\"\n" +
                                               "password_file = \"" + (dir() / "operator.pw").string() + "\"\n");
    operator_config_ = (dir() / "operator.toml").string();
  }
};

}  // namespace mesh::itest
