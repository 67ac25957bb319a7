// A control plane under test: a real nats-server on a free loopback port, the built
// `mesh-control` with the sqlite store in a temporary state directory, the built `mesh` CLI, and
// a raw transport (the nats plugin, loaded in-test) for playing a host.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mesh/common/crypto.h"
#include "mesh/common/json.h"
#include "mesh/common/clock.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/loader/loader.h"
#include "mesh/sdk/transport.h"
#include "mesh/testing/nats_server.h"
#include "mesh/testing/plugins.h"
#include "mesh/testing/process.h"
#include "mesh/testing/temp_dir.h"

namespace mesh::control::test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using mesh::testing::BackgroundProcess;
using mesh::testing::NatsServer;
using mesh::testing::ProcessResult;
using mesh::testing::TempDir;

inline std::string bin(const std::string& name) { return std::string(MESH_TEST_BIN_DIR) + "/" + name; }

inline void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

inline sdk::Value json(const std::string& text) {
  auto v = common::parse_json(text);
  if (!v) throw std::runtime_error("not JSON: " + v.error().message + ": " + text);
  return *v;
}

/// A control config; `extra` is appended (more tables), `control_extra` goes into [control].
inline std::string control_config(const fs::path& state_dir, const std::string& url,
                                  const std::string& extra = "", const std::string& control_extra = "") {
  return "[control]\nstate_dir = \"" + state_dir.string() + "\"\nheartbeat_flush = \"100ms\"\n" +
         control_extra + "\n"
         "[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\n\n[store]\nplugin = \"sqlite\"\n\n"
         "[transport]\nplugin = \"nats\"\nservers = [\"" + url + "\"]\n" + extra;
}

/// A transport of our own, as a host (or a misbehaving client) would use it.
class RawTransport {
 public:
  explicit RawTransport(const std::string& url) {
    auto p = mesh::testing::load_plugin("transport", "nats");
    if (!p) throw std::runtime_error(p.error().message);
    plugin_ = std::move(*p);
    t_ = plugin_.as<sdk::Transport>();
    sdk::Value cfg = sdk::Value::object();
    cfg.set("servers", sdk::Value(sdk::Value::Array{sdk::Value(url)}));
    if (auto ok = t_->configure(sdk::apply_defaults(t_->config_schema(), cfg)); !ok)
      throw std::runtime_error(ok.error().message);
    if (auto ok = t_->connect(5s, false); !ok) throw std::runtime_error(ok.error().message);
  }
  ~RawTransport() { t_->close(); }

  sdk::Transport& operator*() { return *t_; }
  sdk::Transport* operator->() { return t_.get(); }

  /// A request with the protocol header (unless `versioned` is false) and a body.
  sdk::Result<sdk::Message> request(const std::string& subject, const std::string& body,
                                    bool versioned = true) {
    sdk::Message m = versioned ? protocol::make_message(subject, body) : sdk::Message{subject, "", {}, body};
    return t_->request(m, 5s);
  }
  sdk::Result<sdk::Message> request_json(const std::string& subject, const sdk::Value& body) {
    return request(subject, body.to_json());
  }
  void publish(const std::string& subject, const sdk::Value& body) {
    auto ok = t_->publish(protocol::make_message(subject, body.to_json()));
    if (!ok) throw std::runtime_error(ok.error().message);
    (void)t_->flush(2s);
  }

 private:
  loader::LoadedPlugin plugin_;
  std::shared_ptr<sdk::Transport> t_;
};

inline std::string status_of(const sdk::Message& m) {
  const std::string* s = m.header(protocol::kHeaderStatus);
  return s ? *s : "";
}

class ControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nats_ = std::make_unique<NatsServer>();
    start_control();
  }
  void TearDown() override {
    if (control_ && HasFailure()) std::cerr << "---- mesh-control log\n" << control_->stderr_text() << "\n";
    control_.reset();
  }

  fs::path dir() const { return tmp_.path(); }

  void start_control(const std::string& extra = "", const std::string& control_extra = "") {
    const fs::path cfg = dir() / "control.toml";
    write_text(cfg, control_config(dir() / "state", nats_->url(), extra, control_extra));
    control_ = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{bin("mesh-control"), "run", "--config", cfg.string(), "--log-level", "debug"});
    ASSERT_TRUE(control_->wait_for_output("control started", 15000)) << control_->stderr_text();
  }

  /// The first operator identity mesh-control wrote on its first start.
  std::string admin_identity() const { return (dir() / "state" / "admin.identity").string(); }

  /// `mesh` as the first admin (or as `identity` when given; "" for none at all).
  ProcessResult mesh(std::vector<std::string> args, int timeout_ms = 30000) {
    return mesh_as(admin_identity(), std::move(args), timeout_ms);
  }
  ProcessResult mesh_as(const std::string& identity, std::vector<std::string> args, int timeout_ms = 30000) {
    std::vector<std::string> argv{bin("mesh"), "--server", nats_->url(), "--plugin-dir", MESH_TEST_PLUGIN_DIR};
    if (!identity.empty()) argv.insert(argv.end(), {"--identity", identity});
    argv.insert(argv.end(), args.begin(), args.end());
    return mesh::testing::run_process(argv, {}, timeout_ms);
  }

  RawTransport& raw() {
    if (!raw_) raw_ = std::make_unique<RawTransport>(nats_->url());
    return *raw_;
  }

  /// What a host keeps after enrolling: its key pair, and what the enrolment reply gave it.
  struct FakeNode {
    common::KeyPair keys;
    std::string heartbeat_key;  // opened from the sealed box
    std::string control_key;    // pinned
    std::int64_t generation = 0;
  };

  /// Issues a token (with --reenrol when asked) and enrols `node` the way mesh-host does (a raw
  /// mesh.enrol request with a fresh key pair); the node's keys are kept in nodes_.
  std::string enrol(const std::string& node, bool reenrol = false) {
    std::vector<std::string> args{"token", "issue", node, "--output", "json"};
    if (reenrol) args.push_back("--reenrol");
    auto tok = mesh(args);
    EXPECT_EQ(tok.exit_code, 0) << tok.err;
    const std::string token = json(tok.out).get_string("token");
    enrol_with(node, token);
    return token;
  }
  /// Enrols with a given token; returns the reply (or an empty message when none came).
  sdk::Message enrol_with(const std::string& node, const std::string& token, bool expect_ok = true) {
    FakeNode n;
    n.keys = common::generate_keypair();
    sdk::Value req = sdk::Value::object();
    req.set("node", node);
    req.set("token", token);
    req.set("public_key", common::to_hex(n.keys.public_key));
    req.set("host_version", "0.1.0");
    auto reply = raw().request_json(protocol::kEnrolSubject, req);
    EXPECT_TRUE(reply) << (reply ? "" : reply.error().message);
    if (!reply) return sdk::Message{};
    if (!expect_ok) return *reply;
    EXPECT_EQ(status_of(*reply), "ok") << reply->body;
    if (status_of(*reply) != "ok") return *reply;
    auto v = json(reply->body);
    n.control_key = *common::from_hex(v.get_string("control_key"));
    n.generation = v.get_int("generation", 0);
    auto sealed = common::from_hex(v.get_string("heartbeat_key"));
    EXPECT_TRUE(sealed);
    auto opened = common::open_sealed(*sealed, n.keys);
    EXPECT_TRUE(opened) << "the heartbeat key is sealed to the node's key";
    if (opened) n.heartbeat_key = *opened;
    nodes_[node] = n;
    return *reply;
  }

  /// A message on `subject` signed as node `node` signs reports, drift reports and briefings.
  sdk::Message node_signed(const std::string& subject, const std::string& node, const std::string& body) {
    auto m = protocol::make_message(subject, body);
    m.set_header(protocol::kHeaderNode, node);
    trust::sign_report(m, nodes_.at(node).keys.secret_key);
    return m;
  }
  /// A latest/recovery request signed by `node`.
  sdk::Result<sdk::Message> node_request(const std::string& subject, const std::string& node) {
    auto m = protocol::make_message(subject);
    trust::sign_request(m, protocol::kHeaderNode, node, nodes_.at(node).keys.secret_key, common::now_ms());
    return raw()->request(m, 5s);
  }
  /// A heartbeat of `node` with its MAC.
  sdk::Message heartbeat_message(const std::string& node, const sdk::Value& body) {
    auto m = protocol::make_message(protocol::heartbeat_subject(node), body.to_json());
    m.set_header(protocol::kHeaderNode, node);
    trust::mac_heartbeat(m, node, nodes_.at(node).heartbeat_key, common::now_ms());
    return m;
  }
  void publish(const sdk::Message& m) {
    ASSERT_TRUE(raw()->publish(m));
    (void)raw()->flush(2s);
  }

  /// Declares `text` for `node` with the CLI; returns the ProcessResult.
  ProcessResult declare(const std::string& node, const std::string& text,
                        std::vector<std::string> extra = {"--output", "json"}) {
    const fs::path f = dir() / ("decl-" + std::to_string(++files_) + ".json");
    write_text(f, text);
    std::vector<std::string> args{"declare", node, f.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return mesh(args);
  }

  /// An apply report as a host sends it.
  sdk::Value apply_report(const std::string& node, std::int64_t revision, const std::string& outcome,
                          const std::string& resource = "", const std::string& reason = "",
                          std::vector<std::string> owned = {}) {
    sdk::Value r = sdk::Value::object();
    r.set("node", node);
    r.set("revision", revision);
    r.set("at", "2026-11-29T07:00:01Z");
    r.set("outcome", outcome);
    r.set("resource", resource);
    r.set("reason", reason);
    sdk::Value::Array o;
    for (auto& s : owned) o.emplace_back(s);
    r.set("owned", sdk::Value(std::move(o)));
    r.set("resources", sdk::Value::array());
    return r;
  }

  /// Sends a report on mesh.report.<node>, signed by `signer` (default: the node itself);
  /// returns the reply body (parsed) and checks the status.
  sdk::Value send_report(const std::string& node, const sdk::Value& report, const std::string& want = "ok",
                         const std::string& signer = "") {
    auto reply = raw()->request(node_signed(protocol::report_subject(node), signer.empty() ? node : signer,
                                            report.to_json()),
                                5s);
    EXPECT_TRUE(reply) << (reply ? "" : reply.error().message);
    if (!reply) return sdk::Value();
    EXPECT_EQ(status_of(*reply), want) << reply->body;
    return json(reply->body);
  }

  TempDir tmp_;
  std::unique_ptr<NatsServer> nats_;
  std::unique_ptr<BackgroundProcess> control_;
  std::unique_ptr<RawTransport> raw_;
  std::map<std::string, FakeNode> nodes_;
  int files_ = 0;
};

inline const char* kDecl =
    R"({"resources":[{"type":"file","id":"/etc/motd","properties":{"content":"hello\n"}}]})";
inline const char* kDecl2 =
    R"({"resources":[{"type":"file","id":"/etc/motd","properties":{"content":"bye\n"}},)"
    R"({"type":"file","id":"/etc/issue","properties":{"content":"x\n"},"requires":["file:/etc/motd"]}]})";

}  // namespace mesh::control::test
