// Measures SqliteStore::touch throughput. Not a test (timings depend on the disk); run by hand:
//
//   cmake --build BUILD --target sqlite_store_touch_throughput
//   BUILD/tests/stores/sqlite/sqlite_store_touch_throughput [DIR] [NODES] [BATCH] [BATCHES]
//
// Enrols NODES nodes, then times BATCHES touch() calls of BATCH heartbeats each, spread over the
// nodes round-robin, each batch one durable transaction (synchronous=FULL, as in production).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "connection.h"
#include "mesh/sdk/logger.h"
#include "sqlite_store.h"

int main(int argc, char** argv) {
  using namespace mesh;
  namespace fs = std::filesystem;
  const fs::path dir = argc > 1 ? fs::path(argv[1]) : fs::temp_directory_path();
  const int nodes = argc > 2 ? std::atoi(argv[2]) : 5000;
  const int batch = argc > 3 ? std::atoi(argv[3]) : 1000;
  const int batches = argc > 4 ? std::atoi(argv[4]) : 200;
  const fs::path file = dir / ("mesh-touch-throughput-" + std::to_string(::getpid()) + ".db");

  sdk::NullLogger logger;
  sdk::HostContext host;
  host.logger = &logger;
  int rc = 0;
  {
    stores::sqlite::SqliteStore store(host);
    sdk::Value config = sdk::Value::object();
    config.set("path", file.string());
    if (auto r = store.configure(config); !r) {
      std::fprintf(stderr, "configure: %s\n", r.error().describe().c_str());
      return 1;
    }
    if (auto r = store.open(); !r) {
      std::fprintf(stderr, "open: %s\n", r.error().describe().c_str());
      return 1;
    }
    for (int i = 0; i < nodes; ++i) {
      const std::string name = "node-" + std::to_string(i);
      sdk::TokenRecord t{"t" + std::to_string(i),
                         name,
                         stores::sqlite::sha256_hex(name),
                         0,
                         1'000'000,
                         false,
                         std::nullopt,
                         false};
      if (!store.add_token(t) || !store.enrol(t.hash, name, "key", 1)) {
        std::fprintf(stderr, "enrol %s failed\n", name.c_str());
        return 1;
      }
      (void)store.set_briefing(name, std::string(4096, 'b'), true);  // realistic row neighbours
    }
    std::vector<std::vector<sdk::ContactUpdate>> work(batches);
    std::int64_t at = 1000;
    int next = 0;
    for (auto& b : work)
      for (int i = 0; i < batch; ++i, ++at, next = (next + 1) % nodes)
        b.push_back({"node-" + std::to_string(next), at, 0, "0.1.0", "idle", at, 1});  // generation 1: as verified

    const auto start = std::chrono::steady_clock::now();
    for (const auto& b : work)
      if (auto r = store.touch(b); !r) {
        std::fprintf(stderr, "touch: %s\n", r.error().describe().c_str());
        rc = 1;
        break;
      }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double total = static_cast<double>(batch) * batches;
    std::printf(
        "touch: %d nodes, %d batches of %d: %.0f updates in %.3f s = %.0f updates/s "
        "(%.2f ms per batch)\n",
        nodes, batches, batch, total, secs, total / secs, secs * 1000 / batches);
  }
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(file.string() + suffix, ec);
  return rc;
}
