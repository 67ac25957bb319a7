// Test support for the host's upgrade and rollback (tests/upgrade): the five Debian packages
// built by CPack from this build tree, and versions of nox-mesh-host repacked from the built one.
//
//   auto pkgs = build_packages(dir);                       // cpack -G DEB into dir (once)
//   auto v2 = repack_host(pkgs.host, "0.1.0+t2", dir);     // same files, Version 0.1.0+t2
//   auto v3 = repack_host(pkgs.host, "0.1.0+t3", dir, HostBuild::ExitsAtOnce);
//
// A repacked host keeps every file of the built one (so the version it reports comes from the
// package it runs: dpkg owns its executable). The failing builds replace /usr/bin/mesh-host with a
// small wrapper that execs the real binary (moved to /usr/lib/nox-mesh/test/mesh-host) except for
// the one command it is made to fail: `run` (ExitsAtOnce) or `self-test` (SelfTestFails).
// KillsDpkgOnce adds a postinst that SIGKILLs the dpkg running it once, while a trigger file
// exists (an upgrade whose dpkg was killed mid-configure).
//
// Needs root for nothing here; cpack, dpkg-deb and the build tree (MESH_TEST_BUILD_DIR). Throws
// std::runtime_error with the command's output when a step fails. Not thread-safe.
#pragma once

#include <string>
#include <vector>

namespace mesh::upgrade_test {

/// The .deb files CPack made (absolute paths).
struct Packages {
  std::string host;     ///< nox-mesh-host_<version>_<arch>.deb
  std::string common;   ///< nox-mesh-common_… (the nats transport the host loads)
  std::string control;  ///< nox-mesh-control_…
  std::string cli;      ///< nox-mesh_…
  std::string version;  ///< the Version CPack wrote (the project version)
};

/// Runs `cpack -G DEB` on the build tree with its output in `dir` (made when missing). Cached per
/// process: a second call returns the first result.
Packages build_packages(const std::string& dir);

enum class HostBuild {
  Plain,          ///< the built files, only the version changed
  ExitsAtOnce,    ///< `mesh-host run` exits 1 at once ("test build … exits at once")
  SelfTestFails,  ///< `mesh-host self-test` prints a reason and exits 1
  KillsDpkgOnce,  ///< plain, plus a postinst that kills its dpkg once while `trigger` exists
};

/// The built nox-mesh-host repacked (dpkg-deb -R, -b) as `version`, into `dir`; returns the
/// .deb's path (nox-mesh-host_<version>_<arch>.deb, epoch ':' as %3a).
std::string repack_host(const std::string& built_deb, const std::string& version,
                        const std::string& dir, HostBuild build = HostBuild::Plain,
                        const std::string& trigger = "");

/// What a command printed and how it ended.
struct CommandRun {
  int exit_code = -1;  ///< -N when killed by signal N
  std::string out;     ///< stdout and stderr together
};
/// Runs argv (no shell; argv[0] looked up in PATH) with LC_ALL=C, up to `timeout_ms`.
CommandRun run(const std::vector<std::string>& argv, int timeout_ms = 300000);
/// run() that throws, naming `what` and the output, unless it exits 0.
std::string check(const std::vector<std::string>& argv, const std::string& what,
                  int timeout_ms = 300000);

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& text, unsigned mode = 0644);

/// The key=value lines of an upgrade state file (decision 76) as a map; empty when missing.
std::vector<std::pair<std::string, std::string>> read_state(const std::string& path);
/// The value of `key` in read_state(path), or "".
std::string state_value(const std::string& path, const std::string& key);

}  // namespace mesh::upgrade_test
