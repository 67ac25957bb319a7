// The operator API's pipelines (docs/protocol.md "API", decision record 62): pipeline.run starts a
// run of a pipeline file on the runner (pipeline_runner.h) and answers with its first record;
// pipeline.show answers with a run's record. A stage's deploy goes through the `deploy` operation
// of the table, on behalf of the operator who asked for the run.
#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

#include "fields.h"
#include "service.h"
#include "service_util.h"
#include "mesh/common/clock.h"
#include "mesh/common/duration.h"
#include "mesh/common/logging.h"

namespace mesh::control::detail {

using sdk::ErrorCode;
using sdk::Value;

std::unique_ptr<PipelineRunner> Service::make_pipeline_runner() {
  PipelineRunner::Options o;
  o.dir = options_.pipelines.dir;
  o.build_user = options_.pipelines.build_user;
  o.work_base = options_.work_dir;
  o.stages = options_.stages;
  o.report_plugin_dirs = options_.pipelines.report_plugin_dirs;
  o.deploy = [this](const std::string& who, const std::string& module, const std::string& version,
                    const Value& opts, const PipelineRunner::DeployWrittenFn& written) {
    return deploy_for_stage(who, module, version, opts, written);
  };
  auto runner = std::make_unique<PipelineRunner>(store_, std::move(o));
  if (!options_.pipelines.dir.empty())
    if (auto ok = runner->recover(common::now_ms()); !ok)
      common::logger()->warn("pipeline runs interrupted by the last stop are not marked failed: {}",
                             ok.error().describe());
  return runner;
}

sdk::Result<Value> Service::deploy_for_stage(const std::string& operator_name, const std::string& module,
                                             const std::string& version, const Value& opts,
                                             const std::function<void(const Value&)>& written) {
  const Operation* deploy = find_operation("deploy");
  if (!deploy)
    return sdk::fail(ErrorCode::Unsupported, "this control plane has no deploy operation to run from a stage");
  Value params = opts.is_object() ? opts : Value::object();
  params.set("module", module);
  params.set("version", version);
  // `wait` is the stage's, as `mesh deploy --wait` is the CLI's: deploy.show polled until no node
  // is outstanding or the time is up.
  std::optional<std::chrono::milliseconds> wait;
  if (const Value* w = params.find("wait")) {
    if (!w->is_string()) return sdk::fail(ErrorCode::InvalidArgument, "must be a duration", "wait");
    MESH_TRY(d, common::parse_duration(w->as_string()));
    wait = d;
    params.erase("wait");
  }
  // The operator who asked for the run (pipeline.run needs deployer, as deploy does); no nonce:
  // the deploy's answer is the stage's, kept in the run's record.
  OperatorRecord who{operator_name, "deployer", {}, 0, {}};
  Admission none;
  Value refusal = Value::object();
  MESH_TRY(report, (this->*(deploy->handler))(ApiCall{params, common::now_ms(), who, none, &refusal}));
  // The deploy is written: said before any wait, so that the run's record names it even if
  // mesh-control stops while the nodes apply it.
  if (written && !params.get_bool("dry_run", false) && report.find("deploy") && report.find("deploy")->is_int())
    written(report);
  const Operation* show = find_operation("deploy.show");
  if (!wait || !show || !report.find("deploy") || !report.find("deploy")->is_int()) return report;
  const auto deadline = std::chrono::steady_clock::now() + *wait;
  auto outstanding = [](const Value& r) {
    const Value* o = r.find("outstanding");
    return o && o->is_array() && !o->as_array().empty();
  };
  while (outstanding(report) && std::chrono::steady_clock::now() < deadline &&
         !(pipelines_ && pipelines_->stopping().cancelled())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    Value q = Value::object();
    q.set("deploy", *report.find("deploy"));
    Value r2 = Value::object();
    auto again = (this->*(show->handler))(ApiCall{q, common::now_ms(), who, none, &r2});
    if (!again) return sdk::fail(again.error());
    report = std::move(*again);
  }
  return report;
}

sdk::Result<Value> Service::api_pipeline_run(const ApiCall& call) {
  Fields f(call.params);
  MESH_TRY(name, f.string("pipeline"));
  MESH_TRY(version, f.string("version"));
  std::optional<sdk::RequestAnswer> answer;
  if (call.request.ticket && !call.request.nonce.empty())
    answer = sdk::RequestAnswer{call.request.signer, call.request.nonce, {}};
  return pipelines_->start(name, version, call.who.name, call.now_ms, answer);
}

sdk::Result<Value> Service::api_pipeline_show(const ApiCall& call) {
  Fields f(call.params);
  MESH_TRY(run, f.integer("run", 1));
  return pipelines_->show(static_cast<std::uint64_t>(run));
}

}  // namespace mesh::control::detail
