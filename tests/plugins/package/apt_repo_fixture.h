// Nox Mesh test support — a throw-away apt repository for system tests of anything that installs
// Debian packages (the `package` provider first). Library target `mesh_test_apt_repo`.
//
//   AptRepo repo;                                            // a private temporary folder
//   repo.add_package({"nox-mesh-test-hello", "1.0"});        // builds a tiny .deb
//   repo.add_package({"nox-mesh-test-hello", "2.0"});
//   repo.index();                                            // Packages.gz, every version
//   repo.start();                                            // http://127.0.0.1:<free port>/
//   // declare source = repo.sources_file() (a `deb [trusted=yes] http://127.0.0.1:PORT/ ./`
//   // line in the temporary folder, never in /etc/apt/sources.list.d)
//   repo.stop();                                             // a dead mirror
//
// The destructor stops the server, purges every package this repo built that dpkg still knows
// (`dpkg --force-hold --force-depends --purge`), deletes the apt lists and downloaded archives
// of this repository and the temporary folder, and restores APT_CONFIG.
//
// Package names must start with `nox-mesh-test-` (kPackagePrefix; add_package throws otherwise),
// so a test can never install over or purge a real package.
//
// Isolation (AptRepoOptions::isolate_apt_config, default on): start() points APT_CONFIG, in this
// process and so in every child it starts, at a private configuration: no system sources, lists
// and archives in the temporary folder, no download retries. The dpkg database is the real one. That keeps apt
// commands fast (0.1 s instead of 1.5 s per `apt-cache policy` on a Debian 12 host with the full
// archive indexed) and keeps tests independent of the host's mirrors. Turn it off to exercise the
// host's real apt configuration.
//
// Needs root, apt-get, dpkg-deb, dpkg-scanpackages (Debian package dpkg-dev), gzip and python3:
// apt_repo_skip_reason() says what is missing. Not thread-safe; use from the test's main thread
// (the HTTP server dies with the thread that started it: PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace mesh::testing {

inline constexpr const char* kPackagePrefix = "nox-mesh-test-";

/// Why system package tests cannot run on this machine ("needs root", "dpkg-scanpackages not
/// found (install dpkg-dev)"), or "" when they can.
std::string apt_repo_skip_reason();

/// The result of run_program().
struct ProgramResult {
  int exit_code = -1;  ///< exit status, or -N when killed by signal N (-9 after the timeout)
  std::string out;     ///< stdout and stderr, interleaved as written
};

/// Runs `argv` (argv[0] looked up in /usr/sbin:/usr/bin:/sbin:/bin unless it contains '/'; no
/// shell) with LC_ALL=C, stdin from /dev/null, waiting up to `timeout_ms` (then SIGKILL).
ProgramResult run_program(const std::vector<std::string>& argv, int timeout_ms = 60000);

/// One package for add_package().
struct AptTestPackage {
  std::string name;     ///< must start with kPackagePrefix
  std::string version;  ///< a Debian version ("1.0", "1:2.0-1")
  /// The Depends field as written ("nox-mesh-test-lib (>= 1.0)"); empty for none.
  std::string depends = {};
  /// Ships a configuration file /etc/nox-mesh-test/<name>.conf (so `remove` leaves "rc").
  bool conffile = false;
  /// The body of a DEBIAN/postinst (run by /bin/sh with `set -e` first); empty for none.
  std::string postinst = {};
};

struct AptRepoOptions {
  bool isolate_apt_config = true;
};

class AptRepo {
 public:
  /// Creates the temporary folder (mode 0755, so apt's `_apt` download user can write its
  /// partial/ folders). Cheap; needs no root. Throws std::runtime_error on failure.
  explicit AptRepo(AptRepoOptions options = {});
  ~AptRepo();
  AptRepo(const AptRepo&) = delete;
  AptRepo& operator=(const AptRepo&) = delete;

  /// Builds the .deb into the repository folder (not indexed until index()). Installs
  /// /usr/share/nox-mesh-test/<name>/version containing the version. Throws on failure.
  void add_package(const AptTestPackage& package);
  /// Deletes a built .deb, leaving the index as it is (a version whose download 404s).
  void remove_deb(const std::string& name, const std::string& version);
  /// (Re)writes Packages.gz with every version in the folder (`dpkg-scanpackages -m`).
  void index();

  /// Serves the repository on 127.0.0.1:<free port> (python3 -m http.server), writes the sources
  /// file and, when isolating, sets APT_CONFIG. Calling it again after stop() serves on the same
  /// port. Throws on failure.
  void start();
  /// Stops the server; the port then refuses connections (a dead mirror).
  void stop();
  bool running() const { return server_pid_ > 0; }

  /// `deb [trusted=yes] http://127.0.0.1:PORT/ ./`, in the temporary folder; valid after start().
  const std::string& sources_file() const { return sources_file_; }
  const std::string& repo_dir() const { return repo_dir_; }
  const std::string& dir() const { return dir_; }
  /// apt's lists folder (Dir::State::lists) while isolated, in the temporary folder: its `lock`
  /// is the lock `apt-get update` takes. Valid after start().
  std::string lists_dir() const { return dir_ + "/apt/lists"; }
  int port() const { return port_; }
  /// The HTTP server's request log (useful when a test fails).
  std::string server_log() const;

  /// The installed version per dpkg, or "" when not installed (config files only counts as not).
  static std::string installed_version(const std::string& name);
  /// dpkg's `${db:Status-Abbrev}|${Version}` for the package, or "unknown" when dpkg has no
  /// record: a fingerprint for "did anything change".
  static std::string dpkg_fingerprint(const std::string& name);

  /// Purges every package built by this repo that dpkg knows. Also run by the destructor.
  void purge_packages();

 private:
  void write_apt_config();
  void wait_until_serving();

  AptRepoOptions options_;
  std::string dir_;
  std::string repo_dir_;
  std::string sources_file_;
  std::string apt_config_file_;
  std::optional<std::string> saved_apt_config_;
  bool apt_config_set_ = false;
  std::vector<std::string> names_;
  pid_t server_pid_ = -1;
  int port_ = 0;
};

/// Holds `path` the way apt does (an fcntl write lock; the file is created when missing) in a
/// child process, from construction until destruction or, when `release_after` is given, until
/// that much time has passed (the child then exits). Throws std::runtime_error when the lock
/// cannot be taken within 10 s.
class FileLockHolder {
 public:
  explicit FileLockHolder(const std::string& path,
                          std::optional<std::chrono::milliseconds> release_after = std::nullopt);
  ~FileLockHolder();
  FileLockHolder(const FileLockHolder&) = delete;
  FileLockHolder& operator=(const FileLockHolder&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

/// Holds /var/lib/dpkg/lock-frontend (see FileLockHolder), so apt-get waits for it.
class DpkgLockHolder : public FileLockHolder {
 public:
  explicit DpkgLockHolder(std::optional<std::chrono::milliseconds> release_after = std::nullopt)
      : FileLockHolder("/var/lib/dpkg/lock-frontend", release_after) {}
};

}  // namespace mesh::testing
