// Delivery latency over the real stack: `declare` → the node applied it, read it back and
// reported → the report is recorded. One node, one file, loopback nats-server, the sqlite store,
// mesh-control and mesh-host as processes. In the same run, one after each delivery, it measures
// the floor: the fsyncs the path must do (store commit of the revision, file, its directory, the
// ownership record, the report kept in the outbox, the store commit of the report), done back to
// back on the same disk.
//
//   delivery_bench [N=1000] [TRANSPORT_EXTRA]
//
// TRANSPORT_EXTRA: TOML lines added to the [transport] table of both mesh-control's and
// mesh-host's config, to compare transport settings side by side, e.g.
// 'send_asap = false' + newline + 'shared_delivery = false' (nats.c's buffering and one delivery
// thread per subscription, as before decision 113).
//
// Method: the harness speaks the wire protocol directly (mesh.api.declare), snoops the host's
// report on mesh.report.<node>, then asks mesh.api.report until the delivery shows applied —
// the control plane handles messages in order, so that reply comes after the report's commit.
// t = declare request sent → applied report observed. p50/p99 over N deliveries, started at
// least 55 ms apart (the control plane's per-node rate limit is 20 messages/s, burst 200).
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numeric>
#include <thread>

#include "mesh/common/clock.h"
#include "mesh/common/fs.h"
#include "mesh/common/trust.h"
#include "mesh/common/json.h"
#include "mesh/common/protocol.h"
#include "mesh/loader/loader.h"
#include "mesh/sdk/transport.h"
#include "mesh/testing/nats_server.h"
#include "mesh/testing/process.h"
#include "mesh/testing/temp_dir.h"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

std::string bin(const std::string& n) { return std::string(MESH_BENCH_BIN_DIR) + "/" + n; }

void write(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * v.size()))];
}

mesh::trust::OperatorIdentity g_operator;

// Operator requests are signed (docs/security.md), exactly as `mesh` signs them.
mesh::sdk::Value api(mesh::sdk::Transport& t, const std::string& op, const mesh::sdk::Value& params) {
  auto m = mesh::protocol::make_message(mesh::protocol::api_subject(op), params.to_json());
  mesh::trust::sign_request(m, mesh::trust::kHeaderOperator, g_operator.name, g_operator.secret_key,
                            mesh::common::now_ms());
  auto r = t.request(m, 10s);
  if (!r) throw std::runtime_error(op + ": " + r.error().describe());
  auto v = mesh::common::parse_json(r->body);
  if (!v) throw std::runtime_error(op + ": bad reply");
  if (const auto* st = r->header(mesh::protocol::kHeaderStatus); st && *st == "error")
    throw std::runtime_error(op + ": " + r->body);
  return *v;
}

// The floor: the same durable writes the delivery path needs, on the same disk. One step after
// each delivery (interleaved, so both see the same disk at the same minute).
class Floor {
 public:
  explicit Floor(const fs::path& dir) : dir_(dir) {
    fs::create_directories(dir / "files");
    fs::create_directories(dir / "state" / "outbox");
    sqlite3_open((dir / "floor.db").c_str(), &db_);
    sqlite3_exec(db_, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);",
                 nullptr, nullptr, nullptr);
  }
  ~Floor() { sqlite3_close(db_); }
  Floor(const Floor&) = delete;
  Floor& operator=(const Floor&) = delete;
  /// One floor: the durable writes of one delivery, back to back; its time in ms.
  double step() {
    auto t0 = Clock::now();
    const std::string body(200, 'x');
    const std::string sql = "INSERT INTO t(v) VALUES('" + body + "')";
    sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);                                        // revision commit
    (void)mesh::common::write_file_atomic((dir_ / "files" / "f").string(), std::to_string(i_++));      // file + directory
    (void)mesh::common::write_file_atomic((dir_ / "state" / "state.json").string(), body);             // ownership record
    (void)mesh::common::write_file_atomic((dir_ / "state" / "outbox" / "r").string(), body);           // report kept
    sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);                                        // report commit
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }

 private:
  fs::path dir_;
  sqlite3* db_ = nullptr;
  int i_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1000;
  const std::string extra = argc > 2 ? std::string(argv[2]) + "\n" : std::string();
  mesh::testing::TempDir tmp;
  const fs::path dir = tmp.path();
  mesh::testing::NatsServer nats;
  write(dir / "control.toml", "[control]\nstate_dir = \"" + (dir / "control").string() + "\"\n[plugins]\ndir = \"" +
                                  MESH_BENCH_PLUGIN_DIR + "\"\n[store]\nplugin = \"sqlite\"\n[transport]\nplugin = \"nats\"\nservers = [\"" +
                                  nats.url() + "\"]\n" + extra);
  mesh::testing::BackgroundProcess control({bin("mesh-control"), "run", "--config", (dir / "control.toml").string(),
                                            "--log-level", "warn"});
  auto lp = mesh::loader::load_plugin(MESH_BENCH_PLUGIN_DIR, "transport", "nats");
  if (!lp) {
    std::fprintf(stderr, "%s\n", lp.error().describe().c_str());
    return 1;
  }
  auto t = lp->as<mesh::sdk::Transport>();
  mesh::sdk::Value cfg = mesh::sdk::Value::object();
  cfg.set("servers", mesh::sdk::Value(mesh::sdk::Value::Array{nats.url()}));
  if (!t->configure(cfg) || !t->connect(5s, false)) return 1;

  // The first operator identity appears on mesh-control's first start; tokens come back sealed
  // to the requester, so they are issued with the `mesh` CLI.
  const std::string identity = (dir / "control" / "admin.identity").string();
  for (int i = 0; i < 100 && !fs::exists(identity); ++i) std::this_thread::sleep_for(100ms);
  auto op = mesh::trust::load_operator_identity(identity);
  if (!op) {
    std::fprintf(stderr, "%s\n", op.error().describe().c_str());
    return 1;
  }
  g_operator = *op;
  mesh::sdk::Value tok;
  for (int i = 0; i < 100; ++i) {
    auto r = mesh::testing::run_process({bin("mesh"), "--server", nats.url(), "--plugin-dir", MESH_BENCH_PLUGIN_DIR,
                                         "--identity", identity, "token", "issue", "bench-01", "--output", "json"});
    if (r.exit_code == 0) {
      tok = *mesh::common::parse_json(r.out);
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  fs::create_directories(dir / "files");
  write(dir / "host.toml", "[node]\nname = \"bench-01\"\nstate_dir = \"" + (dir / "host").string() + "\"\n[plugins]\ndir = \"" +
                               MESH_BENCH_PLUGIN_DIR + "\"\nload = [\"file\"]\n[transport]\nplugin = \"nats\"\nservers = [\"" +
                               nats.url() + "\"]\n" + extra + "[timers]\nheartbeat = \"30s\"\ndrift = \"1h\"\n");
  auto en = mesh::testing::run_process({bin("mesh-host"), "enrol", "--config", (dir / "host.toml").string(), "--token",
                                        tok.get_string("token")});
  if (en.exit_code != 0) {
    std::fprintf(stderr, "enrol failed: %s\n", en.err.c_str());
    return 1;
  }
  mesh::testing::BackgroundProcess host({bin("mesh-host"), "run", "--config", (dir / "host.toml").string(), "--log-level", "warn"});

  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t reported = 0;
  auto sub = t->subscribe(mesh::protocol::report_subject("bench-01"), "", [&](mesh::sdk::Message&& m) {
    if (const auto* r = m.header(mesh::protocol::kHeaderRevision)) {
      std::lock_guard lk(mu);
      reported = std::max<std::uint64_t>(reported, std::stoull(*r));
      cv.notify_all();
    }
  });
  std::this_thread::sleep_for(500ms);

  std::vector<double> lat;
  std::uint64_t polls = 0;  // report requests answered "not applied yet"
  int late = 0;              // deliveries over 1 s (a report recorded only when re-sent)
  Floor floor_writes(dir / "floor");
  std::vector<double> floor;  // one floor after each delivery
  auto next_start = Clock::now();
  const std::string file = (dir / "files" / "bench.txt").string();
  for (int i = 0; i < n + 20; ++i) {
    std::string decl = "{\"resources\":[{\"type\":\"file\",\"id\":\"" + file + "\",\"properties\":{\"content\":\"delivery " +
                       std::to_string(i) + "\\n\"}}]}";
    mesh::sdk::Value params = mesh::sdk::Value::object();
    params.set("node", "bench-01");
    params.set("declaration", decl);
    // One node may send 20 messages/s on average (burst 200) before the control plane drops its
    // reports (rate limit, node_rate): deliveries start at least 55 ms apart, or from the 200th
    // on a report would be dropped and re-sent by the host 5 s later.
    std::this_thread::sleep_until(next_start);
    next_start = Clock::now() + 55ms;
    auto t0 = Clock::now();
    auto d = api(*t, "declare", params);
    const auto rev = static_cast<std::uint64_t>(d.get_int("revision", 0));
    {
      std::unique_lock lk(mu);
      if (!cv.wait_for(lk, 10s, [&] { return reported >= rev; })) {
        std::fprintf(stderr, "no report for revision %llu\n%s\n", (unsigned long long)rev, host.stderr_text().c_str());
        return 1;
      }
    }
    mesh::sdk::Value rp = mesh::sdk::Value::object();
    rp.set("delivery", d.get_int("delivery", 0));
    std::uint64_t tries = 0;
    for (;;) {
      auto rep = api(*t, "report", rp);
      const auto* applied = rep.find("applied");
      if (applied && applied->is_array() && !applied->as_array().empty()) break;
      if (rep.find("failed") && !rep.find("failed")->as_array().empty()) {
        std::fprintf(stderr, "delivery failed: %s\n", rep.to_json().c_str());
        return 1;
      }
      // Not recorded yet: ask again shortly. Asking in a tight loop would take the CPU the
      // control plane needs to record it (2 cores) and fill its replay cache (10,000 requests
      // per 120 s), so the retries wait 100 µs, doubling to 6.4 ms (a report recorded late —
      // the host re-sends one whose ack did not come after 5 s — costs ~800 requests, not 50,000).
      std::this_thread::sleep_for(std::chrono::microseconds(100 << std::min<std::uint64_t>(tries++, 6)));
      ++polls;
    }
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    const double f = floor_writes.step();
    if (i >= 20) {  // the first 20 warm up caches and the page cache
      lat.push_back(ms);
      floor.push_back(f);
    }
    if (ms > 1000) ++late;
  }
  sub->reset();
  const double p50 = pct(lat, 0.50), p99 = pct(lat, 0.99), f50 = pct(floor, 0.50);
  std::printf("deliveries           %d (after 20 warm-up)\n", n);
  std::printf("declare->applied     p50 %.2f ms   p99 %.2f ms   max %.2f ms   mean %.2f ms\n", p50, p99, pct(lat, 1.0),
              std::accumulate(lat.begin(), lat.end(), 0.0) / lat.size());
  std::printf("report re-asked       %.2f times per delivery; %d deliveries over 1 s\n",
              static_cast<double>(polls) / (n + 20), late);
  if (late > 0 || std::getenv("MESH_BENCH_SHOW_LOGS")) {
    std::fprintf(stderr, "--- mesh-control (warnings and errors) ---\n%s\n--- mesh-host ---\n%s\n",
                 control.stderr_text().c_str(), host.stderr_text().c_str());
  }
  std::printf("fsync floor          p50 %.2f ms   p99 %.2f ms\n", f50, pct(floor, 0.99));
  std::printf("p50 / floor          %.2fx\n", p50 / f50);
  return 0;
}
