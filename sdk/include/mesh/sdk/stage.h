// Nox Mesh SDK — stage plugins (build, publish, deploy) for control-plane pipelines.
// The kind exists so that the ABI and loader know it; pipelines arrive in a later release.
#pragma once

#include <string>

#include "mesh/sdk/cancel.h"
#include "mesh/sdk/plugin.h"
#include "mesh/sdk/value.h"

namespace mesh::sdk {

/// Input and output of a stage, as JSON-shaped data so fields can be added without an ABI break.
struct StageInput {
  std::string pipeline;  ///< pipeline name
  Value params = Value::object();
};
struct StageOutput {
  Value artifacts = Value::object();  ///< e.g. {"package": {"path": ..., "sha256": ...}}
};

class Stage : public Plugin {
 public:
  using Plugin::Plugin;
  /// Runs the stage. Errors: Failed (with the tool's own message), Cancelled, Timeout.
  Result<StageOutput> run(const StageInput& in, const CancelToken& cancel) noexcept {
    return guard("run", [&] { return do_run(in, cancel); });
  }

 protected:
  virtual Result<StageOutput> do_run(const StageInput& in, const CancelToken& cancel) = 0;
};

}  // namespace mesh::sdk
