// The `publish` stage (kind stage): puts .deb files into the mesh's apt repository
// (AptRepository, decision record 58). Config ([stages.publish] of control.toml):
//   repository     the repository directory (default: [repository] dir)
//   codename       the suite/codename of dists/ (default "mesh")
//   component      (default "main")
//   architectures  list (default ["amd64", "arm64"]); `all` packages are in every one
//   origin, label  the Release fields (default "Nox Mesh")
//   tool_timeout   time limit of each tool run (default "5m")
// The signing key lives in the plugin's state directory (<control state_dir>/plugins/publish/
// gnupg), made at the first start.
//
// Params of a run: {"package": "/path/x.deb", "sha256": "<hex>"} publishes that file (the digest,
// when given, must match); without "package", every artifact of the earlier stages that is an
// object with a "path" ending in ".deb" (and, when it has one, its "sha256") is published.
// Artifacts: {"packages": [{"name", "version", "architecture", "sha256", "size", "filename",
// "already"}], "repository": {"codename", "component", "fingerprint"}}.
#pragma once

#include <memory>

#include "apt_repository.h"
#include "mesh/sdk/stage.h"

namespace mesh::stages::publish {

class PublishStage final : public sdk::Stage {
 public:
  explicit PublishStage(const sdk::HostContext& host) : Stage(host) {}
  const sdk::Schema& config_schema() const noexcept override;
  /// The repository (valid after configure()).
  AptRepository* repository() const noexcept { return repository_.get(); }

 protected:
  sdk::Result<void> do_configure(const sdk::Value& config) override;
  sdk::Result<sdk::StageOutput> do_run(const sdk::StageInput& in, sdk::StageContext& context,
                                       const sdk::CancelToken& cancel) override;

 private:
  std::unique_ptr<AptRepository> repository_;
};

}  // namespace mesh::stages::publish
