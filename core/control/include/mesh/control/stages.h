// Stage plugins in mesh-control (decision record 57): the StageRegistry loads the plugins named in
// control.toml `[stages] load = [...]` (kind "stage", through the loader and the `[plugins] dir`
// search path), checks each `[stages.<name>]` table against the plugin's config_schema() and
// configures it, before anything else is started; and a StageContext for one run of one stage
// (a fresh work directory, the log, the artifacts of earlier stages, deploy).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/control/config.h"
#include "mesh/loader/loader.h"
#include "mesh/sdk/cancel.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/schema.h"
#include "mesh/sdk/stage.h"
#include "mesh/sdk/value.h"

namespace mesh::control {

/// The schema of the `[stages]` table itself: `load`, a list of stage plugin names (its
/// sub-tables `[stages.<name>]` are the plugins' own and are checked against their schemas).
const sdk::Schema& stages_table_schema();

/// The loaded and configured stage plugins of a control plane. Built once at start; then
/// read-only, so every method is thread-safe.
class StageRegistry {
 public:
  /// An empty registry (no `[stages] load`): find() finds nothing.
  StageRegistry() = default;

  /// Loads every plugin in `config.stages_load` from `config.plugin_dirs` as kind "stage" with
  /// `options` (role "control", state base the control state_dir: each stage keeps its files in
  /// `<state_dir>/plugins/<name>`), checks its `[stages.<name>]` table (absent: empty) against
  /// its config_schema() with defaults filled in, and configures it. A key the schema knows but
  /// the table leaves out is filled from the control plane's config where one corresponds: a
  /// `repository` key from `[repository] dir`. Errors, all InvalidArgument naming the file, line
  /// and key (exit 2 for mesh-control): a plugin that cannot be loaded ("control.toml:12:
  /// stages.load: no stage plugin 'x': ... (stage plugins in DIR: build, publish)"), a plugin of
  /// another kind, an unknown or wrong key in its table, a configure() refusal (its path under
  /// `stages.<name>`), a `[stages.<name>]` table for a plugin not in `load`.
  static sdk::Result<std::shared_ptr<StageRegistry>> load(const ControlConfig& config,
                                                          const loader::LoadOptions& options);

  /// Registers an already configured stage under `name` (for tests and statically linked
  /// stages). Not thread-safe: only before the registry is shared. Errors: AlreadyExists.
  sdk::Result<void> add(const std::string& name, std::shared_ptr<sdk::Stage> stage,
                        std::string version = "");

  /// The stage named `name`, or nullptr. The pointer shares ownership of the plugin library.
  std::shared_ptr<sdk::Stage> find(std::string_view name) const;
  /// The names of the loaded stages, sorted.
  std::vector<std::string> names() const;
  /// `names()` as "build, publish", or "none": for messages naming what an operator could mean.
  std::string describe() const;
  /// The version string of stage `name` from its descriptor, or "" when unknown.
  std::string version(std::string_view name) const;

 private:
  struct Entry {
    std::shared_ptr<sdk::Stage> stage;
    std::string version;
  };
  std::map<std::string, Entry, std::less<>> stages_;
};

/// What a stage's deploy() call does: `StageContext::deploy` forwards to it with the run's
/// operator. Supplied by whoever runs the stage (the pipeline runner); empty: deploy() answers
/// Unsupported.
using StageDeployFn = std::function<sdk::Result<sdk::Value>(
    const std::string& operator_name, const std::string& module, const std::string& version,
    const sdk::Value& options)>;

/// The StageContext of one run of one stage in mesh-control. Its work directory is made by
/// create() and removed, with everything in it, by the destructor. Not thread-safe (as
/// sdk::StageContext).
class ControlStageContext final : public sdk::StageContext {
 public:
  struct Options {
    std::uint64_t run_id = 0;          ///< 0 outside a pipeline
    std::string operator_name;         ///< who asked
    std::string work_base;             ///< parent of the work directory (created 0700)
    sdk::Value artifacts = sdk::Value::object();  ///< earlier stages' artifacts by stage name
    StageDeployFn deploy;              ///< may be empty
    /// A context for Stage::check(): deploy() forwards with `dry_run` forced to true.
    bool dry_run_only = false;
    std::size_t max_log_lines = 1000;  ///< older lines are dropped (counted in dropped_lines())
    /// Also called with every line logged (e.g. to the control plane's own log), or empty.
    std::function<void(std::string_view)> on_log;
  };

  /// Makes a fresh work directory `<work_base>/<prefix>XXXXXX` (mkdtemp, 0700; `work_base`
  /// created 0700 when missing). Errors: Failed naming the directory and the system's reason.
  static sdk::Result<std::unique_ptr<ControlStageContext>> create(Options options,
                                                                  std::string_view prefix = "stage-");
  ~ControlStageContext() override;
  ControlStageContext(const ControlStageContext&) = delete;
  ControlStageContext& operator=(const ControlStageContext&) = delete;

  std::uint64_t run_id() const noexcept override { return options_.run_id; }
  std::string operator_name() const override { return options_.operator_name; }
  std::string work_dir() const override { return work_dir_; }
  const sdk::Value& artifacts() const override { return options_.artifacts; }
  void log(std::string_view line) override;
  sdk::Result<sdk::Value> deploy(const std::string& module, const std::string& version,
                                 const sdk::Value& options) override;

  /// The lines logged so far (the last Options::max_log_lines of them), oldest first.
  const std::vector<std::string>& log_lines() const noexcept { return lines_; }
  /// How many older lines were dropped to keep the bound.
  std::size_t dropped_lines() const noexcept { return dropped_; }

 private:
  explicit ControlStageContext(Options options) : options_(std::move(options)) {}
  Options options_;
  std::string work_dir_;
  std::vector<std::string> lines_;
  std::size_t dropped_ = 0;
};

}  // namespace mesh::control
