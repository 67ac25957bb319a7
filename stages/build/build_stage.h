// The `build` stage plugin (decision record 60). Settings in a pipeline file's [[stage]] table:
//
//   command = ["dpkg-deb", "--build", "/srv/src/hello", "hello_{{version}}_all.deb"]  # required
//   artifacts = ["*.deb"]          # files of the work directory to keep, each with its sha256
//   timeout = "30m"                # then the command and everything it started are killed
//   environment = {DEB_BUILD_OPTIONS = "nocheck"}
//   max_artifact_size = "1GiB"     # a larger artifact fails the stage, nothing is kept
//   max_artifacts_total = "4GiB"   # all of this stage's artifacts together
//
// `{{version}}` (the run's --version), `{{run}}` (the run id) and `{{pipeline}}` are replaced in
// the command's arguments and the environment's values; any other `{{...}}` is refused. The
// command runs without a shell, as the control plane's `[pipelines] build_user` (never root), in a
// fresh directory under `work_root`, with a fixed environment (build_environment()). A non-zero
// exit, a timeout or a pattern matching no file fails the stage with the command's last output
// lines. The artifacts are copied to `<plugin state>/artifacts/<run>/` (the newest `keep_runs`
// runs are kept) and given to later stages as {"files": [{name, path, sha256, size}]}.
//
// Config (`[stages.build]` of control.toml): work_root (default "/tmp"), keep_runs (default 20).
// At configure, the `mesh-build-*` directories a killed mesh-control left in work_root are
// removed: one mesh-control owns its work_root (decision record 74).
#pragma once

#include <string>

#include "mesh/sdk/stage.h"

namespace mesh::stages::build {

class BuildStage : public sdk::Stage {
 public:
  using sdk::Stage::Stage;
  const sdk::Schema& config_schema() const noexcept override;
  /// command, artifacts, timeout, environment, max_artifact_size, max_artifacts_total (see above).
  const sdk::Schema& settings_schema() const noexcept override;

 protected:
  sdk::Result<void> do_configure(const sdk::Value& config) override;
  sdk::Result<sdk::StageOutput> do_run(const sdk::StageInput& in, sdk::StageContext& context,
                                       const sdk::CancelToken& cancel) override;
  /// Before the run: the settings, the placeholders, the build user and the program (all that
  /// do_run checks before it starts the command).
  sdk::Result<void> do_check(const sdk::StageInput& in, sdk::StageContext& context) override;

 private:
  /// What do_run and do_check both work out from the params: the command (placeholders
  /// substituted with `run`), the user, the time limit, the extra environment and the patterns.
  struct Prepared;
  sdk::Result<Prepared> prepare(const sdk::StageInput& in, std::uint64_t run) const;
  /// Removes the `mesh-build-*` directories of work_root that no running build uses, logging
  /// each (a mesh-control that died during a build left them). Called by do_configure.
  void remove_leftovers();
  std::string work_root_ = "/tmp";
  std::int64_t keep_runs_ = 20;
};

/// Replaces {{version}}, {{run}} and {{pipeline}} in `text`. Errors: InvalidArgument on `path`
/// naming any other placeholder (or an unclosed one). Thread-safe.
sdk::Result<std::string> substitute(const std::string& text, const std::string& version, std::uint64_t run,
                                    const std::string& pipeline, const std::string& path);

}  // namespace mesh::stages::build
