// The pipeline runner (pipeline_runner.h, decision record 62).
#include "pipeline_runner.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <utility>

#include "mesh/common/clock.h"
#include "mesh/common/json.h"
#include "mesh/common/logging.h"
#include "mesh/common/text.h"
#include "mesh/common/version_token.h"
#include "mesh/control/stages.h"
#include "service_util.h"

namespace mesh::control::detail {
namespace {

using sdk::ErrorCode;
using sdk::Value;

constexpr const char* kNs = "pipeline_run";
constexpr std::size_t kMaxStoredLine = 1024;
constexpr std::size_t kMaxVersion = 128;

Value now_ts(std::int64_t ms) { return ts(ms); }

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The mutable member `key` of object `v` (Value has only a const find).
Value* member(Value& v, std::string_view key) { return const_cast<Value*>(std::as_const(v).find(key)); }

bool printable_version(const std::string& v) { return v.size() <= kMaxVersion && common::valid_version_token(v); }

}  // namespace

std::string run_key(std::uint64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%012llu", static_cast<unsigned long long>(id));
  return buf;
}

PipelineRunner::PipelineRunner(std::shared_ptr<sdk::Store> store, Options options)
    : store_(std::move(store)), options_(std::move(options)) {}

PipelineRunner::~PipelineRunner() {
  stopping_.cancel();
  std::vector<Job> jobs;
  {
    std::lock_guard lock(mu_);
    jobs.swap(jobs_);
  }
  for (auto& j : jobs)
    if (j.thread.joinable()) j.thread.join();
}

const sdk::Schema* PipelineRunner::settings_schema(std::string_view plugin) const {
  if (!options_.stages) return nullptr;
  auto stage = options_.stages->find(plugin);
  return stage ? &stage->settings_schema() : nullptr;
}

sdk::Result<void> PipelineRunner::recover(std::int64_t now_ms) {
  auto runs = store_->records(kNs, "");
  if (!runs) {
    if (runs.error().code == ErrorCode::Unsupported) return {};
    return sdk::fail(runs.error());
  }
  for (const auto& r : *runs) {
    auto v = common::parse_json(r.value, common::JsonLimits{32u << 20, 64});
    if (!v || !v->is_object() || v->get_string("state") != "running") continue;
    v->set("state", "failed");
    v->set("ended_at", now_ts(now_ms));
    std::string run_error = "interrupted: mesh-control stopped during the run";
    if (Value* stages = member(*v, "stages"); stages && stages->is_array())
      for (auto& s : stages->as_array())
        if (s.get_string("state") == "running") {
          s.set("state", "failed");
          s.set("ended_at", now_ts(now_ms));
          // A deploy written by the stage went out to the nodes: the record says which.
          std::string error = "interrupted: mesh-control stopped during the stage";
          const Value* a = s.find("artifacts");
          const Value* d = a && a->is_object() ? a->find("deploy") : nullptr;
          if (d && d->is_object() && d->find("deploy") && d->find("deploy")->is_int()) {
            const std::string n = std::to_string(d->find("deploy")->as_int());
            error = "interrupted after deploy " + n + " was written (see mesh deploy --show " + n +
                    "): mesh-control stopped during the stage";
            run_error = "stage " + s.get_string("name") + " " + error;
          }
          s.set("error", error);
        }
    v->set("error", run_error);
    sdk::RecordWrite w{kNs, r.key, v->to_json(), r.version};
    if (auto ok = store_->put_records({w}, now_ms); !ok)
      return sdk::fail(ok.error());
    common::logger()->warn("pipeline run {} was interrupted by a stop of mesh-control: marked failed", r.key);
  }
  return {};
}

sdk::Result<Value> PipelineRunner::start(const std::string& name, const std::string& version,
                                         const std::string& operator_name, std::int64_t now_ms,
                                         const std::optional<sdk::RequestAnswer>& answer) {
  if (!printable_version(version))
    return sdk::fail(ErrorCode::InvalidArgument,
                     "'" + common::printable(version, 64) + "' is not a version (" + common::kVersionTokenForm + ": it goes into build commands and file names)", "version");
  if (options_.dir.empty())
    return sdk::fail(ErrorCode::FailedPrecondition,
                     "this control plane runs no pipelines: its control.toml has no [pipelines] dir", "pipeline");
  MESH_TRY(pipeline, load_pipeline(options_.dir, name,
                                   [this](std::string_view plugin) { return settings_schema(plugin); }));
  if (auto checked = check(pipeline, version, operator_name); !checked) return sdk::fail(checked.error());
  MESH_TRY(id, store_->next_sequence(kNs));

  Value record = Value::object();
  record.set("run", static_cast<std::int64_t>(id));
  record.set("pipeline", pipeline.name);
  record.set("version", version);
  record.set("operator", operator_name);
  record.set("file", pipeline.file);
  record.set("state", "running");
  record.set("created_at", now_ts(now_ms));
  record.set("ended_at", Value(nullptr));
  record.set("error", Value(nullptr));
  Value::Array stages;
  for (const auto& s : pipeline.stages) {
    Value v = Value::object();
    v.set("name", s.name);
    v.set("plugin", s.plugin);
    v.set("state", "pending");
    v.set("started_at", Value(nullptr));
    v.set("ended_at", Value(nullptr));
    v.set("error", Value(nullptr));
    v.set("log", Value::array());
    v.set("log_dropped", 0);
    v.set("artifacts", Value::object());
    stages.push_back(std::move(v));
  }
  record.set("stages", Value(std::move(stages)));
  sdk::RecordWrite first{kNs, run_key(id), record.to_json(), 0};
  std::uint64_t version_written = 1;
  if (answer) {
    sdk::RequestAnswer a = *answer;
    a.render = [&record](const sdk::DeliveryRecord&) { return ok_answer(record); };
    MESH_TRY(none, store_->declare_with({}, {first}, now_ms, 1, a));
    (void)none;
  } else {
    MESH_TRY(written, store_->put_records({first}, now_ms));
    if (!written.empty()) version_written = written.front().version;
  }
  common::logger()->info("pipeline run={} pipeline={} version={} operator={} started", id, pipeline.name, version,
                         operator_name);
  std::lock_guard lock(mu_);
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (it->done->load()) {
      it->thread.join();
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  jobs_.push_back(Job{std::thread([this, id, pipeline = std::move(pipeline), version, operator_name, record,
                                   version_written, done]() mutable {
                        run(id, std::move(pipeline), version, operator_name, std::move(record), version_written);
                        done->store(true);
                      }),
                      done});
  return record;
}

sdk::StageInput PipelineRunner::input_of(const Pipeline& pipeline, const PipelineStage& stage,
                                         const std::string& version) const {
  sdk::StageInput in;
  in.pipeline = pipeline.name;
  in.params = stage.settings;
  in.params.set("version", version);
  in.params.set("build_user", options_.build_user);
  return in;
}

sdk::Result<void> PipelineRunner::check(const Pipeline& pipeline, const std::string& version,
                                        const std::string& operator_name) {
  for (std::size_t i = 0; i < pipeline.stages.size(); ++i) {
    const PipelineStage& ps = pipeline.stages[i];
    const std::string where = pipeline.file + ": stage[" + std::to_string(i) + "] '" + ps.name + "'";
    std::shared_ptr<sdk::Stage> stage = options_.stages ? options_.stages->find(ps.plugin) : nullptr;
    if (!stage)
      return sdk::fail(ErrorCode::FailedPrecondition, where + ": stage plugin '" + ps.plugin + "' is not loaded");
    ControlStageContext::Options o;
    o.operator_name = operator_name;
    o.work_base = options_.work_base;
    if (options_.deploy)
      o.deploy = [deploy = options_.deploy](const std::string& who, const std::string& module, const std::string& v,
                                            const Value& opts) { return deploy(who, module, v, opts, {}); };
    o.dry_run_only = true;
    o.on_log = [name = ps.name](std::string_view line) {
      common::logger()->debug("pipeline check stage={}: {}", name, common::printable(std::string(line), 512));
    };
    MESH_TRY(context, ControlStageContext::create(std::move(o), "check-"));
    if (auto ok = stage->check(input_of(pipeline, ps, version), *context); !ok) {
      sdk::Error e = ok.error();
      e.message = where + " refuses the run before any stage started: " + e.describe();
      e.path.clear();
      common::logger()->info("pipeline pipeline={} version={} operator={} refused: {}", pipeline.name, version,
                             operator_name, e.message);
      return sdk::fail(e);
    }
  }
  return {};
}

sdk::Result<Value> PipelineRunner::show(std::uint64_t id) {
  MESH_TRY(r, store_->record(kNs, run_key(id)));
  if (!r) return sdk::fail(ErrorCode::NotFound, "pipeline run " + std::to_string(id) + " does not exist", "run");
  MESH_TRY(v, common::parse_json(r->value, common::JsonLimits{32u << 20, 64}));
  return v;
}

sdk::Result<std::string> PipelineRunner::junit(const Value& deploy_report) {
  std::lock_guard lock(junit_mu_);
  if (!junit_) {
    MESH_TRY(plugin, loader::ReportPlugin::load(options_.report_plugin_dirs, "junit", "control"));
    junit_.emplace(std::move(plugin));
  }
  return junit_->render(deploy_report, common::now_ms());
}

void PipelineRunner::write(std::uint64_t id, const Value& record, std::uint64_t& version) {
  auto ok = store_->put_records({sdk::RecordWrite{kNs, run_key(id), record.to_json(), version}}, wall_ms());
  if (!ok || ok->empty()) {
    common::logger()->warn("pipeline run={}: its record is not written: {}", id,
                           ok ? "no record returned" : ok.error().describe());
    return;
  }
  version = ok->front().version;
}

void PipelineRunner::run(std::uint64_t id, Pipeline pipeline, std::string version, std::string operator_name,
                         Value record, std::uint64_t record_version) {
  Value artifacts = Value::object();
  std::string failure;
  auto& stages = member(record, "stages")->as_array();
  for (std::size_t i = 0; i < pipeline.stages.size(); ++i) {
    const PipelineStage& ps = pipeline.stages[i];
    Value& sv = stages[i];
    if (!failure.empty() || stopping_.cancelled()) {
      sv.set("state", "not_started");
      continue;
    }
    sv.set("state", "running");
    sv.set("started_at", now_ts(wall_ms()));
    write(id, record, record_version);

    sdk::Error error{ErrorCode::Internal, "", {}};
    bool ok = false;
    std::vector<std::string> lines;
    std::size_t dropped = 0;
    std::optional<Value> deploy_report;
    std::shared_ptr<sdk::Stage> stage = options_.stages ? options_.stages->find(ps.plugin) : nullptr;
    if (!stage) {
      error = sdk::Error{ErrorCode::FailedPrecondition, "stage plugin '" + ps.plugin + "' is no longer loaded", {}};
    } else {
      ControlStageContext::Options o;
      o.run_id = id;
      o.operator_name = operator_name;
      o.work_base = options_.work_base;
      o.artifacts = artifacts;
      // The stage's deploy, kept (the last one) for its JUnit report. As soon as it is written
      // (before the stage waits for the nodes) the record names it: artifact `deploy` {deploy,
      // delivery, module, version}, so that a run interrupted during the wait still says which
      // deploy went out (decision record 75).
      if (options_.deploy)
        o.deploy = [this, &deploy_report, &sv, &record, &record_version, id](
                       const std::string& who, const std::string& module, const std::string& v, const Value& opts) {
          auto written = [&](const Value& first) {
            Value summary = Value::object();
            for (const char* k : {"deploy", "delivery", "module", "version"})
              if (const Value* x = first.find(k)) summary.set(k, *x);
            if (!summary.find("module")) summary.set("module", module);
            if (!summary.find("version")) summary.set("version", v);
            const Value* a = sv.find("artifacts");
            Value artifacts = a && a->is_object() ? *a : Value::object();
            artifacts.set("deploy", std::move(summary));
            sv.set("artifacts", std::move(artifacts));
            write(id, record, record_version);
          };
          auto r = options_.deploy(who, module, v, opts, written);
          if (r) deploy_report = *r;
          return r;
        };
      o.on_log = [id, name = ps.name](std::string_view line) {
        common::logger()->debug("pipeline run={} stage={}: {}", id, name, common::printable(std::string(line), 512));
      };
      auto context = ControlStageContext::create(std::move(o), "run-" + std::to_string(id) + "-");
      if (!context) {
        error = context.error();
      } else {
        auto out = stage->run(input_of(pipeline, ps, version), **context, stopping_);
        if (out) {
          ok = true;
          artifacts.set(ps.name, out->artifacts);
          sv.set("artifacts", out->artifacts);
        } else {
          error = out.error();
        }
        lines = (*context)->log_lines();
        dropped = (*context)->dropped_lines();
      }
    }
    // A stage that deployed (succeeded or not): the deploy report and its JUnit rendering are
    // artifacts of the stage, for CI to collect.
    if (deploy_report) {
      Value a = sv.find("artifacts") && sv.find("artifacts")->is_object() ? *sv.find("artifacts") : Value::object();
      // (A failed stage's artifacts are only the summary written with its deploy: the report
      // replaces it.)
      if (!a.find("deploy") || !ok) a.set("deploy", *deploy_report);
      if (auto xml = junit(*deploy_report)) {
        a.set("junit", *xml);
      } else {
        a.set("junit_error", xml.error().describe());
        common::logger()->warn("pipeline run={} stage={}: no JUnit report of its deploy: {}", id, ps.name,
                               xml.error().describe());
      }
      sv.set("artifacts", a);
      if (ok) artifacts.set(ps.name, a);
    }
    Value::Array log;
    for (auto& l : lines) log.emplace_back(common::printable(l, kMaxStoredLine));
    sv.set("log", Value(std::move(log)));
    sv.set("log_dropped", static_cast<std::int64_t>(dropped));
    sv.set("ended_at", now_ts(wall_ms()));
    if (ok) {
      sv.set("state", "succeeded");
      common::logger()->info("pipeline run={} stage={} succeeded", id, ps.name);
    } else {
      sv.set("state", "failed");
      sv.set("error", error.describe());
      sv.set("error_code", std::string(sdk::to_string(error.code)));
      failure = "stage " + ps.name + " failed: " + error.describe();
      common::logger()->warn("pipeline run={} stage={} failed: {}", id, ps.name, error.describe());
    }
    write(id, record, record_version);
  }
  record.set("state", failure.empty() ? "succeeded" : "failed");
  record.set("error", failure.empty() ? Value(nullptr) : Value(failure));
  record.set("ended_at", now_ts(wall_ms()));
  write(id, record, record_version);
  common::logger()->info("pipeline run={} pipeline={} {}", id, pipeline.name, record.get_string("state"));
  if (options_.on_finished) options_.on_finished(record);
}

}  // namespace mesh::control::detail
