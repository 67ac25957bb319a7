// The `publish` stage (kind stage): puts .deb files into the mesh's apt repository
// (AptRepository, decision record 58). Config ([stages.publish] of control.toml):
//   repository     the repository directory (default: [repository] dir)
//   codename       the suite/codename of dists/ (default "mesh")
//   component      (default "main")
//   architectures  list (default ["amd64", "arm64"]); `all` packages are in every one
//   origin, label  the Release fields (default "Nox Mesh")
//   tool_timeout   time limit of each tool run (default "5m")
//   registry       host[:port] of a container registry (optional), registry_tls_verify (true)
// The signing key lives in the plugin's state directory (<control state_dir>/plugins/publish/
// gnupg), made at the first start.
//
// Params of a run: {"package": "/path/x.deb", "sha256": "<hex>"} publishes that file (the digest,
// when given, must match); without "package", every artifact of the earlier stages that is an
// object with a "path" ending in ".deb" (and, when it has one, its "sha256") is published.
// In a pipeline run (StageInput::pipeline set, params.version the run's version), every .deb's
// Version must be the run's version, or it with a Debian revision (1.2.3-1) or an epoch
// (2:1.2.3, 2:1.2.3-1): otherwise the stage fails before the repository changes, naming both
// versions and the file (decision record 75). The pipeline file's setting `check_version = false`
// turns that off. `mesh publish FILE` (no pipeline) has no run version and is not checked.
// Artifacts: {"packages": [{"name", "version", "architecture", "sha256", "size", "filename",
// "already"}], "repository": {"codename", "component", "fingerprint"}}.
//
// With {"image": {"name": "app", "tag": "1.2", "archive": "/path/app.tar"}} (archive optional:
// then the one earlier artifact whose path ends in ".tar"), an OCI archive is pushed to the
// registry instead (ImageRegistry); artifacts {"images": [{"name", "tag", "digest",
// "reference": "<registry>/<name>@sha256:..."}]}.
#pragma once

#include <memory>

#include "apt_repository.h"
#include "image_registry.h"
#include "mesh/sdk/stage.h"

namespace mesh::stages::publish {
/// Whether .deb Version `deb_version` is the run's `run_version`: equal, or with a Debian revision
/// (`<run>-<rev>`, rev without '-'), an epoch (`<N>:<run>`) or both. Pure; thread-safe.
bool version_is_the_runs(const std::string& deb_version, const std::string& run_version);
}  // namespace mesh::stages::publish

namespace mesh::stages::publish {

class PublishStage final : public sdk::Stage {
 public:
  explicit PublishStage(const sdk::HostContext& host) : Stage(host) {}
  const sdk::Schema& config_schema() const noexcept override;
  /// The settings of a pipeline file's publish stage: check_version (default true).
  const sdk::Schema& settings_schema() const noexcept override;
  /// The repository (valid after configure()).
  AptRepository* repository() const noexcept { return repository_.get(); }

 protected:
  sdk::Result<void> do_configure(const sdk::Value& config) override;
  sdk::Result<sdk::StageOutput> do_run(const sdk::StageInput& in, sdk::StageContext& context,
                                       const sdk::CancelToken& cancel) override;
  /// Before the run: the stage is configured and a `package`/`sha256`/`image` param has its type.
  sdk::Result<void> do_check(const sdk::StageInput& in, sdk::StageContext& context) override;


 private:
  sdk::Result<sdk::StageOutput> run_image(const sdk::Value& image, sdk::StageContext& context,
                                          const sdk::CancelToken& cancel);

  std::unique_ptr<AptRepository> repository_;
  RegistryOptions registry_;
};

}  // namespace mesh::stages::publish
