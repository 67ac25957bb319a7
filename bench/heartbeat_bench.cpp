// Heartbeats verified and ingested per second by one control plane (issues 3 and 5): a real
// nats-server on loopback, one in-process ControlPlane with the real `sqlite` store and `nats`
// transport plugins loaded through the loader (as mesh-control's app.cpp does), a real SQLite
// file, and N simulated nodes whose heartbeats are built exactly as mesh-host builds them.
//
//   heartbeat_bench [--nodes N] [--rates R1,R2,...] [--seconds S] [--workers W]
//                   [--publishers P] [--flush-ms F] [--max-count M] [--controls C]
//                   [--heartbeat-subscriptions K] [--log-level L]
//
// Nodes are enrolled through the Store API (add_token + enrol: the same transaction as a real
// enrolment, with a fresh Ed25519 key pair each), and each node's heartbeat MAC key is derived
// from the control key as core/control derives it (trust::heartbeat_key) — the key a real host
// receives sealed in its enrolment reply.
//
// For each offered rate R (0: as fast as the publisher can), a publisher process (this program
// with --publish) precomputes R × S heartbeats (round-robin over the nodes, each node's
// timestamps strictly increasing, 1 ms apart, near now), then publishes them paced to R over P
// NATS connections, flushes, and reports its own rate and CPU. The control plane runs in this
// process: its stats() say how many heartbeats it received, dropped as busy, verified, refused
// and stored (in a committed Store::touch). A heartbeat counts as ingested only when stored.
// Ingest rate = stored / (last commit that stored one − publishing start). At the end the SQLite
// file is read back directly to check that every node's last contact reached it.
//
// --controls 2: a second control plane in a process of its own (this program with
// --control-child), on the same SQLite file through its own `sqlite` store plugin and its own NATS
// connection, in the same queue group — as two mesh-control processes sharing a store run
// (decision record 90). The broker spreads the heartbeats over both; the child writes its
// counters to a file every 5 ms, and the figures are the two control planes' sums.
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/logging.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/control/control_plane.h"
#include "mesh/control/trust.h"
#include "mesh/loader/loader.h"
#include "mesh/sdk/store.h"
#include "mesh/sdk/transport.h"
#include "mesh/testing/nats_server.h"
#include "mesh/testing/process.h"
#include "mesh/testing/temp_dir.h"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  int nodes = 1000;
  std::vector<long> rates{20000, 50000, 0};
  double seconds = 10;
  int workers = 4;  // ControlOptions' default, as mesh-control runs
  int publishers = 1;
  int flush_ms = 250;  // control.heartbeat_flush default
  long max_count = 1'000'000;
  int controls = 1;  // control planes: this process, and one child process more for 2
  int heartbeat_subscriptions = 2;  // ControlOptions' default (decision record 122)
  std::string log_level = "warn";
  // --publish mode (the child)
  std::string publish_keys, url, go_file;
  long rate = 0, count = 0;
  std::int64_t ts_base = 0;
  // --control-child mode (the second control plane): --state DIR --db FILE --url URL --stats FILE
  bool control_child = false;
  std::string state_dir, db_path, stats_file;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "heartbeat_bench: %s\n", what.c_str());
  std::exit(1);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) die(k + " needs a value");
      return argv[++i];
    };
    if (k == "--nodes") a.nodes = std::stoi(val());
    else if (k == "--rates") {
      a.rates.clear();
      std::stringstream ss(val());
      for (std::string r; std::getline(ss, r, ',');) a.rates.push_back(std::stol(r));
    } else if (k == "--seconds") a.seconds = std::stod(val());
    else if (k == "--workers") a.workers = std::stoi(val());
    else if (k == "--publishers") a.publishers = std::stoi(val());
    else if (k == "--flush-ms") a.flush_ms = std::stoi(val());
    else if (k == "--max-count") a.max_count = std::stol(val());
    else if (k == "--controls") a.controls = std::stoi(val());
    else if (k == "--heartbeat-subscriptions") a.heartbeat_subscriptions = std::stoi(val());
    else if (k == "--control-child") a.control_child = true;
    else if (k == "--state") a.state_dir = val();
    else if (k == "--db") a.db_path = val();
    else if (k == "--stats") a.stats_file = val();
    else if (k == "--log-level") a.log_level = val();
    else if (k == "--publish") a.publish_keys = val();
    else if (k == "--url") a.url = val();
    else if (k == "--go") a.go_file = val();
    else if (k == "--rate") a.rate = std::stol(val());
    else if (k == "--count") a.count = std::stol(val());
    else if (k == "--ts-base") a.ts_base = std::stoll(val());
    else die("unknown argument " + k + " (see the comment at the top of bench/heartbeat_bench.cpp)");
  }
  return a;
}

double cpu_seconds_self() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// utime + stime of a process, from /proc/<pid>/stat (fields 14 and 15, in clock ticks).
double cpu_seconds_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::stringstream ss(s.substr(close + 2));
  std::string field;
  double ut = 0, st = 0;
  for (int i = 3; ss >> field; ++i) {
    if (i == 14) ut = std::stod(field);
    if (i == 15) {
      st = std::stod(field);
      break;
    }
  }
  return (ut + st) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The nats-server listening on `port` (NatsServer does not expose its pid).
pid_t find_nats_server(int port) {
  const std::string want = std::to_string(port);
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<std::string> parts;
    std::stringstream ss(cmd);
    for (std::string p; std::getline(ss, p, '\0');) parts.push_back(p);
    if (parts.empty() || parts[0].find("nats-server") == std::string::npos) continue;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i)
      if (parts[i] == "-p" && parts[i + 1] == want) return static_cast<pid_t>(std::stoi(name));
  }
  return -1;
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::shared_ptr<mesh::sdk::Transport> connect_nats(const std::string& url, mesh::loader::LoadedPlugin& keep) {
  auto lp = mesh::loader::load_plugin(MESH_BENCH_PLUGIN_DIR, "transport", "nats");
  if (!lp) die(lp.error().describe());
  keep = *lp;
  auto t = lp->as<mesh::sdk::Transport>();
  if (!t) die("nats is not a transport plugin");
  mesh::sdk::Value cfg = mesh::sdk::Value::object();
  cfg.set("servers", mesh::sdk::Value(mesh::sdk::Value::Array{mesh::sdk::Value(url)}));
  if (auto ok = t->configure(cfg); !ok) die("transport configure: " + ok.error().describe());
  if (auto ok = t->connect(5s, false); !ok) die("transport connect: " + ok.error().describe());
  return t;
}

// --- the publisher (child process) ---------------------------------------------------------------

int publish_main(const Args& a) {
  if (!mesh::common::crypto_init()) die("libsodium");
  (void)mesh::common::init_logging("heartbeat_bench-publisher", "warn");
  std::vector<std::pair<std::string, std::string>> nodes;  // name, heartbeat MAC key (raw)
  {
    std::ifstream f(a.publish_keys);
    for (std::string name, hex; f >> name >> hex;) {
      auto key = mesh::common::from_hex(hex);
      if (!key) die("bad key file");
      nodes.emplace_back(name, *key);
    }
  }
  if (nodes.empty()) die("no nodes in " + a.publish_keys);

  // Precompute every message exactly as mesh-host's heartbeat_loop builds it (core/host/src/
  // daemon.cpp): the body, Mesh-Protocol, Mesh-Node, Mesh-Timestamp and Mesh-MAC.
  const auto t_pre = Clock::now();
  const int P = std::max(1, a.publishers);
  std::vector<std::vector<mesh::sdk::Message>> per(P);
  for (auto& v : per) v.reserve(static_cast<std::size_t>(a.count / P + 1));
  for (long i = 0; i < a.count; ++i) {
    const std::size_t n = static_cast<std::size_t>(i) % nodes.size();
    const std::int64_t ts = a.ts_base + i / static_cast<long>(nodes.size());  // strictly increasing per node
    const auto& [name, key] = nodes[n];
    mesh::sdk::Value hb = mesh::sdk::Value::object();
    hb.set("node", name);
    hb.set("at", mesh::common::format_rfc3339(ts));
    hb.set("applied_revision", static_cast<std::int64_t>(0));
    hb.set("host_version", mesh::protocol::kHostVersion);
    hb.set("state", "idle");
    auto m = mesh::protocol::make_message(mesh::protocol::heartbeat_subject(name), hb.to_json());
    m.set_header(mesh::protocol::kHeaderNode, name);
    mesh::trust::mac_heartbeat(m, name, key, ts);
    per[n % P].push_back(std::move(m));  // one node always on the same connection: its order holds
  }
  const double pre_s = std::chrono::duration<double>(Clock::now() - t_pre).count();

  std::vector<mesh::loader::LoadedPlugin> keep(P);
  std::vector<std::shared_ptr<mesh::sdk::Transport>> conns;
  for (int p = 0; p < P; ++p) conns.push_back(connect_nats(a.url, keep[p]));

  std::printf("ready precomputed=%ld in %.2f s\n", a.count, pre_s);
  std::fflush(stdout);
  while (!fs::exists(a.go_file)) std::this_thread::sleep_for(200us);

  const double cpu0 = cpu_seconds_self();
  const auto t0 = Clock::now();
  std::atomic<long> errors{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < P; ++p) {
    threads.emplace_back([&, p] {
      const auto& msgs = per[p];
      const double rate = a.rate > 0 ? static_cast<double>(a.rate) / P : 0;
      std::size_t sent = 0;
      while (sent < msgs.size()) {
        std::size_t target = msgs.size();
        if (rate > 0) {
          const double el = std::chrono::duration<double>(Clock::now() - t0).count();
          target = std::min(msgs.size(), static_cast<std::size_t>(el * rate) + 1);
          if (sent >= target) {
            std::this_thread::sleep_for(100us);
            continue;
          }
        }
        for (; sent < target; ++sent)
          if (!conns[p]->publish(msgs[sent])) errors.fetch_add(1);
      }
      if (!conns[p]->flush(30s)) errors.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  const double el = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = cpu_seconds_self() - cpu0;
  std::printf("published=%ld elapsed=%.3f rate=%.0f cpu=%.3f errors=%ld\n", a.count, el, a.count / el, cpu,
              errors.load());
  std::printf("done\n");
  std::fflush(stdout);
  for (auto& c : conns) c->close();
  return 0;
}

// --- the control plane side ----------------------------------------------------------------------

double field(const std::string& text, const std::string& key) {
  auto at = text.find(" " + key + "=");
  if (at == std::string::npos) {
    if (text.rfind(key + "=", 0) != 0) return 0;
    at = 0;
  } else {
    ++at;
  }
  return std::stod(text.substr(at + key.size() + 1));
}

// The `sqlite` store plugin on `db_path`, loaded and configured as mesh-control does.
std::shared_ptr<mesh::sdk::Store> open_store(const fs::path& state, const std::string& db_path,
                                             mesh::loader::LoadedPlugin& keep) {
  mesh::loader::LoadOptions lo;
  lo.role = "control";
  lo.state_base = state.string();
  auto sp = mesh::loader::load_plugin(MESH_BENCH_PLUGIN_DIR, "store", "sqlite", lo);
  if (!sp) die(sp.error().describe());
  keep = *sp;
  auto store = sp->as<mesh::sdk::Store>();
  if (!store) die("sqlite is not a store plugin");
  mesh::sdk::Value scfg = mesh::sdk::Value::object();
  scfg.set("path", db_path);
  if (auto ok = store->configure(scfg); !ok) die(ok.error().describe());
  if (auto ok = store->open(); !ok) die(ok.error().describe());
  return store;
}

mesh::control::ControlOptions control_options(const Args& a, const mesh::control::ControlKeys& keys) {
  mesh::control::ControlOptions options;
  options.keys = keys;
  options.workers = static_cast<std::size_t>(a.workers);
  options.heartbeat_flush = std::chrono::milliseconds(a.flush_ms);
  // Ingest capacity is measured, not the per-node policy: each simulated node here sends far more
  // than a host does (50/s at 50,000/s over 1,000 nodes), which the default rate limit would drop.
  options.node_rate = 1e9;
  options.node_burst = 1e9;
  options.heartbeat_subscriptions = static_cast<std::size_t>(std::max(1, a.heartbeat_subscriptions));
  return options;
}

// The counters of one control plane, as the child writes them and the parent adds them up.
std::string stats_text(const mesh::control::ControlStats& s) {
  std::ostringstream o;
  o << "hb_received=" << s.heartbeats_received << " hb_busy=" << s.heartbeats_busy
    << " hb_handled=" << s.heartbeats_handled << " hb_verified=" << s.heartbeats_verified
    << " hb_refused=" << s.heartbeats_refused << " hb_stored=" << s.heartbeats_stored
    << " contacts=" << s.contacts_written << " flushes=" << s.flushes << " flush_failures=" << s.flush_failures
    << " end=1\n";
  return o.str();
}

mesh::control::ControlStats stats_from_text(const std::string& t) {
  mesh::control::ControlStats s;
  if (t.find("end=1") == std::string::npos) return s;
  auto u = [&](const char* k) { return static_cast<std::uint64_t>(field(t, k)); };
  s.heartbeats_received = u("hb_received");
  s.heartbeats_busy = u("hb_busy");
  s.heartbeats_handled = u("hb_handled");
  s.heartbeats_verified = u("hb_verified");
  s.heartbeats_refused = u("hb_refused");
  s.heartbeats_stored = u("hb_stored");
  s.contacts_written = u("contacts");
  s.flushes = u("flushes");
  s.flush_failures = u("flush_failures");
  return s;
}

mesh::control::ControlStats operator+(mesh::control::ControlStats x, const mesh::control::ControlStats& y) {
  x.heartbeats_received += y.heartbeats_received;
  x.heartbeats_busy += y.heartbeats_busy;
  x.heartbeats_handled += y.heartbeats_handled;
  x.heartbeats_verified += y.heartbeats_verified;
  x.heartbeats_refused += y.heartbeats_refused;
  x.heartbeats_stored += y.heartbeats_stored;
  x.contacts_written += y.contacts_written;
  x.flushes += y.flushes;
  x.flush_failures += y.flush_failures;
  return x;
}

std::atomic<bool> g_stop{false};
void on_stop_signal(int) { g_stop.store(true); }

void write_stats_file(const std::string& path, const mesh::control::ControlStats& s) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << stats_text(s);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);  // atomic: the parent reads the old file or the new one
}

// The second control plane (--controls 2): the same store file, its own store object and NATS
// connection, the same keys (read from the state directory the parent made), the same options.
int control_child_main(const Args& a) {
  if (!mesh::common::crypto_init()) die("libsodium");
  if (!mesh::common::init_logging("heartbeat_bench-control2", a.log_level)) die("bad --log-level");
  ::signal(SIGTERM, on_stop_signal);
  ::signal(SIGINT, on_stop_signal);
  auto keys = mesh::control::load_or_create_control_keys(a.state_dir);
  if (!keys) die(keys.error().describe());
  mesh::loader::LoadedPlugin sp_keep, tp_keep;
  auto store = open_store(a.state_dir, a.db_path, sp_keep);
  auto transport = connect_nats(a.url, tp_keep);
  mesh::control::ControlPlane control(store, transport, control_options(a, *keys));
  control.start();
  if (auto ok = control.subscribe(); !ok) die(ok.error().describe());
  std::printf("ready control plane 2, pid %d\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  while (!g_stop.load()) {
    write_stats_file(a.stats_file, control.stats());
    std::this_thread::sleep_for(5ms);
  }
  control.stop();
  write_stats_file(a.stats_file, control.stats());
  transport->close();
  std::printf("stopped\n");
  std::fflush(stdout);
  return 0;
}

std::string read_file_text(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  if (!a.publish_keys.empty()) return publish_main(a);
  if (a.control_child) return control_child_main(a);
  if (a.controls < 1 || a.controls > 2) die("--controls is 1 or 2");

  if (!mesh::common::crypto_init()) die("libsodium");
  if (!mesh::common::init_logging("heartbeat_bench", a.log_level)) die("bad --log-level");
  mesh::testing::TempDir tmp;
  const fs::path dir = tmp.path();
  const fs::path state = dir / "control";
  fs::create_directories(state);
  mesh::testing::NatsServer nats;
  const pid_t nats_pid = find_nats_server(nats.port());

  auto keys = mesh::control::load_or_create_control_keys(state.string());
  if (!keys) die(keys.error().describe());

  mesh::loader::LoadedPlugin sp_keep;
  const std::string db_path = (state / "mesh.db").string();
  auto store = open_store(state, db_path, sp_keep);

  // Enrol N nodes: a token and a real key pair each, through the Store API.
  const auto t_enrol = Clock::now();
  const std::string keys_file = (dir / "heartbeat-keys.txt").string();
  {
    std::ofstream kf(keys_file);
    const std::int64_t now = mesh::common::now_ms();
    for (int i = 0; i < a.nodes; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "hb-%05d", i);
      const auto kp = mesh::common::generate_keypair();
      mesh::sdk::TokenRecord t;
      t.id = "t" + std::to_string(i);
      t.node = name;
      const std::string token = mesh::common::random_token(32);
      t.hash = mesh::common::sha256_hex(token);
      t.created_at_ms = now;
      t.expires_at_ms = now + 3'600'000;
      if (auto ok = store->add_token(t); !ok) die(ok.error().describe());
      auto rec = store->enrol(t.hash, name, mesh::common::to_hex(kp.public_key), now);
      if (!rec) die(rec.error().describe());
      kf << name << ' '
         << mesh::common::to_hex(mesh::trust::heartbeat_key(keys->heartbeat_master, name, rec->generation,
                                                            rec->public_key))
         << '\n';
    }
  }
  std::printf("machine: nproc=%u loadavg=%s\n", std::thread::hardware_concurrency(), loadavg().c_str());
  std::printf("enrolled %d nodes through the Store API in %.1f s; control plane pid %d, nats-server pid %d\n", a.nodes,
              std::chrono::duration<double>(Clock::now() - t_enrol).count(), static_cast<int>(getpid()),
              static_cast<int>(nats_pid));
  std::fflush(stdout);

  mesh::loader::LoadedPlugin tp_keep;
  auto transport = connect_nats(nats.url(), tp_keep);
  mesh::control::ControlPlane control(store, transport, control_options(a, *keys));
  control.start();
  if (auto ok = control.subscribe(); !ok) die(ok.error().describe());

  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) die("readlink /proc/self/exe");
  self[len] = 0;

  // The second control plane, if asked for: its counters come from its stats file.
  const std::string child_stats = (dir / "control2.stats").string();
  std::unique_ptr<mesh::testing::BackgroundProcess> child;
  if (a.controls == 2) {
    child = std::make_unique<mesh::testing::BackgroundProcess>(std::vector<std::string>{
        self, "--control-child", "--state", state.string(), "--db", db_path, "--url", nats.url(), "--stats",
        child_stats, "--workers", std::to_string(a.workers), "--flush-ms", std::to_string(a.flush_ms),
        "--heartbeat-subscriptions", std::to_string(a.heartbeat_subscriptions), "--log-level", a.log_level});
    if (!child->wait_for_output("ready", 60'000)) die("control plane 2 not ready: " + child->stderr_text());
    std::printf("control planes: 2 (this process, and pid %d), one SQLite file, queue group %s\n",
                static_cast<int>(child->pid()), mesh::protocol::kQueueGroup);
  }
  auto child_now = [&] {
    return child ? stats_from_text(read_file_text(child_stats)) : mesh::control::ControlStats{};
  };
  auto all_stats = [&] { return control.stats() + child_now(); };

  std::printf("%8s %8s %10s %10s %10s %10s %8s %8s %8s %10s %10s %7s %7s %7s %s\n", "nodes", "offered", "published",
              "pub/s", "received", "stored", "busy", "refused", "lost", "ingest/s", "rows/s", "cp-cpu", "nats",
              "pub", "loadavg");
  std::int64_t next_ts = mesh::common::now_ms();
  std::int64_t first_go_ms = 0;
  for (const long rate : a.rates) {
    const long count = rate > 0 ? static_cast<long>(rate * a.seconds) : a.max_count;
    const std::int64_t base = std::max(next_ts, mesh::common::now_ms());
    next_ts = base + count / a.nodes + 2;
    const std::string go = (dir / ("go-" + std::to_string(rate))).string();
    mesh::testing::BackgroundProcess pub({self, "--publish", keys_file, "--url", nats.url(), "--go", go, "--rate",
                                          std::to_string(rate), "--count", std::to_string(count), "--ts-base",
                                          std::to_string(base), "--publishers", std::to_string(a.publishers)});
    if (!pub.wait_for_output("ready", 600'000)) die("publisher not ready: " + pub.stderr_text());

    const auto s0 = all_stats();
    const auto c0 = child_now();
    const double cp0 = cpu_seconds_self() + (child ? cpu_seconds_of(child->pid()) : 0);
    const double n0 = nats_pid > 0 ? cpu_seconds_of(nats_pid) : 0;
    const auto t0 = Clock::now();
    if (!first_go_ms) first_go_ms = mesh::common::now_ms();
    std::ofstream(go) << "go\n";

    // Follow the counters until the publisher is done and everything it sent is accounted for
    // (stored, refused, busy) or nothing moved for 3 flush intervals.
    auto last_store = t0;
    auto last_change = t0;
    auto prev = s0;
    bool done = false;
    for (;;) {
      std::this_thread::sleep_for(5ms);
      const auto s = all_stats();
      const auto now = Clock::now();
      if (s.heartbeats_stored != prev.heartbeats_stored) last_store = now;
      if (s.heartbeats_stored != prev.heartbeats_stored || s.heartbeats_received != prev.heartbeats_received ||
          s.heartbeats_handled != prev.heartbeats_handled)
        last_change = now;
      prev = s;
      if (!done) done = pub.stdout_text().find("done") != std::string::npos;
      if (!done) continue;
      const auto in = s.heartbeats_received - s0.heartbeats_received;
      const bool settled = s.heartbeats_busy + s.heartbeats_handled == s.heartbeats_received &&
                           s.heartbeats_stored - s0.heartbeats_stored ==
                               s.heartbeats_verified - s0.heartbeats_verified;
      if ((settled && in >= static_cast<std::uint64_t>(count)) ||
          now - last_change > 3 * std::chrono::milliseconds(a.flush_ms) + 500ms)
        break;
    }
    const auto s = all_stats();
    const auto c1 = child_now();
    const double window = std::chrono::duration<double>(last_store - t0).count();
    const double cp = cpu_seconds_self() + (child ? cpu_seconds_of(child->pid()) : 0) - cp0;
    const double ncpu = nats_pid > 0 ? cpu_seconds_of(nats_pid) - n0 : 0;
    pub.stop();
    const std::string out = pub.stdout_text();
    const double pub_rate = field(out, "rate"), pub_cpu = field(out, "cpu"), pub_el = field(out, "elapsed");
    const auto received = s.heartbeats_received - s0.heartbeats_received;
    const auto stored = s.heartbeats_stored - s0.heartbeats_stored;
    const auto rows = s.contacts_written - s0.contacts_written;
    const double span = std::max(window, pub_el);
    std::printf("%8d %8s %10ld %10.0f %10llu %10llu %8llu %8llu %8lld %10.0f %10.0f %6.2fc %6.2fc %6.2fc %s\n", a.nodes,
                rate > 0 ? std::to_string(rate).c_str() : "max", count, pub_rate,
                static_cast<unsigned long long>(received), static_cast<unsigned long long>(stored),
                static_cast<unsigned long long>(s.heartbeats_busy - s0.heartbeats_busy),
                static_cast<unsigned long long>(s.heartbeats_refused - s0.heartbeats_refused),
                static_cast<long long>(count) - static_cast<long long>(received), window > 0 ? stored / window : 0.0,
                window > 0 ? rows / window : 0.0, cp / span, ncpu / span, pub_el > 0 ? pub_cpu / pub_el : 0.0,
                loadavg().c_str());
    std::printf("         publisher: %s", out.c_str());
    std::printf("         ingest window %.3f s (publishing start → last commit that stored a heartbeat); "
                "flushes %llu, flush failures %llu\n",
                window, static_cast<unsigned long long>(s.flushes - s0.flushes),
                static_cast<unsigned long long>(s.flush_failures - s0.flush_failures));
    if (child)
      std::printf("         control plane 2 (pid %d): received %llu, stored %llu, refused %llu; cp-cpu is both "
                  "processes'\n",
                  static_cast<int>(child->pid()),
                  static_cast<unsigned long long>(c1.heartbeats_received - c0.heartbeats_received),
                  static_cast<unsigned long long>(c1.heartbeats_stored - c0.heartbeats_stored),
                  static_cast<unsigned long long>(c1.heartbeats_refused - c0.heartbeats_refused));
    std::fflush(stdout);
  }
  if (child) child->stop();
  control.stop();
  transport->close();

  // Read the SQLite file back, as another process would: every node's last contact must be there.
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) die("open " + db_path);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT count(*) FROM nodes WHERE last_contact_ms >= ?1", -1, &st, nullptr);
  sqlite3_bind_int64(st, 1, first_go_ms - 1000);
  long seen = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  sqlite3_close(db);
  std::printf("sqlite file check: %ld of %d nodes have a last contact from this run in %s\n", seen, a.nodes,
              db_path.c_str());
  return seen == a.nodes ? 0 : 1;
}
