// Parse + validate + order of a 10,000-file-resource declaration (the budget is 5 ms), with an
// in-memory provider whose schema mirrors the file provider's (content, mode, owner, group,
// ensure) and whose validate() checks that the path is absolute, as the file provider does.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "mesh/common/crypto.h"
#include "mesh/common/json.h"
#include "mesh/engine/declaration.h"

namespace {

using namespace mesh;

const sdk::HostContext& bench_host() {
  static sdk::NullLogger logger;
  static const sdk::HostContext h{MESH_SDK_ABI_MAJOR, MESH_SDK_ABI_MINOR, &logger, "", "tool"};
  return h;
}

class BenchFileProvider final : public sdk::Provider {
 public:
  BenchFileProvider() : Provider(bench_host()) {
    schema_.name = "file";
    schema_.attributes = {
        {"content", sdk::ValueType::String, false, "file content"},
        {"content_base64", sdk::ValueType::String, false, "file content, base64"},
        {"mode", sdk::ValueType::String, false, "octal mode", {}, sdk::Value("0644")},
        {"owner", sdk::ValueType::String, false, "user name"},
        {"group", sdk::ValueType::String, false, "group name"},
        {"ensure", sdk::ValueType::String, false, "present or absent", {"present", "absent"},
         sdk::Value("present")},
    };
    schema_.exclusive = {{"content", "content_base64"}};
  }
  const sdk::Schema& schema() const noexcept override { return schema_; }

 protected:
  sdk::Result<void> do_validate(const sdk::ValidateRequest& req, sdk::ValidateResponse& resp) override {
    const std::string& p = req.resource.rid.id;
    if (p.empty() || p[0] != '/' || p.find("/../") != std::string::npos ||
        p.find("//") != std::string::npos)
      resp.errors.push_back({sdk::ErrorCode::InvalidArgument, "must be an absolute normalised path", "id"});
    return {};
  }
  sdk::Result<void> do_read(const sdk::ReadRequest&, sdk::ReadResponse&) override { return {}; }
  sdk::Result<void> do_plan(const sdk::PlanRequest& req, sdk::PlanResponse& resp) override {
    resp.plan = sdk::Plan{req.desired.rid, sdk::PlanAction::None, {}, req.desired};
    return {};
  }
  sdk::Result<void> do_apply(const sdk::ApplyRequest&, sdk::ApplyResponse&) override { return {}; }
  sdk::Result<void> do_remove(const sdk::RemoveRequest&, sdk::RemoveResponse&) override { return {}; }

 private:
  sdk::Schema schema_;
};

/// A declaration of `n` file resources as the control plane writes it (compact JSON from
/// sdk::Value::to_json). Compact: content and mode on each, owner and group on one in ten, and
/// one in ten requires the resource before it: 10,000 of them fit the broker's 1 MiB. Full:
/// content, mode, owner and group on each.
std::string make_declaration(int n, bool full) {
  sdk::Value::Array resources;
  resources.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    sdk::Value r = sdk::Value::object();
    r.set("type", "file");
    r.set("id", "/etc/app/conf.d/" + std::to_string(i) + ".conf");
    sdk::Value p = sdk::Value::object();
    p.set("content", "key = " + std::to_string(i) + "\n");
    p.set("mode", "0640");
    if (full || i % 10 == 0) {
      p.set("owner", "root");
      p.set("group", "app");
    }
    r.set("properties", std::move(p));
    if (i % 10 == 9)
      r.set("requires", sdk::Value::Array{sdk::Value("file:/etc/app/conf.d/" + std::to_string(i - 1) + ".conf")});
    resources.push_back(std::move(r));
  }
  sdk::Value root = sdk::Value::object();
  root.set("node", "web-01");
  root.set("revision", 42);
  root.set("resources", std::move(resources));
  return root.to_json();
}

/// parse_declaration alone; destroying the result (which an apply does much later) is not timed.
void BM_ParseDeclaration(benchmark::State& state) {
  const std::string text = make_declaration(static_cast<int>(state.range(0)), state.range(1) != 0);
  engine::ProviderRegistry registry;
  (void)registry.add("file", std::make_shared<BenchFileProvider>());
  engine::ParseOptions opts;
  opts.max_bytes = 4u << 20;
  opts.allow_revision = true;
  for (auto _ : state) {
    auto d = engine::parse_declaration(text, registry, opts);
    if (!d) state.SkipWithError(d.error().message.c_str());
    benchmark::DoNotOptimize(d);
    state.PauseTiming();
    d = tl::unexpected<sdk::Error>(sdk::Error{});
    state.ResumeTiming();
  }
  state.counters["bytes"] = static_cast<double>(text.size());
}
BENCHMARK(BM_ParseDeclaration)
    ->ArgNames({"resources", "full"})
    ->Args({10000, 0})
    ->Args({10000, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();  // "Time" is wall-clock; "CPU" is the calling thread's (the digest of a
                      // large text runs on a second thread, overlapped with parsing)

// The parts, to see where the time goes.
void BM_ParseJsonOnly(benchmark::State& state) {
  const std::string text = make_declaration(static_cast<int>(state.range(0)), false);
  common::JsonLimits limits;
  limits.max_bytes = 4u << 20;
  for (auto _ : state) benchmark::DoNotOptimize(common::parse_json(text, limits));
}
BENCHMARK(BM_ParseJsonOnly)->Arg(10000)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DigestOnly(benchmark::State& state) {
  const std::string text = make_declaration(static_cast<int>(state.range(0)), false);
  for (auto _ : state) benchmark::DoNotOptimize(common::sha256_hex(text));
}
BENCHMARK(BM_DigestOnly)->Arg(10000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
