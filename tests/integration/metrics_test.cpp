// Metrics (decision records 93 and 94, docs/metrics.md): mesh-control's /metrics scraped by the
// real Debian `prometheus` on loopback and a figure read back through Prometheus's HTTP API; the
// host's node-exporter textfile; `promtool check metrics` on both; bad [metrics] values refused
// naming the key.
#include <arpa/inet.h>
#include <csignal>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mesh/common/protocol.h"
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

// A free TCP port on 127.0.0.1 (bound to port 0, read back, released). `keep` receives the
// still-bound socket when given (a port in use).
int free_port(int* keep = nullptr) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("bind");
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  if (keep) {
    ::listen(fd, 1);
    *keep = fd;
  } else {
    ::close(fd);
  }
  return ntohs(a.sin_port);
}

// GET with the machine's curl; "" when the request failed.
std::string http_get(const std::string& url) {
  auto r = mesh::testing::run_process({"curl", "-sf", "--max-time", "10", url}, {}, 20000);
  return r.exit_code == 0 ? r.out : std::string();
}

// `promtool check metrics` on `text` (read from stdin): its exit code and output.
mesh::testing::ProcessResult promtool_check(const std::string& text) {
  return mesh::testing::run_process({"promtool", "check", "metrics"}, {}, 30000, text);
}

// The value of the first result of an instant query through Prometheus's HTTP API, or nullopt
// while it has none (no scrape landed yet).
std::optional<double> query(int prometheus_port, const std::string& promql) {
  std::string encoded;
  for (unsigned char c : promql) {
    if (std::isalnum(c) || c == '_') {
      encoded += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      encoded += buf;
    }
  }
  const std::string body =
      http_get("http://127.0.0.1:" + std::to_string(prometheus_port) + "/api/v1/query?query=" + encoded);
  if (body.empty()) return std::nullopt;
  auto v = common::parse_json(body);
  if (!v || v->get_string("status") != "success") return std::nullopt;
  const sdk::Value* data = v->find("data");
  const sdk::Value* result = data ? data->find("result") : nullptr;
  if (!result || !result->is_array() || result->as_array().empty()) return std::nullopt;
  const sdk::Value* value = result->as_array().front().find("value");  // [time, "text"]
  if (!value || !value->is_array() || value->as_array().size() != 2 || !value->as_array()[1].is_string())
    return std::nullopt;
  return std::stod(value->as_array()[1].as_string());
}

class MetricsTest : public MeshTest {
 public:
  void SetUp() override {
    nats_ = std::make_unique<NatsServer>();
    metrics_port_ = free_port();
    const fs::path cfg = dir() / "control.toml";
    write_text(cfg, control_config("127.0.0.1:" + std::to_string(metrics_port_)));
    control_ = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{bin("mesh-control"), "run", "--config", cfg.string(), "--log-level", "debug"});
    ASSERT_TRUE(mesh::testing::eventually([&] { return mesh({"nodes"}).exit_code == 0; }, 15000))
        << control_->stderr_text();
  }

  std::string control_config(const std::string& listen) {
    return "[control]\nstate_dir = \"" + (dir() / "control").string() + "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR
           "\"\n\n[store]\nplugin = \"sqlite\"\n\n[transport]\nplugin = \"nats\"\nservers = [\"" +
           (nats_ ? nats_->url() : std::string("nats://127.0.0.1:1")) + "\"]\n\n[metrics]\nlisten = \"" + listen +
           "\"\n";
  }

  std::string scrape() { return http_get("http://127.0.0.1:" + std::to_string(metrics_port_) + "/metrics"); }

  int metrics_port_ = 0;
};

TEST_F(MetricsTest, PrometheusScrapesControlAndTheHostWritesItsTextfile) {
  // A host with a textfile, a delivery applied.
  Host& h = add_host("web-1", "1s");
  const fs::path textfile = dir() / "node-exporter" / "mesh.prom";
  fs::create_directories(textfile.parent_path());
  write_text(h.config, read_text(h.config) + "\n[metrics]\ntextfile = \"" + textfile.string() + "\"\n");
  start_host(h);
  fs::create_directories(dir() / "out");
  auto d = declare("web-1", file_declaration({{(dir() / "out" / "motd").string(), "hello\n"}}));
  auto r = report(d.get_int("delivery", 0), "30s");
  ASSERT_EQ(count(r, "applied"), 1u) << r.to_json() << h.proc->stderr_text();

  // A forged heartbeat (no valid MAC) is refused and counted under its reason.
  {
    BrokerClient intruder(nats_->url());
    ASSERT_TRUE(intruder.connected) << intruder.connected.error().message;
    auto m = protocol::make_message("mesh.heartbeat.web-1", "{\"node\":\"web-1\"}");
    ASSERT_TRUE(intruder->publish(m));
    ASSERT_TRUE(intruder->flush(std::chrono::seconds(2)));
  }

  // mesh-control's own text, as prometheus-cpp serialises it: promtool accepts it.
  std::string text;
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        text = scrape();
        return text.find("mesh_control_nodes{age=\"under_1m\"} 1") != std::string::npos &&
               text.find("mesh_control_deliveries{state=\"applied\"} 1") != std::string::npos &&
               text.find("mesh_control_heartbeats_refused_total{reason=\"permission_denied\"} 1") != std::string::npos;
      },
      30000))
      << text << control_->stderr_text();
  EXPECT_NE(text.find("mesh_control_store_duration_seconds_bucket{operation=\"record_reports\""), std::string::npos) << text;
  EXPECT_NE(text.find("mesh_control_pushes_total{outcome=\"published\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("mesh_control_reports_ingested_total{kind=\"report\",recorded=\"true\"} 1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("mesh_control_pushes_in_flight 0"), std::string::npos) << text;
  auto checked = promtool_check(text);
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err << text;

  // The host's textfile: written atomically after the apply, accepted by promtool.
  std::string host_text;
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        host_text = read_text(textfile);
        return host_text.find("mesh_host_applies_total{outcome=\"applied\"} 1") != std::string::npos &&
               host_text.find("mesh_host_heartbeats_sent_total") != std::string::npos;
      },
      30000))
      << host_text << h.proc->stderr_text();
  EXPECT_NE(host_text.find("mesh_host_resources_owned 1"), std::string::npos) << host_text;
  EXPECT_NE(host_text.find("mesh_host_applied_revision 1"), std::string::npos) << host_text;
  auto host_checked = promtool_check(host_text);
  EXPECT_EQ(host_checked.exit_code, 0) << host_checked.out << host_checked.err << host_text;
  for (const auto& e : fs::directory_iterator(textfile.parent_path()))
    EXPECT_EQ(e.path().filename(), "mesh.prom") << "a temp file left beside the textfile";

  // The real Prometheus scrapes mesh-control on loopback; the figure is read back through its API.
  const int prometheus_port = free_port();
  const fs::path prom_dir = dir() / "prometheus";
  write_text(prom_dir / "prometheus.yml", "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                                          "scrape_configs:\n  - job_name: mesh-control\n    static_configs:\n"
                                          "      - targets: ['127.0.0.1:" +
                                              std::to_string(metrics_port_) + "']\n");
  BackgroundProcess prometheus({"prometheus", "--config.file=" + (prom_dir / "prometheus.yml").string(),
                                "--storage.tsdb.path=" + (prom_dir / "data").string(),
                                "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port),
                                "--log.level=warn"});
  std::optional<double> nodes, applied, up;
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        up = query(prometheus_port, "up{job=\"mesh-control\"}");
        nodes = query(prometheus_port, "mesh_control_nodes{age=\"under_1m\"}");
        applied = query(prometheus_port, "mesh_control_deliveries{state=\"applied\"}");
        return up && *up == 1 && nodes && applied;
      },
      120000))
      << "prometheus log:\n" << prometheus.stderr_text();
  EXPECT_EQ(*nodes, 1);
  EXPECT_EQ(*applied, 1);
  // Heartbeats keep coming (every second): the counter Prometheus holds is above zero.
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        auto hb = query(prometheus_port, "mesh_control_heartbeats_ingested_total");
        return hb && *hb > 0;
      },
      60000))
      << prometheus.stderr_text();

  // Serving metrics leaves SIGTERM to mesh-control's own clean stop (the HTTP server's threads
  // inherit the blocked SIGTERM/SIGINT): exit 0 after "control stopped".
  EXPECT_EQ(control_->stop(SIGTERM, 15000), 0) << control_->stderr_text();
  EXPECT_NE(control_->stderr_text().find("control stopped"), std::string::npos) << control_->stderr_text();
}

TEST_F(MetricsTest, BadListenValuesAreRefusedNamingTheKey) {
  for (const std::string& bad : std::vector<std::string>{"nowhere", "127.0.0.1:99999", "example.org:9464", "[::1]:9464", "127.0.0.1:"}) {
    const fs::path cfg = dir() / "bad.toml";
    write_text(cfg, control_config(bad));
    auto r = mesh::testing::run_process({bin("mesh-control"), "run", "--config", cfg.string()}, {}, 20000);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("metrics.listen"), std::string::npos) << bad << ": " << r.err;
  }
  // An address in use: refused at start, naming the key, before anything else starts.
  int held = -1;
  const int port = free_port(&held);
  const fs::path cfg = dir() / "busy.toml";
  // A state_dir of its own: the running instance holds its own (control.lock).
  std::string busy = control_config("127.0.0.1:" + std::to_string(port));
  busy.replace(busy.find((dir() / "control").string()), (dir() / "control").string().size(),
               (dir() / "control-busy").string());
  write_text(cfg, busy);
  auto r = mesh::testing::run_process({bin("mesh-control"), "run", "--config", cfg.string()}, {}, 20000);
  ::close(held);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("metrics.listen"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(std::to_string(port)), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("in use"), std::string::npos) << "the cause is not said: " << r.err;
}

// broker-config exits at once: it must not bind [metrics] listen, which the running instance
// of the same config holds.
TEST_F(MetricsTest, BrokerConfigRunsBesideTheInstanceThatHoldsTheMetricsPort) {
  const fs::path auth = dir() / "auth.conf";
  const fs::path cfg = dir() / "control.toml";
  write_text(cfg, control_config("127.0.0.1:" + std::to_string(metrics_port_)) +
                      "\n[broker]\nauthorization_file = \"" + auth.string() + "\"\n");
  auto r = mesh::testing::run_process({bin("mesh-control"), "broker-config", "--config", cfg.string()}, {}, 20000);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("metrics.listen"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(auth)) << r.err;
  EXPECT_FALSE(scrape().empty()) << "the running instance stopped serving its metrics";
}

TEST_F(MetricsTest, BadTextfileIsRefusedNamingTheKey) {
  Host& h = add_host("web-2");
  const std::string base = read_text(h.config);
  for (const std::string& bad : std::vector<std::string>{"relative/mesh.prom", (dir() / "x.txt").string(), (dir() / "absent" / "m.prom").string()}) {
    write_text(h.config, base + "\n[metrics]\ntextfile = \"" + bad + "\"\n");
    auto r = mesh::testing::run_process({bin("mesh-host"), "run", "--config", h.config.string()}, {}, 20000);
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(r.err.find("metrics.textfile"), std::string::npos) << bad << ": " << r.err;
  }
}

}  // namespace
}  // namespace mesh::itest
