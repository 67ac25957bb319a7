// Drift scan of 1,000 unchanged file resources through the real file provider (loaded from the
// build tree's plugin folder like mesh-host loads it): every owned resource is read (open with
// O_NOFOLLOW, fstat, SHA-256 of the content) and planned against what was applied. Aim: ≤ 20 ms.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "mesh/common/logging.h"
#include "mesh/engine/declaration.h"
#include "mesh/engine/engine.h"
#include "mesh/loader/loader.h"
#include "mesh/sdk/value.h"

namespace {

using namespace mesh;
namespace fs = std::filesystem;

void BM_DriftScanUnchangedFiles(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  const fs::path dir = fs::temp_directory_path() / ("mesh-drift-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir / "files");
  auto lp = loader::load_plugin(MESH_BENCH_PLUGIN_DIR, "provider", "file");
  if (!lp) {
    st.SkipWithError(lp.error().describe().c_str());
    return;
  }
  auto provider = lp->as<sdk::Provider>();
  (void)provider->configure(sdk::apply_defaults(provider->config_schema(), sdk::Value::object()));
  engine::ProviderRegistry reg;
  (void)reg.add("file", provider);
  sdk::Value resources = sdk::Value::array();
  for (int i = 0; i < n; ++i) {
    sdk::Value r = sdk::Value::object();
    r.set("type", "file");
    r.set("id", (dir / "files" / ("f" + std::to_string(i) + ".conf")).string());
    sdk::Value p = sdk::Value::object();
    p.set("content", "setting = " + std::to_string(i) + "\n" + std::string(512, 'x') + "\n");
    p.set("mode", "0640");
    r.set("properties", std::move(p));
    resources.as_array().push_back(std::move(r));
  }
  sdk::Value doc = sdk::Value::object();
  doc.set("resources", std::move(resources));
  const std::string text = doc.to_json();
  auto decl = engine::parse_declaration(text, reg, {});
  auto sd = engine::StateDir::open((dir / "state").string());
  if (!decl || !sd) {
    st.SkipWithError("setup failed");
    return;
  }
  (void)sd->lock(1000);
  common::PluginLogger log("engine");
  engine::Engine eng(reg, *sd, log);
  sdk::CancelToken cancel;
  auto applied = eng.apply(*decl, text, cancel);
  if (applied.outcome != "applied") {
    st.SkipWithError(("apply failed: " + applied.reason).c_str());
    return;
  }
  std::size_t drifted = 0;
  for (auto _ : st) {
    auto items = eng.scan_drift(cancel);
    drifted += items.size();
    benchmark::DoNotOptimize(items);
  }
  st.counters["drifted"] = static_cast<double>(drifted);
  st.counters["resources"] = n;
  sd->unlock();
  fs::remove_all(dir);
}
BENCHMARK(BM_DriftScanUnchangedFiles)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  (void)common::init_logging("drift_bench", "warn");
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
