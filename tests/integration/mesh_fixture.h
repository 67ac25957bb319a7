// A local mesh for integration tests: a real nats-server on a free loopback port, the built
// mesh-control with the sqlite store, hosts started as processes, and the `mesh` CLI.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "mesh/common/json.h"
#include "mesh/loader/loader.h"
#include "mesh/sdk/transport.h"
#include "mesh/testing/nats_server.h"
#include "mesh/testing/plugins.h"
#include "mesh/testing/process.h"
#include "mesh/testing/temp_dir.h"

namespace mesh::itest {

namespace fs = std::filesystem;
using mesh::testing::BackgroundProcess;
using mesh::testing::NatsServer;
using mesh::testing::ProcessResult;
using mesh::testing::TempDir;

inline std::string bin(const std::string& name) { return std::string(MESH_TEST_BIN_DIR) + "/" + name; }

inline void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

inline std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline sdk::Value json(const std::string& text) {
  auto v = common::parse_json(text);
  if (!v) throw std::runtime_error("not JSON: " + v.error().message + ": " + text);
  return *v;
}

/// A declaration of files: {path: content}, with optional mode.
inline std::string file_declaration(const std::vector<std::pair<std::string, std::string>>& files,
                                    const std::string& mode = "0644") {
  sdk::Value resources = sdk::Value::array();
  for (const auto& [path, content] : files) {
    sdk::Value r = sdk::Value::object();
    r.set("type", "file");
    r.set("id", path);
    sdk::Value props = sdk::Value::object();
    props.set("content", content);
    props.set("mode", mode);
    r.set("properties", std::move(props));
    resources.as_array().push_back(std::move(r));
  }
  sdk::Value d = sdk::Value::object();
  d.set("resources", std::move(resources));
  return d.to_json();
}

struct Host {
  std::string name;
  fs::path config;
  fs::path state;
  std::unique_ptr<BackgroundProcess> proc;
};

class MeshTest : public ::testing::Test {
 public:
  void SetUp() override {
    nats_ = std::make_unique<NatsServer>();
    start_control();
  }
  void TearDown() override {
    for (auto& [n, h] : hosts_)
      if (h.proc) {
        if (HasFailure()) std::cerr << "---- host " << n << " log\n" << h.proc->stderr_text() << "\n";
        h.proc.reset();
      }
    if (control_ && HasFailure()) std::cerr << "---- control log\n" << control_->stderr_text() << "\n";
    control_.reset();
  }

  fs::path dir() const { return tmp_.path(); }

  void start_control() {
    const fs::path cfg = dir() / "control.toml";
    write_text(cfg, "[control]\nstate_dir = \"" + (dir() / "control").string() +
                        "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\n\n[store]\nplugin = \"sqlite\"\npath = \"" +
                        (dir() / "control" / "mesh.db").string() + "\"\n\n[transport]\nplugin = \"nats\"\nservers = [\"" +
                        nats_->url() + "\"]\n");
    control_ = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{bin("mesh-control"), "run", "--config", cfg.string(), "--log-level", "debug"});
    ASSERT_TRUE(mesh::testing::eventually([&] { return mesh({"nodes"}).exit_code == 0; }, 15000))
        << control_->stderr_text();
  }

  /// The first operator identity, written by mesh-control on its first start.
  std::string admin_identity() const { return (dir() / "control" / "admin.identity").string(); }

  /// `mesh` as the first admin.
  ProcessResult mesh(std::vector<std::string> args, int timeout_ms = 60000) {
    return mesh_as(admin_identity(), std::move(args), timeout_ms);
  }
  /// `mesh` with another identity ("" for none).
  ProcessResult mesh_as(const std::string& identity, std::vector<std::string> args, int timeout_ms = 60000) {
    std::vector<std::string> argv{bin("mesh"), "--server", nats_->url(), "--plugin-dir", MESH_TEST_PLUGIN_DIR};
    if (!identity.empty()) argv.insert(argv.end(), {"--identity", identity});
    argv.insert(argv.end(), args.begin(), args.end());
    return mesh::testing::run_process(argv, {}, timeout_ms);
  }

  /// Writes a host config, issues a token and enrols. Does not start the daemon.
  Host& add_host(const std::string& name, const std::string& heartbeat = "1s", const std::string& drift = "1h") {
    Host& h = hosts_[name];
    h.name = name;
    h.state = dir() / ("host-" + name);
    h.config = dir() / (name + ".toml");
    write_text(h.config, "[node]\nname = \"" + name + "\"\nstate_dir = \"" + h.state.string() +
                             "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\nload = [\"file\"]\n\n[transport]\n"
                             "plugin = \"nats\"\nservers = [\"" + nats_->url() + "\"]\n\n[timers]\nheartbeat = \"" +
                             heartbeat + "\"\ndrift = \"" + drift + "\"\n");
    enrol(h, false);
    return h;
  }

  void enrol(Host& h, bool reenrol) {
    std::vector<std::string> args{"token", "issue", h.name, "--output", "json"};
    if (reenrol) args.push_back("--reenrol");
    auto tok = mesh(args);
    ASSERT_EQ(tok.exit_code, 0) << tok.err;
    const std::string token = json(tok.out).get_string("token");
    auto en = mesh::testing::run_process({bin("mesh-host"), "enrol", "--config", h.config.string(), "--token", token});
    ASSERT_EQ(en.exit_code, 0) << en.out << en.err;
  }

  void start_host(Host& h, std::vector<std::string> env = {}) {
    h.proc = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{bin("mesh-host"), "run", "--config", h.config.string(), "--log-level", "debug"}, env);
  }

  /// Declares `text` for `node`; returns the `mesh declare --output json` object.
  sdk::Value declare(const std::string& node, const std::string& text) {
    const fs::path f = dir() / ("decl-" + std::to_string(++declarations_) + ".json");
    write_text(f, text);
    auto r = mesh({"declare", node, f.string(), "--output", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return json(r.out);
  }

  sdk::Value report(std::int64_t delivery, const std::string& wait = "") {
    std::vector<std::string> args{"report", std::to_string(delivery), "--output", "json"};
    if (!wait.empty()) args.insert(args.end(), {"--wait", wait});
    auto r = mesh(args);
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.out << r.err;
    return json(r.out);
  }

  static std::size_t count(const sdk::Value& report, const char* key) {
    const sdk::Value* v = report.find(key);
    return v && v->is_array() ? v->as_array().size() : 0;
  }

  TempDir tmp_;
  std::unique_ptr<NatsServer> nats_;
  std::unique_ptr<BackgroundProcess> control_;
  std::map<std::string, Host> hosts_;
  int declarations_ = 0;
};

/// A connection of its own to the test's broker through the real `nats` transport plugin, as an
/// attacker, a curious host or another broker user would connect. `creds` are extra [transport]
/// keys (user, password_file, nkey_seed, inbox_prefix). A refused connection does not throw:
/// `connected` says what happened. Messages on subjects given to capture() are kept.
class BrokerClient {
 public:
  explicit BrokerClient(const std::string& url,
                        const std::vector<std::pair<std::string, std::string>>& creds = {},
                        std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    auto p = mesh::testing::load_plugin("transport", "nats");
    if (!p) throw std::runtime_error(p.error().message);
    plugin_ = std::move(*p);
    t = plugin_.as<sdk::Transport>();
    sdk::Value cfg = sdk::Value::object();
    cfg.set("servers", sdk::Value(sdk::Value::Array{sdk::Value(url)}));
    for (const auto& [k, v] : creds) cfg.set(k, v);
    if (auto ok = t->configure(sdk::apply_defaults(t->config_schema(), cfg)); !ok)
      throw std::runtime_error(ok.error().message);
    connected = t->connect(timeout, false);
  }
  ~BrokerClient() {
    subs_.clear();
    t->close();
  }
  BrokerClient(const BrokerClient&) = delete;
  BrokerClient& operator=(const BrokerClient&) = delete;

  sdk::Transport* operator->() const { return t.get(); }

  /// Keeps a copy (headers included) of every message on `subject`. Throws when refused.
  void capture(const std::string& subject) {
    auto s = t->subscribe(subject, "", [this](sdk::Message&& m) {
      std::lock_guard lock(mu_);
      captured_.push_back(std::move(m));
    });
    if (!s) throw std::runtime_error(s.error().message);
    subs_.push_back(std::move(*s));
    (void)t->flush(std::chrono::seconds(2));
  }
  std::vector<sdk::Message> captured() {
    std::lock_guard lock(mu_);
    return captured_;
  }

 private:
  loader::LoadedPlugin plugin_;  // outlives the transport it made

 public:
  std::shared_ptr<sdk::Transport> t;
  sdk::Result<void> connected;

 private:
  std::vector<std::unique_ptr<sdk::Subscription>> subs_;
  std::mutex mu_;
  std::vector<sdk::Message> captured_;
};

/// A mesh with the broker permissions mesh-control maintains (README "Broker permissions"): the
/// server needs the authorization file before it starts, so it is built in order — mesh-control
/// writes the file (`broker-config`), nats-server starts with it, then mesh-control runs. `mesh`
/// connects as the operators' broker user, hosts enrol as the enrolment user.
class PermissionedMeshTest : public MeshTest {
 public:
  void SetUp() override {
    write_text(dir() / "enrol.pw", "enrol-secret\n");
    write_text(dir() / "operator.pw", "operator-secret\n");
    write_config("nats://127.0.0.1:1");
    auto w = mesh::testing::run_process({bin("mesh-control"), "broker-config", "--config", config_.string()});
    ASSERT_EQ(w.exit_code, 0) << w.err;
    write_text(dir() / "nats.conf", "pid_file: \"" + (dir() / "nats.pid").string() + "\"\ninclude \"auth.conf\"\n");
    nats_ = std::make_unique<NatsServer>(std::vector<std::string>{"-c", (dir() / "nats.conf").string()});
    write_config(nats_->url());
    write_text(dir() / "operator.toml", "[transport]\nservers = [\"" + nats_->url() +
                                            "\"]\nuser = \"mesh-operator\"\npassword_file = \"" +
                                            (dir() / "operator.pw").string() + "\"\n");
    control_ = std::make_unique<BackgroundProcess>(std::vector<std::string>{
        bin("mesh-control"), "run", "--config", config_.string(), "--log-level", "debug"});
    ASSERT_TRUE(mesh::testing::eventually([&] { return op({"nodes"}).exit_code == 0; }, 15000)) << control_->stderr_text();
  }

  void write_config(const std::string& url) {
    config_ = dir() / "control.toml";
    write_text(config_, "[control]\nstate_dir = \"" + (dir() / "control").string() +
                            "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\n\n[store]\nplugin = \"sqlite\"\n\n"
                            "[transport]\nservers = [\"" + url + "\"]\n\n[broker]\nauthorization_file = \"" +
                            (dir() / "auth.conf").string() + "\"\npid_file = \"" + (dir() / "nats.pid").string() +
                            "\"\nenrol_password_file = \"" + (dir() / "enrol.pw").string() +
                            "\"\noperator_password_file = \"" + (dir() / "operator.pw").string() + "\"\n");
  }

  /// `mesh` as `identity` (default: the first admin), connecting as the operators' broker user.
  ProcessResult op(std::vector<std::string> args, const std::string& identity = "") {
    std::vector<std::string> argv{bin("mesh"), "--config", (dir() / "operator.toml").string(), "--plugin-dir",
                                  MESH_TEST_PLUGIN_DIR, "--identity", identity.empty() ? admin_identity() : identity};
    argv.insert(argv.end(), args.begin(), args.end());
    return mesh::testing::run_process(argv, {}, 60000);
  }

  /// Writes a host config with only the enrolment user's credentials and enrols it;
  /// `last_enrol_` keeps what `mesh-host enrol` printed.
  Host& enrolled_host(const std::string& name) {
    Host& h = hosts_[name];
    h.name = name;
    h.state = dir() / ("host-" + name);
    h.config = dir() / (name + ".toml");
    write_text(h.config, "[node]\nname = \"" + name + "\"\nstate_dir = \"" + h.state.string() +
                             "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\nload = [\"file\"]\n\n[transport]\n"
                             "servers = [\"" + nats_->url() + "\"]\nuser = \"mesh-enrol\"\npassword_file = \"" +
                             (dir() / "enrol.pw").string() + "\"\n\n[timers]\nheartbeat = \"1s\"\n");
    auto tok = op({"token", "issue", name, "--output", "json"});
    EXPECT_EQ(tok.exit_code, 0) << tok.err;
    last_enrol_ = mesh::testing::run_process(
        {bin("mesh-host"), "enrol", "--config", h.config.string(), "--token", json(tok.out).get_string("token")});
    EXPECT_EQ(last_enrol_.exit_code, 0) << last_enrol_.out << last_enrol_.err;
    return h;
  }

  fs::path config_;
  ProcessResult last_enrol_;
};

}  // namespace mesh::itest
