// The deploy write: one Store::declare_with for N nodes with the sqlite store, as `mesh deploy`
// makes it — every node's declaration rendered (render_declaration, ~1 KiB of resources each) and
// signed (Ed25519, trust::sign_declaration, as for its push), a compare-and-swap on each node's
// latest revision, a composition per revision, the deploy record rendered with the delivery, all
// in one transaction. A harness, not a Google Benchmark (one write of N nodes is the unit).
//
//   deploy_write_bench [--dir DIR] [--runs R] [N ...]     (default: 1000 10000, 5 runs)
//
// DIR (default: a fresh directory under $TMPDIR or /tmp, removed at the end) holds the database:
// put it on the disk whose fsync you mean to measure. The N nodes are inserted straight into the
// file in one transaction before the store is opened (enrolling 10,000 nodes one transaction at
// a time is not what is measured). Each run prints:
//   write     the whole declare_with, renders and signatures included (what a deploy waits for)
//   prepare   the renders and signatures alone (the same work outside the store)
//   store     declare_with with bodies made beforehand (the transaction alone)
//   ahead     renders and signatures first, on every core (the revision is known: expected + 1),
//             then declare_with handing the bodies over — both steps, wall time
// with the CPU time of the writing thread (cpu) beside the wall time of write and store, and the
// load average (/proc/loadavg) before and after. Medians over the runs are printed last.
#include <sqlite3.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mesh/common/crypto.h"
#include "mesh/common/trust.h"
#include "mesh/control/declaration.h"
#include "mesh/sdk/logger.h"
#include "mesh/sdk/transport.h"
#include "mesh/sdk/value.h"
#include "sqlite_store.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using mesh::sdk::Value;

namespace {

// CPU time of the calling thread, ms: what the work costs whatever else the machine runs.
double thread_cpu_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string node_name(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "web-%05d", i);
  return buf;
}

// ~1 KiB of resources once rendered: a config file with per-node content, a package, a service.
Value resources_for(const std::string& node, int deploy) {
  Value::Array rs;
  Value file = Value::object();
  file.set("type", "file");
  file.set("id", "/etc/nginx/conf.d/site.conf");
  Value props = Value::object();
  std::string content = "# managed by nox mesh, deploy " + std::to_string(deploy) + "\nserver {\n  listen 80;\n  server_name " +
                        node + ".example.internal;\n";
  while (content.size() < 640) content += "  location /app" + std::to_string(content.size()) + " { proxy_pass http://127.0.0.1:8080; }\n";
  content += "}\n";
  props.set("content", content);
  props.set("mode", "0644");
  props.set("owner", "root");
  file.set("properties", props);
  rs.push_back(file);
  Value pkg = Value::object();
  pkg.set("type", "package");
  pkg.set("id", "nginx");
  Value pp = Value::object();
  pp.set("version", "1.22.1-9");
  pkg.set("properties", pp);
  rs.push_back(pkg);
  Value svc = Value::object();
  svc.set("type", "service");
  svc.set("id", "nginx");
  Value sp = Value::object();
  sp.set("state", "running");
  sp.set("enabled", true);
  sp.set("restart_on", Value(Value::Array{Value("file:/etc/nginx/conf.d/site.conf")}));
  svc.set("properties", sp);
  svc.set("requires", Value(Value::Array{Value("package:nginx")}));
  rs.push_back(svc);
  return Value(std::move(rs));
}

std::string composition_for(int deploy) {
  return R"({"own":[],"modules":{"web":{"version":"1.)" + std::to_string(deploy) +
         R"(.0","resources":["file:/etc/nginx/conf.d/site.conf","package:nginx","service:nginx"]}},)"
         R"("operator":"bench","cause":"deploy","deploy":)" +
         std::to_string(deploy) + "}";
}

void check(int rc, sqlite3* db, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
    throw std::runtime_error(std::string(what) + ": " + sqlite3_errmsg(db));
}

// Inserts N enrolled nodes in one transaction (the store's schema exists: it was opened once).
void insert_nodes(const std::string& path, int n) {
  sqlite3* db = nullptr;
  check(sqlite3_open(path.c_str(), &db), db, "open");
  check(sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr), db, "begin");
  sqlite3_stmt* st = nullptr;
  check(sqlite3_prepare_v2(db,
                           "INSERT INTO nodes (name, enrolled_at_ms, generation, public_key) VALUES (?1, 1000, 1, '00')",
                           -1, &st, nullptr),
        db, "prepare");
  for (int i = 0; i < n; ++i) {
    const std::string name = node_name(i);
    sqlite3_bind_text(st, 1, name.c_str(), -1, SQLITE_TRANSIENT);
    check(sqlite3_step(st), db, "insert");
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  check(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), db, "commit");
  sqlite3_close(db);
}

struct Run {
  double write = 0, prepare = 0, store = 0, ahead = 0;
  double write_cpu = 0, store_cpu = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  std::string dir_arg;
  int runs = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) {
      dir_arg = argv[++i];
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (!a.empty() && a[0] != '-') {
      sizes.push_back(std::atoi(a.c_str()));
    } else {
      std::fprintf(stderr, "usage: deploy_write_bench [--dir DIR] [--runs R] [N ...]\n");
      return 2;
    }
  }
  if (sizes.empty()) sizes = {1000, 10000};

  fs::path dir;
  bool remove_dir = false;
  if (dir_arg.empty()) {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/deploy-write-bench-XXXXXX";
    if (!::mkdtemp(tmpl.data())) return 1;
    dir = tmpl;
    remove_dir = true;
  } else {
    dir = dir_arg;
    fs::create_directories(dir);
  }

  mesh::sdk::NullLogger logger;
  mesh::sdk::HostContext host;
  host.logger = &logger;
  host.role = "tool";
  const auto keys = mesh::common::generate_keypair();
  int status = 0;

  std::printf("deploy write, sqlite store in %s, %d runs per size\n", dir.c_str(), runs);
  for (int n : sizes) {
    const std::string path = (dir / ("deploy-" + std::to_string(n) + ".db")).string();
    fs::remove(path);
    fs::remove(path + "-wal");
    fs::remove(path + "-shm");
    auto make_store = [&] {
      auto store = std::make_unique<mesh::stores::sqlite::SqliteStore>(host);
      Value cfg = Value::object();
      cfg.set("path", path);
      if (auto r = store->configure(cfg); !r) throw std::runtime_error(r.error().describe());
      if (auto r = store->open(); !r) throw std::runtime_error(r.error().describe());
      return store;
    };
    make_store().reset();  // creates the schema
    insert_nodes(path, n);
    auto store = make_store();

    std::vector<std::string> names(n);
    for (int i = 0; i < n; ++i) names[i] = node_name(i);
    std::vector<std::uint64_t> latest(n, 0);
    std::vector<Run> results;
    int deploy = 0;
    for (int run = 0; run < runs; ++run) {
      const std::string load_before = loadavg();
      Run r;
      // (1) The deploy write: render + sign inside declare_with, CAS on every node, deploy record.
      {
        ++deploy;
        std::vector<Value> resources(n);
        for (int i = 0; i < n; ++i) resources[i] = resources_for(names[i], deploy);
        const std::string comp = composition_for(deploy);
        std::vector<std::string> signatures(n);
        std::vector<mesh::sdk::DeclarationWrite> writes(n);
        const auto t0 = Clock::now();
        const double c0 = thread_cpu_ms();
        for (int i = 0; i < n; ++i) {
          writes[i].node = names[i];
          writes[i].expected_revision = latest[i];
          writes[i].composition = comp;
          writes[i].render = [&, i](std::uint64_t revision) {
            std::string body = mesh::control::render_declaration(resources[i], names[i], revision);
            mesh::sdk::Message m;
            m.body = body;
            mesh::trust::sign_declaration(m, names[i], revision, keys.secret_key);
            signatures[i] = *m.header(mesh::trust::kHeaderSignature);
            return body;
          };
        }
        mesh::sdk::RecordWrite rec;
        rec.ns = "deploy";
        char key[16];
        std::snprintf(key, sizeof key, "%012d", deploy);
        rec.key = key;
        rec.expected_version = 0;
        rec.render = [&](const mesh::sdk::DeliveryRecord& d) {
          return R"({"module":"web","version":"1.)" + std::to_string(deploy) + R"(.0","delivery":)" +
                 std::to_string(d.id) + R"(,"nodes":)" + std::to_string(d.targets.size()) + "}";
        };
        auto d = store->declare_with(writes, {rec}, 1000 + deploy, 10, std::nullopt);
        r.write = ms_since(t0);
        r.write_cpu = thread_cpu_ms() - c0;
        if (!d || d->targets.size() != static_cast<std::size_t>(n)) {
          std::fprintf(stderr, "declare_with failed: %s\n", d ? "wrong targets" : d.error().describe().c_str());
          return 1;
        }
        for (int i = 0; i < n; ++i) latest[i] = d->targets[i].revision;  // targets sorted by node = names order
      }
      // (2) The renders and signatures alone.
      std::vector<std::string> bodies(n);
      {
        ++deploy;
        std::vector<Value> resources(n);
        for (int i = 0; i < n; ++i) resources[i] = resources_for(names[i], deploy);
        const auto t0 = Clock::now();
        for (int i = 0; i < n; ++i) {
          bodies[i] = mesh::control::render_declaration(resources[i], names[i], latest[i] + 1);
          mesh::sdk::Message m;
          m.body = bodies[i];
          mesh::trust::sign_declaration(m, names[i], latest[i] + 1, keys.secret_key);
        }
        r.prepare = ms_since(t0);
      }
      // (3) The transaction alone, with those bodies.
      {
        const std::string comp = composition_for(deploy);
        std::vector<mesh::sdk::DeclarationWrite> writes(n);
        const auto t0 = Clock::now();
        const double c0 = thread_cpu_ms();
        for (int i = 0; i < n; ++i) {
          writes[i].node = names[i];
          writes[i].expected_revision = latest[i];
          writes[i].composition = comp;
          writes[i].render = [&, i](std::uint64_t) { return bodies[i]; };
        }
        auto d = store->declare_with(writes, {}, 1000 + deploy, 10, std::nullopt);
        r.store = ms_since(t0);
        r.store_cpu = thread_cpu_ms() - c0;
        if (!d) {
          std::fprintf(stderr, "declare_with failed: %s\n", d.error().describe().c_str());
          return 1;
        }
        for (int i = 0; i < n; ++i) latest[i] = d->targets[i].revision;
      }
      // (4) Ahead: with compare-and-swap the revision is known before the write (expected + 1),
      // so the renders and signatures run first, on every core, outside the store's lock; the
      // store's render only hands the body over. Total wall time of both steps.
      {
        ++deploy;
        std::vector<Value> resources(n);
        for (int i = 0; i < n; ++i) resources[i] = resources_for(names[i], deploy);
        const std::string comp = composition_for(deploy);
        std::vector<std::string> signatures(n);
        const auto t0 = Clock::now();
        const int workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        std::vector<std::thread> pool;
        for (int w = 0; w < workers; ++w)
          pool.emplace_back([&, w] {
            for (int i = w; i < n; i += workers) {
              bodies[i] = mesh::control::render_declaration(resources[i], names[i], latest[i] + 1);
              mesh::sdk::Message m;
              m.body = bodies[i];
              mesh::trust::sign_declaration(m, names[i], latest[i] + 1, keys.secret_key);
              signatures[i] = *m.header(mesh::trust::kHeaderSignature);
            }
          });
        for (auto& t : pool) t.join();
        std::vector<mesh::sdk::DeclarationWrite> writes(n);
        for (int i = 0; i < n; ++i) {
          writes[i].node = names[i];
          writes[i].expected_revision = latest[i];
          writes[i].composition = comp;
          writes[i].render = [&, i](std::uint64_t) { return bodies[i]; };
        }
        auto d = store->declare_with(writes, {}, 1000 + deploy, 10, std::nullopt);
        r.ahead = ms_since(t0);
        if (!d) {
          std::fprintf(stderr, "declare_with failed: %s\n", d.error().describe().c_str());
          return 1;
        }
        for (int i = 0; i < n; ++i) latest[i] = d->targets[i].revision;
      }
      std::printf("N=%d run %d: write %.1f ms (cpu %.1f)  prepare %.1f ms  store %.1f ms (cpu %.1f)  ahead %.1f ms  body %zu B  "
                  "load %s -> %s\n",
                  n, run + 1, r.write, r.write_cpu, r.prepare, r.store, r.store_cpu, r.ahead, bodies[0].size(),
                  load_before.c_str(), loadavg().c_str());
      std::fflush(stdout);
      results.push_back(r);
    }
    std::vector<double> w, p, s, a, wc, sc;
    for (const auto& r : results) {
      wc.push_back(r.write_cpu);
      sc.push_back(r.store_cpu);
      w.push_back(r.write);
      p.push_back(r.prepare);
      s.push_back(r.store);
      a.push_back(r.ahead);
    }
    std::printf("N=%d median of %d: write %.1f ms (%.1f us/node; cpu %.1f ms)  prepare %.1f ms  store %.1f ms (cpu %.1f ms)  "
                "ahead %.1f ms (%.1f us/node)  file %.1f MB\n",
                n, runs, median(w), 1000.0 * median(w) / n, median(wc), median(p), median(s), median(sc), median(a),
                1000.0 * median(a) / n,
                static_cast<double>(fs::file_size(path) + (fs::exists(path + "-wal") ? fs::file_size(path + "-wal") : 0)) /
                    1e6);
    store.reset();
  }
  if (remove_dir) fs::remove_all(dir);
  return status;
}
