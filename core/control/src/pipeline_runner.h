// The pipeline runner of mesh-control (decision record 62): `pipeline.run` reads the pipeline file
// (mesh/control/pipeline.h), takes a run id, writes the run's record (store ns `pipeline_run`, key
// the id zero-padded to 12 digits) and runs its stages in order on a thread of its own; each
// stage's start, end, outcome, log and artifacts are written to the record as they happen. A
// failed stage fails the run and the later stages are never started. A run found `running` when
// mesh-control starts was interrupted by a stop: it is marked failed, saying so. Internal.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "mesh/control/pipeline.h"
#include "mesh/loader/report_plugin.h"
#include "mesh/sdk/cancel.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/stage.h"
#include "mesh/sdk/store.h"
#include "mesh/sdk/value.h"

namespace mesh::control {
class StageRegistry;
}

namespace mesh::control::detail {

/// The key of run `id` in ns `pipeline_run`: 12 digits, zero-padded.
std::string run_key(std::uint64_t id);

class PipelineRunner {
 public:
  /// Called by a DeployFn with the deploy's first answer as soon as the deploy is written (before
  /// any wait for the nodes), so that the run's record names the deploy even if mesh-control stops
  /// during the wait (decision record 75).
  using DeployWrittenFn = std::function<void(const sdk::Value&)>;
  /// Deploys for a stage (StageContext::deploy): operator, module, version, options, and the
  /// callback for the written deploy (may be empty; not called for a dry run).
  using DeployFn = std::function<sdk::Result<sdk::Value>(const std::string&, const std::string&,
                                                         const std::string&, const sdk::Value&,
                                                         const DeployWrittenFn&)>;
  struct Options {
    std::string dir;         ///< [pipelines] dir; "" = no pipelines
    std::string build_user;  ///< [pipelines] build_user, given to every stage as params.build_user
    std::string work_base;   ///< parent of the stages' work directories
    std::shared_ptr<StageRegistry> stages;
    DeployFn deploy;
    /// Where the `junit` report plugin is looked up ([plugins] dir): a stage that deployed gets
    /// the deploy's JUnit report as its artifact `junit` (none when the plugin is not there).
    std::vector<std::string> report_plugin_dirs;
    /// Called with each finished run's record (tests); may be empty.
    std::function<void(const sdk::Value&)> on_finished;
  };
  PipelineRunner(std::shared_ptr<sdk::Store> store, Options options);
  /// Cancels the runs still going and waits for their threads.
  ~PipelineRunner();
  PipelineRunner(const PipelineRunner&) = delete;
  PipelineRunner& operator=(const PipelineRunner&) = delete;

  /// Marks every run recorded as running as failed ("interrupted: mesh-control stopped during the
  /// run"; a stage whose deploy was written: "interrupted after deploy N was written (see mesh
  /// deploy --show N)"). Call once at start, before start(). Errors: the store's (Unsupported: it keeps no
  /// records, and then there is nothing to mark).
  sdk::Result<void> recover(std::int64_t now_ms);

  /// Starts pipeline `name` at `version` for `operator_name`: the file is read and checked, then
  /// every stage's Stage::check (a dry run of a deploy; decision record 72) — bad input: nothing
  /// written, no stage run — then the run record written, the stages started on a thread.
  /// @return the run's record as first written ({"run": id, "state": "running", ...}).
  /// Errors: InvalidArgument (the file, naming file, line and key; the version), NotFound (no
  /// such pipeline), FailedPrecondition (no [pipelines] dir, or no stage plugins), a stage's
  /// check() refusal (its code; the message names the file, the stage and the param: "ship.toml:
  /// stage[1] 'deploy' refuses the run before any stage started: ..."), the store's.
  /// Thread-safe.
  /// `answer`, when set (its render is replaced), is the request whose answer (the record, as ok_answer) is stored in the
  /// record's own write (Store::declare_with without declarations), so that a retry of the request
  /// gets it instead of a second run (decision record 28).
  sdk::Result<sdk::Value> start(const std::string& name, const std::string& version,
                                const std::string& operator_name, std::int64_t now_ms,
                                const std::optional<sdk::RequestAnswer>& answer = std::nullopt);

  /// The record of run `id`. Errors: NotFound on path "run"; the store's. Thread-safe.
  sdk::Result<sdk::Value> show(std::uint64_t id);

  /// Set when the runner stops (mesh-control stopping): long waits of a stage end.
  const sdk::CancelToken& stopping() const noexcept { return stopping_; }

  /// The schema of the settings of stage plugin `plugin` (nullptr: not loaded).
  const sdk::Schema* settings_schema(std::string_view plugin) const;

 private:
  /// Every stage's check(), in order; the first refusal is returned.
  sdk::Result<void> check(const Pipeline& pipeline, const std::string& version, const std::string& operator_name);
  /// What stage `stage` of `pipeline` is given: its settings, `version`, `build_user`.
  sdk::StageInput input_of(const Pipeline& pipeline, const PipelineStage& stage, const std::string& version) const;
  void run(std::uint64_t id, Pipeline pipeline, std::string version, std::string operator_name,
           sdk::Value record, std::uint64_t record_version);
  /// Writes `record` as the next version of run `id`'s record (compare-and-swap on `version`,
  /// which it advances). A failed write is logged: the run goes on.
  void write(std::uint64_t id, const sdk::Value& record, std::uint64_t& version);

  /// The deploy report as JUnit XML, with the `junit` report plugin (loaded at first use).
  /// Errors: the loader's (no such plugin) or the renderer's.
  sdk::Result<std::string> junit(const sdk::Value& deploy_report);

  std::shared_ptr<sdk::Store> store_;
  Options options_;
  std::mutex junit_mu_;
  std::optional<loader::ReportPlugin> junit_;
  sdk::CancelToken stopping_;
  std::mutex mu_;
  /// The runs' threads; a finished one is joined at the next start().
  struct Job {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Job> jobs_;
};

}  // namespace mesh::control::detail
