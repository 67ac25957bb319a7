// Rendering and composing a module for many nodes (mesh/fleet/fleet.h): what a deploy does per
// node before its one store write. The module is the shape of a typical web role: a ~1 KiB
// file whose content uses node.name, a label and a fact on every line, a templated package and
// a service that requires both. Each node has its own name and labels, so no two renders are
// alike. Arg: the number of nodes. Cases: render without a cache (every template parsed per
// node), render with one TemplateCache for the deploy, and render + compose with the node's own
// resources + diff against its previous declaration (the whole per-node compose step).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "mesh/fleet/fleet.h"

namespace {

using namespace mesh;

fleet::Module bench_module() {
  std::string content;
  while (content.size() < 1024)
    content += "server {{node.name}} role {{labels.role}} rack {{labels.rack}} os {{facts.os.id}}\\n";
  const std::string text = R"({"module": "web", "version": "1.4.2", "resources": [
    {"type": "file", "id": "/etc/nginx/sites/{{node.name}}.conf",
     "properties": {"content": ")" + content + R"(", "mode": "0644", "owner": "root"}},
    {"type": "package", "id": "nginx-{{facts.arch}}", "properties": {"version": "present"}},
    {"type": "service", "id": "nginx.service", "properties": {"running": true},
     "requires": ["package:nginx-{{facts.arch}}", "file:/etc/nginx/sites/{{node.name}}.conf"]}]})";
  auto m = fleet::parse_module(text, "bench");
  if (!m) std::abort();
  return *m;
}

std::vector<fleet::NodeContext> bench_nodes(std::size_t n) {
  std::vector<fleet::NodeContext> nodes;
  nodes.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    fleet::NodeContext c;
    c.name = "web-" + std::to_string(i);
    c.labels = {{"role", "web"}, {"rack", "r" + std::to_string(i % 40)}};
    c.facts = {{"os.id", "debian"}, {"os.version_id", "12"}, {"arch", "amd64"}};
    nodes.push_back(std::move(c));
  }
  return nodes;
}

void BM_RenderNoCache(benchmark::State& state) {
  const auto m = bench_module();
  const auto nodes = bench_nodes(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    for (const auto& n : nodes) {
      auto r = fleet::render_module(m, n);
      benchmark::DoNotOptimize(r);
    }
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_RenderCached(benchmark::State& state) {
  const auto m = bench_module();
  const auto nodes = bench_nodes(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    fleet::TemplateCache cache;  // one per deploy
    for (const auto& n : nodes) {
      auto r = fleet::render_module(m, n, cache);
      benchmark::DoNotOptimize(r);
    }
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_RenderComposeDiff(benchmark::State& state) {
  const auto m = bench_module();
  const auto nodes = bench_nodes(static_cast<std::size_t>(state.range(0)));
  sdk::Value own = sdk::Value::array();
  sdk::Value hosts = sdk::Value::object();
  hosts.set("type", "file");
  hosts.set("id", "/etc/hosts");
  hosts.set("properties", sdk::Value::object());
  own.as_array().push_back(hosts);
  for (auto _ : state) {
    fleet::TemplateCache cache;
    for (const auto& n : nodes) {
      auto r = fleet::render_module(m, n, cache);
      auto composed = fleet::compose({{"own", own}, {"module web@1.4.2", std::move(*r)}});
      auto changes = fleet::diff(own, *composed);
      benchmark::DoNotOptimize(changes);
    }
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

}  // namespace

BENCHMARK(BM_RenderNoCache)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RenderCached)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RenderComposeDiff)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
