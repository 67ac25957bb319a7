// The `deploy` stage plugin (decision record 62): the last stage of a pipeline, deploying a module
// at the run's version through the control plane (StageContext::deploy, as `mesh deploy` does —
// one write per wave). Settings in a pipeline file's [[stage]] table:
//
//   module = "hello"             # required: the module to deploy at the run's --version
//   waves = "1,10%,100%"         # optional, as mesh deploy --waves
//   min_applied = "90%"          # optional, as mesh deploy --min-applied
//   wave_timeout = "10m"         # optional, as mesh deploy --wave-timeout
//   wait = "5m"                  # optional: wait this long for the nodes to apply
//   fail_on_outstanding = false  # a node still outstanding after `wait` fails the stage
//
// The stage fails when the deploy is refused, halted, or has a failed node (and with
// fail_on_outstanding, an outstanding one); its artifact is the deploy report: {"deploy": {...}}.
// No config of its own.
#pragma once

#include "mesh/sdk/stage.h"

namespace mesh::stages::deploy {

class DeployStage : public sdk::Stage {
 public:
  using sdk::Stage::Stage;
  /// module, waves, min_applied, wave_timeout, wait, fail_on_outstanding (see above).
  const sdk::Schema& settings_schema() const noexcept override;

 protected:
  sdk::Result<sdk::StageOutput> do_run(const sdk::StageInput& in, sdk::StageContext& context,
                                       const sdk::CancelToken& cancel) override;
  /// Before the run: the settings, and a dry run of the deploy (the module and version exist,
  /// the waves parse, every selected node's declaration passes its schemas and has no conflict)
  /// — refused before a build runs or a package is published.
  sdk::Result<void> do_check(const sdk::StageInput& in, sdk::StageContext& context) override;

 private:
  /// The deploy a stage's params ask for. Errors: InvalidArgument naming the param.
  struct Request {
    std::string module, version;
    sdk::Value options;  ///< waves, min_applied, wave_timeout, wait (as StageContext::deploy takes them)
    bool fail_on_outstanding = false;
  };
  sdk::Result<Request> request_of(const sdk::StageInput& in) const;
};

/// Why `report` (a deploy report, INTERFACE `mesh deploy --output json`) fails the stage, or ""
/// when it does not: halted, failed nodes (each with its resource and reason), outstanding nodes
/// when `fail_on_outstanding`. Pure.
std::string deploy_failure(const sdk::Value& report, bool fail_on_outstanding);

}  // namespace mesh::stages::deploy
