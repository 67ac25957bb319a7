// Running the engine's CLI: one program, no shell, stdout and stderr captured, bounded in time,
// killed when the CancelToken fires.
//
// The child gets stdin from /dev/null, the host's environment, default signal dispositions and
// its own process group, so a timeout or a cancel can kill it with everything it started in the
// foreground (`podman pull` helpers). Programs that detach on purpose (conmon, which keeps a
// container alive after `podman run -d`) leave the group and are not touched.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "mesh/sdk/cancel.h"
#include "mesh/sdk/result.h"

namespace mesh::plugins::container {

/// What a finished (or killed) child left behind.
struct ProcessOutcome {
  /// The exit status (0–255), or -N when the child was killed by signal N.
  int exit_code = -1;
  std::string out;  ///< everything written to stdout (capped at kMaxOutputBytes)
  std::string err;  ///< everything written to stderr (capped at kMaxOutputBytes)
  bool timed_out = false;  ///< killed because `timeout` ran out
  bool cancelled = false;  ///< killed because the CancelToken fired

  bool ok() const noexcept { return exit_code == 0 && !timed_out && !cancelled; }
};

/// Output beyond this many bytes per stream is read and dropped (a runaway child cannot make the
/// host run out of memory).
inline constexpr std::size_t kMaxOutputBytes = 16u << 20;

/// Runs `argv` (argv[0] is looked up on PATH unless it contains a '/') and waits for it, at most
/// `timeout` (zero or negative: no limit of its own). When `timeout` runs out or `cancel` fires
/// (polled every 50 ms; its deadline counts), the child's process group gets SIGTERM, then SIGKILL
/// one second later, and the outcome says why. Output written after the child exited by a
/// descendant that kept the pipes open is read for at most 200 ms more.
/// Errors: Unavailable when the program cannot be started (not found, not executable), with the
/// program's name and strerror in the message; Internal when pipes cannot be made.
/// Thread-safe (posix_spawn, no global state); blocks the calling thread.
sdk::Result<ProcessOutcome> run_process(const std::vector<std::string>& argv,
                                        std::chrono::milliseconds timeout,
                                        const sdk::CancelToken* cancel = nullptr);

}  // namespace mesh::plugins::container
