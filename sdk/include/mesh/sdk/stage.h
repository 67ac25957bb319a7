// Nox Mesh SDK — stage plugins (build, publish, deploy) for control-plane pipelines.
//
// A stage plugin is loaded by mesh-control (from `[stages] load = [...]` of control.toml, in the
// plugin search path, kind "stage") and configured once with its `[stages.<name>]` table. It is
// run by the pipeline runner (one stage of a run) or by an API operation (`mesh publish` runs the
// `publish` stage alone). A stage plugin runs inside mesh-control with its privileges: it is
// trusted like any plugin the operator installs (docs/security.md "Stage plugins").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "mesh/sdk/cancel.h"
#include "mesh/sdk/plugin.h"
#include "mesh/sdk/value.h"

namespace mesh::sdk {

/// Input and output of a stage, as JSON-shaped data so fields can be added without an ABI break.
struct StageInput {
  std::string pipeline;  ///< pipeline name ("" when run alone, e.g. by `mesh publish`)
  Value params = Value::object();  ///< the stage's settings in the pipeline file, or the operation's
};
struct StageOutput {
  Value artifacts = Value::object();  ///< e.g. {"package": {"path": ..., "sha256": ...}}
};

/// The narrow part of the control plane a stage may use, given to Stage::run by mesh-control.
/// Valid only during that run() call: a stage keeps no reference to it. Not thread-safe: call it
/// from the thread run() was called on (or serialise the calls yourself).
class StageContext {
 public:
  virtual ~StageContext() = default;

  /// The pipeline run this stage belongs to (its key in the store's `pipeline_run` records), or
  /// 0 outside a pipeline (a stage run alone by an operation such as `publish`).
  virtual std::uint64_t run_id() const noexcept = 0;

  /// The name of the operator who asked for the run (recorded with what the stage writes).
  virtual std::string operator_name() const = 0;

  /// A directory for this run of this stage: fresh and empty when run() starts, owned by the
  /// control plane's user, mode 0700, removed with everything in it after run() returns. An
  /// artifact that must outlive the run is copied elsewhere by the stage (and named in its
  /// StageOutput). Input files given to the stage (a `.deb` uploaded by `mesh publish`) are
  /// inside it.
  virtual std::string work_dir() const = 0;

  /// The artifacts of the stages of this run that finished before this one, by stage name:
  /// {"<stage>": {...that stage's StageOutput::artifacts...}}; an empty object for the first
  /// stage or outside a pipeline. The reference is valid during run().
  virtual const Value& artifacts() const = 0;

  /// Appends one line to this stage's log (stored with the run, shown by `mesh pipeline show`;
  /// bounded: the control plane keeps the last lines). A newline inside `line` starts a new
  /// line. Never fails.
  virtual void log(std::string_view line) = 0;

  /// Deploys `module` at `version` as `mesh deploy` does, on behalf of operator_name():
  /// `options` is an object of the deploy's options {"dry_run": bool, "waves": "1,10%,100%",
  /// "min_applied": int, "wave_timeout": "10m", "wait": "1m"} (absent keys: the defaults of
  /// `mesh deploy`). Returns the deploy report (INTERFACE `mesh deploy --output json`). Errors:
  /// those of the `deploy` operation — NotFound (unknown module or version), InvalidArgument
  /// (resources failing a node's schema, conflicting resources), FailedPrecondition, the store's
  /// errors; Unsupported when this control plane cannot deploy from a stage.
  virtual Result<Value> deploy(const std::string& module, const std::string& version,
                               const Value& options) = 0;
};

class Stage : public Plugin {
 public:
  using Plugin::Plugin;
  /// The settings this stage takes from a pipeline file's `[[stage]]` table (every key but
  /// `plugin` and `name`): the pipeline runner checks the file against it before a run starts and
  /// refuses an unknown key or a wrong type naming the file, the line and the key (decision record
  /// 61). They arrive in StageInput::params with defaults filled in, plus `version` (the run's)
  /// and `build_user` (control.toml `[pipelines] build_user`), which the runner sets. Default: no
  /// settings. Thread-safe; the reference lives as long as the plugin.
  virtual const Schema& settings_schema() const noexcept {
    static const Schema none{};
    return none;
  }
  /// Runs the stage once. `in`: the pipeline and the stage's params; `context`: the control plane
  /// as far as the stage may use it (valid during this call only); `cancel`: set when the run is
  /// cancelled, the control plane stops or the stage's time limit passes — a long stage polls it
  /// and returns Cancelled. Errors: Failed (with the tool's own message, e.g. its last output
  /// lines), InvalidArgument (bad params, naming the param in `path`), Cancelled, Timeout.
  /// Exceptions from do_run are returned as Internal. Called on a worker thread of mesh-control;
  /// runs of different stages (or of one stage) may be concurrent unless the plugin says
  /// otherwise in its documentation.
  Result<StageOutput> run(const StageInput& in, StageContext& context, const CancelToken& cancel) noexcept {
    return guard("run", [&] { return do_run(in, context, cancel); });
  }

  /// Checks this stage of a run before any stage of the run starts (decision record 72): the
  /// pipeline runner calls check() for every stage of the pipeline, in order, before it writes
  /// the run's record, so that bad input is refused before a build runs or a repository
  /// changes. A stage refuses here what it can know is wrong without doing its work: a setting's
  /// value, a program or user that does not exist, what the control plane can tell it.
  /// `in`: what run() will be given (params with defaults filled in, `version`, `build_user`).
  /// `context`: as for run(), except that deploy() is a **dry run** (whatever `options` says: it
  /// writes nothing and returns the dry run's report, or the refusal the deploy would meet),
  /// artifacts() is empty (no stage has run) and run_id() is 0 (no run exists yet); work_dir()
  /// is a fresh directory removed when check() returns. Must change nothing outside work_dir()
  /// and be quick (no build, no upload). Returns nothing when the stage may run. Errors:
  /// InvalidArgument (a param's value, naming it in `path`), NotFound (e.g. an unknown module or
  /// version), FailedPrecondition (e.g. the stage is not configured), or whatever deploy()
  /// answered; any error refuses the run — `mesh pipeline run` exits 2 and nothing is written.
  /// Exceptions from do_check are returned as Internal. Thread-safety as run(). Default (a stage
  /// that does not override do_check): checks nothing.
  Result<void> check(const StageInput& in, StageContext& context) noexcept {
    return guard("check", [&] { return do_check(in, context); });
  }

 protected:
  virtual Result<StageOutput> do_run(const StageInput& in, StageContext& context,
                                     const CancelToken& cancel) = 0;
  /// See check(). Declared after do_run (its slot is appended to the vtable).
  virtual Result<void> do_check(const StageInput& /*in*/, StageContext& /*context*/) { return {}; }
};

}  // namespace mesh::sdk
