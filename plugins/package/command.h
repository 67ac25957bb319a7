// Running a package tool (apt-get, apt-cache, dpkg-query, apt-mark) without a shell: argv as a
// vector, output captured, a time limit and the CancelToken enforced by killing the child's
// process group (the tool and whatever it started, dpkg and maintainer scripts included).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "mesh/sdk/cancel.h"

namespace mesh::plugins::package {

struct Command {
  /// argv[0] is an absolute path (see find_program()); nothing is looked up on PATH.
  std::vector<std::string> argv;
  /// The complete environment, "KEY=VALUE" entries (see tool_environment()).
  std::vector<std::string> env;
  /// Wall-clock limit; after it the process group gets SIGTERM, then SIGKILL 5 s later.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  /// Whether the CancelToken may stop it (docs/decisions/0035). True for a command that has not
  /// started changing the system (an index refresh, a download, a simulation, a query): killed
  /// when the token fires. False for one that changes it (dpkg unpacking and configuring: `apt-get
  /// install`, `remove`, `purge`, `apt-mark`): killing it would leave the package system
  /// half-configured, so it runs to its end or to `timeout`, and the caller stops at the next step.
  bool cancellable = true;
  /// For a cancellable command that changes the system only from some point on (`apt-get
  /// install`: it resolves, waits for the dpkg lock and downloads, then runs dpkg): once one of
  /// these strings appears in its stdout (dpkg at work: "(Reading database", "Unpacking "...), the
  /// CancelToken no longer stops it and it runs to its end or `timeout`. Empty: no such point.
  std::vector<std::string> changing_after;
};

struct CommandResult {
  enum class Outcome {
    Exited,       ///< ran to the end; see exit_code
    Signalled,    ///< killed by a signal nobody here sent; see signal
    TimedOut,     ///< Command::timeout ran out and the group was killed
    Cancelled,    ///< the CancelToken fired and the group was killed
    SpawnFailed,  ///< never started; see spawn_error
  };
  Outcome outcome = Outcome::SpawnFailed;
  int exit_code = -1;
  int signal = 0;
  /// The last 4 MiB of each stream (apt's error lines come last).
  std::string out;
  std::string err;
  std::string spawn_error;
  std::chrono::milliseconds elapsed{0};
  /// A `changing_after` marker was seen: from then on a cancel no longer applied.
  bool changing = false;

  bool succeeded() const { return outcome == Outcome::Exited && exit_code == 0; }
};

/// Runs `command` to completion (or until its time limit, or `cancel` when command.cancellable)
/// with stdin from /dev/null
/// and stdout/stderr captured. After the tool exits its pipes are read for at most 2 s more, so a
/// daemon started by a maintainer script that keeps them open cannot hang the caller.
/// Never throws except std::bad_alloc. Thread-safe (no shared state); callable from any thread.
CommandResult run_command(const Command& command, const sdk::CancelToken& cancel);

/// The directories programs are looked up in, and the PATH children get. Fixed, so the host's
/// own PATH (possibly without /usr/sbin, where dpkg finds ldconfig) cannot change behaviour.
inline constexpr const char* kToolPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The absolute path of `name` in kToolPath, or "" when there is no executable of that name.
std::string find_program(const std::string& name);

/// The host's environment with PATH=kToolPath, LC_ALL=C (so apt's messages are the untranslated
/// ones we quote and match), DEBIAN_FRONTEND=noninteractive and APT_LISTCHANGES_FRONTEND=none;
/// LANGUAGE and LANG are dropped. APT_CONFIG, proxies and TMPDIR are passed through.
std::vector<std::string> tool_environment();

/// "apt-get install -y nginx=1.2" — argv joined for logs and messages (basename of argv[0]).
std::string describe_command(const std::vector<std::string>& argv);

}  // namespace mesh::plugins::package
