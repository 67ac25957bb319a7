// Running a program without a shell: argv as given, output captured, a time limit. Used by the
// host for its own version (dpkg-query) and by the engine for the self-test of a new host
// executable (docs/decisions/0076).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mesh::common {

struct ProcessResult {
  bool started = false;     ///< false: fork or exec failed; see `error`
  bool timed_out = false;   ///< the time limit ran out and the child's process group was killed
  int exit_code = -1;       ///< when it exited
  int signal = 0;           ///< when a signal ended it (SIGKILL after a timeout included)
  std::string output;       ///< stdout and stderr interleaved, the first `max_output` bytes
  std::string error;        ///< why it did not start ("exec /x: No such file or directory")

  /// Exited with status 0 within the limit.
  bool succeeded() const { return started && !timed_out && signal == 0 && exit_code == 0; }
  /// "exit status 3", "killed by signal 9", "did not finish within 60 s", or `error`.
  std::string describe_end(std::chrono::milliseconds limit) const;
};

/// Runs `argv` (argv[0] an absolute path: nothing is looked up on PATH, no shell) with stdin
/// from /dev/null, stdout and stderr into one pipe, in its own process group, with no descriptor
/// of the caller's but those three, every signal unblocked and the caller's environment less
/// the service manager's variables (NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID, LISTEN_FDS,
/// LISTEN_PID, LISTEN_FDNAMES), so a child can never speak for the caller to systemd.
/// Keeps the first `max_output` bytes of output (the rest is read and dropped). After `timeout`
/// the child's process group gets SIGKILL. An empty argv, or one whose argv[0] is not absolute,
/// does not start (`error` says why). Never throws except std::bad_alloc. Thread-safe.
ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          std::size_t max_output = 64 << 10);

/// Whether process `pid` runs the program named `program` (a file name, e.g. "nats-server"): the
/// file name of /proc/<pid>/exe when it can be read (same user, or root), else the process's
/// /proc/<pid>/comm (the first 15 bytes of the name it was started with). False for a process
/// that does not exist, or when neither can be read. Before signalling a pid read from a pid file
/// (which may be stale, its number reused by another program). Thread-safe.
bool process_runs(long pid, std::string_view program);

}  // namespace mesh::common
