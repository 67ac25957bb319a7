// Nox Mesh test support — a private podman for tests (library mesh_test_podman).
//
// What works on the Debian 12 build machines (podman 4.3, runc, hybrid cgroup v1/v2, root, no
// registry), measured while writing the container provider:
//   * plain `podman` with these global flags, no extra namespaces:
//       --root <dir>/root --runroot <dir>/run --tmpdir <dir>/tmp
//       --cgroup-manager=cgroupfs --events-backend=file --runtime runc
//     and these run/create flags (without the ulimits runc fails with "error setting rlimits for
//     ready process: error setting rlimit type 7: operation not permitted"):
//       --ulimit nofile=1024:20000 --ulimit nproc=1024:1024 --network=none
//   * `unshare --mount --cgroup` is not needed for podman to work; its only effect would be to
//     keep the overlay mounts out of the host's mount table, and the teardown here unmounts them.
//     With cgroupfs, containers land in /libpod_parent/libpod-<id> of each hierarchy (outside
//     the test's own memory cgroup).
//   * `podman system reset` is never used: it also deletes network definitions, which live in
//     host-wide folders whatever --root says.
//
// Test images are made without a registry: a root filesystem of busybox-static (bin/busybox plus
// symlinks sh, sleep, echo, cat, env, true, false, ls) is tarred and `podman import`ed;
// tests refer to it by digest (`localhost/mesh-test@sha256:…`).
//
// Use in a test binary: register PodmanEnvironment once, then call shared_podman_sandbox() from
// tests. When podman, runc, busybox or tar are missing, or the kernel or runtime refuses to run a
// container, the environment skips every test of the binary with a message saying which.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "mesh/sdk/value.h"

namespace mesh::testing {

/// What a podman command did.
struct PodmanResult {
  /// The exit status, -N when killed by signal N (-9 after the timeout), 127 when podman could
  /// not be started (the reason is in `err`).
  int exit_code = -1;
  std::string out;
  std::string err;
  bool ok() const { return exit_code == 0; }
};

/// An image the sandbox imported.
struct TestImage {
  std::string tag;        ///< e.g. localhost/mesh-test:latest
  std::string reference;  ///< by digest: localhost/mesh-test@sha256:<manifest digest>
  std::string id;         ///< image ID, 64 hex digits (no "sha256:")
};

/// A podman whose storage, run state and temporary files live in a private folder, removed with
/// everything in it (containers, images, mounts) by the destructor. Not thread-safe.
class PodmanSandbox {
 public:
  /// Sets up the folder, checks the prerequisites, imports the busybox image and runs one
  /// container as a smoke test. Returns nullptr with the reason in `why_not` when this machine
  /// cannot run containers (a reason to skip, not to fail).
  static std::unique_ptr<PodmanSandbox> create(std::string& why_not);
  /// Removes every container (`rm --all --force --time 0`), image and volume, unmounts whatever
  /// is still mounted below the folder and deletes it. Never throws.
  ~PodmanSandbox();
  PodmanSandbox(const PodmanSandbox&) = delete;
  PodmanSandbox& operator=(const PodmanSandbox&) = delete;

  /// Absolute path of the podman program.
  const std::string& podman() const { return podman_; }
  /// --root/--runroot/--tmpdir/--cgroup-manager/--events-backend/--runtime, as above.
  const std::vector<std::string>& global_args() const { return global_args_; }
  /// --ulimit …/--network=none, as above.
  const std::vector<std::string>& run_args() const { return run_args_; }
  const std::filesystem::path& dir() const { return dir_; }
  /// The busybox image every sandbox has.
  const TestImage& image() const { return image_; }

  /// Runs `podman <global_args> <args>` (no shell), at most `timeout_ms`.
  PodmanResult run(const std::vector<std::string>& args, int timeout_ms = 60000) const;

  /// Imports another busybox image under `tag` (e.g. "localhost/mesh-other:latest") whose root
  /// filesystem also holds /marker with `marker` in it, so its digest differs. Importing under a
  /// tag that exists moves the tag. Throws std::runtime_error when podman fails.
  TestImage import_image(const std::string& tag, const std::string& marker) const;

  /// A `[provider.container]` table for this sandbox: engine podman, binary, global_args,
  /// run_args, settle, timeout 2m, stop_timeout 0s (test containers need no grace: `sleep` as PID 1
  /// ignores SIGTERM, so any grace would be waited out in full).
  sdk::Value provider_config(const std::string& settle = "500ms") const;

 private:
  PodmanSandbox() = default;
  std::filesystem::path dir_;
  std::string podman_;
  std::vector<std::string> global_args_;
  std::vector<std::string> run_args_;
  TestImage image_;
  std::string busybox_;
  std::string tar_;
};

/// Creates the binary's shared sandbox before the first test and removes it after the last;
/// skips every test (GTEST_SKIP in SetUp) when the sandbox cannot be made. Registering it from
/// several files of one binary is harmless (one sandbox is made). Register with:
///   static auto* const podman_env =
///       ::testing::AddGlobalTestEnvironment(new mesh::testing::PodmanEnvironment);
class PodmanEnvironment : public ::testing::Environment {
 public:
  void SetUp() override;
  void TearDown() override;
};

/// The sandbox PodmanEnvironment made; nullptr before its SetUp ran (e.g. while gtest registers
/// or lists tests) and when the machine cannot run containers.
PodmanSandbox* shared_podman_sandbox();

}  // namespace mesh::testing
