// The `build` stage's work, apart from the stage interface: one command run without a shell as an
// unprivileged user in a fresh directory, with a time limit, its stdout and stderr captured
// line by line, then its artifacts (files matching patterns) hashed (decision record 60).
//
// Kept out of the plugin module so that unit tests can call it directly.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mesh/sdk/cancel.h"
#include "mesh/sdk/result.h"

namespace mesh::stages::build {

/// The fixed PATH a build gets, and where a command named without a '/' is looked up. Fixed so
/// that the control plane's own environment changes nothing.
inline constexpr const char* kBuildPath = "/usr/local/bin:/usr/bin:/bin";

/// Who a build runs as.
struct BuildUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  ///< supplementary groups (getgrouplist)
  bool switch_user = false;   ///< true when the control plane is root and must drop to this user
};

/// Resolves the user builds run as.
/// @param name `[pipelines] build_user` of control.toml; "" = the control plane's own user.
/// @return the user; `switch_user` is set when this process is root (it then drops to the user
///         in the child, before exec).
/// Errors: InvalidArgument on path "build_user" when the name is unknown, when it is root
/// (uid 0: builds never run as root), or when it is "" while this process is root;
/// FailedPrecondition when this process is not root and `name` is another user (it cannot
/// switch). Thread-safe (getpwnam_r, getgrouplist).
sdk::Result<BuildUser> resolve_build_user(const std::string& name);

/// The absolute path of `program`: itself when it contains a '/', else the first executable of
/// that name in kBuildPath.
/// Errors: InvalidArgument on path "command" naming the program when there is none (or it is not
/// an executable regular file). Thread-safe.
sdk::Result<std::string> find_program(const std::string& program);

struct BuildSpec {
  /// argv; argv[0] is resolved with find_program(). Not empty.
  std::vector<std::string> command;
  /// An existing, empty directory the command runs in (chowned to the user when switching).
  std::string work_dir;
  /// The complete environment of the command, "KEY=VALUE" (see build_environment()).
  std::vector<std::string> environment;
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  BuildUser user;
  /// Lines of output kept for the failure message (the tool's last words).
  std::size_t tail_lines = 20;
};

struct BuildOutcome {
  int exit_code = -1;       ///< 0–255, or -N when killed by signal N
  bool timed_out = false;
  bool cancelled = false;
  std::vector<std::string> tail;  ///< the last BuildSpec::tail_lines lines of output
  std::uint64_t lines = 0;        ///< lines of output in all
  std::chrono::milliseconds elapsed{0};
  bool ok() const noexcept { return exit_code == 0 && !timed_out && !cancelled; }
};

/// Receives each line of the command's output (stdout and stderr, interleaved as written; without
/// the newline; a line longer than 64 KiB is cut in pieces). Called on the calling thread.
using LineSink = std::function<void(std::string_view)>;

/// Runs `spec.command` to its end, its time limit or `cancel` (polled every 100 ms): stdin from
/// /dev/null, stdout and stderr into one pipe read line by line into `sink`, its own process
/// group (killed with SIGTERM, then SIGKILL 5 s later, on a timeout or cancel), as `spec.user`
/// (setgroups, setgid, setuid in the child before exec) in `spec.work_dir`. Spawned with
/// Boost.Process (no shell), under a supervisor (decision record 74): the forked child, a child
/// subreaper, forks the command and kills every descendant left when the command ends or when
/// the calling thread dies (a killed mesh-control), `setsid` ones included.
/// @return the outcome; a non-zero exit, a timeout or a cancel is an outcome, not an error.
/// Errors: InvalidArgument naming the program when it cannot be executed (not found, not
/// executable by the user), Internal for a pipe or fork failure. Blocks the calling thread.
/// Thread-safe (no shared state).
sdk::Result<BuildOutcome> run_build(const BuildSpec& spec, const LineSink& sink, const sdk::CancelToken& cancel);

/// The environment a build gets: PATH=kBuildPath, HOME=`work_dir`, LC_ALL=C.UTF-8, USER and
/// LOGNAME = the user's name, then `extra` ("KEY=VALUE", later entries win). Nothing of the
/// control plane's own environment (which may hold secrets) is passed.
std::vector<std::string> build_environment(const BuildUser& user, const std::string& work_dir,
                                           const std::vector<std::string>& extra);

/// One file an artifact pattern matched.
struct Artifact {
  std::string name;    ///< its path relative to the work directory
  std::string path;    ///< absolute path
  std::string sha256;  ///< lower-case hex
  std::uint64_t size = 0;
};

/// The regular files under `dir` whose path relative to it matches one of `patterns`
/// (fnmatch(3) with FNM_PATHNAME: `*.deb`, `out/*.tar.gz`), each hashed, sorted by name. Symbolic
/// links are never followed nor matched (a build could point one at a file only the control
/// plane may read). Errors: FailedPrecondition naming the pattern when a pattern matches no file;
/// InvalidArgument for a pattern that is absolute or contains `..`; Internal naming the file for
/// a read error; Failed naming the file and `max_size` when one is larger than `max_size` bytes
/// (its lstat size, checked before it is read, then the bytes read: it may grow meanwhile).
/// Thread-safe.
sdk::Result<std::vector<Artifact>> collect_artifacts(const std::string& dir, const std::vector<std::string>& patterns,
                                                     std::uint64_t max_size = UINT64_MAX);

/// Copies the regular file `from` (opened with O_NOFOLLOW) to `to` (created 0600, replaced),
/// reading at most `max_size` bytes: a file that is (or grows) larger fails, and `to` is removed.
/// @return the copy's sha256 (lower-case hex) and size, so the caller can check they are the
///         ones it recorded. Errors: Failed naming `name` and the limit when over it; Internal
///         naming `name` for an I/O error. Thread-safe.
sdk::Result<std::pair<std::string, std::uint64_t>> copy_bounded(const std::string& from, const std::string& to,
                                                               std::uint64_t max_size, const std::string& name);

/// "dpkg-deb --build pkg" — argv joined for messages (the basename of argv[0]).
std::string describe_command(const std::vector<std::string>& argv);

}  // namespace mesh::stages::build
