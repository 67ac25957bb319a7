// Nox Mesh test support — running programs from tests: one-shot runs with captured output, and
// background daemons with their output in files.
//
// Children are started with fork/exec (no shell), their stdin from a file or /dev/null, and
// PR_SET_PDEATHSIG=SIGKILL so that a test process that crashes or is killed by ctest leaves no
// daemon behind. Caveat of that Linux feature: the child is also killed when the *thread* that
// started it exits, so start long-lived processes from the test's main thread (or a thread that
// outlives them).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mesh::testing {

/// The outcome of run_process().
struct ProcessResult {
  /// The exit status (0-255), or -N when the process was killed by signal N (-9 after a timeout).
  int exit_code;
  std::string out;  ///< everything written to stdout
  std::string err;  ///< everything written to stderr
};

/// Runs `argv` (argv[0] is looked up on PATH unless it contains a '/'; no shell) with the test's
/// environment plus `env` entries ("KEY=VALUE", overriding same-named variables), feeding it
/// `stdin_text`, and waits up to `timeout_ms` (then SIGKILL, exit_code = -9). A program that
/// cannot be executed gives exit_code 127 and the reason in `err`.
/// Throws std::runtime_error only when the process cannot be created at all (fork failure).
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::vector<std::string>& env = {}, int timeout_ms = 60000,
                          const std::string& stdin_text = "");

/// A background process (a daemon under test), started in the constructor with stdin from
/// /dev/null and stdout/stderr in files of a private temporary directory (kept until destruction,
/// so the output can be read after it exited). Methods are not thread-safe with each other.
class BackgroundProcess {
 public:
  /// Starts `argv` with the extra `env` entries as run_process() does. Throws std::runtime_error
  /// when the process cannot be created or the program cannot be executed.
  BackgroundProcess(const std::vector<std::string>& argv,
                    const std::vector<std::string>& env = {});
  /// Stops the process if still running: SIGTERM, then SIGKILL after 3 s.
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  pid_t pid() const { return pid_; }
  /// True while the process has not exited (reaps it when it has).
  bool running();
  /// Sends `signal`, waits up to `timeout_ms` for the exit, then sends SIGKILL. Returns the exit
  /// code (-N when killed by signal N). When it had already exited, returns that exit code.
  int stop(int signal = SIGTERM, int timeout_ms = 3000);
  /// The exit code after the process ended (see stop()); -1000 while it runs.
  int exit_code();

  std::string stdout_text() const;
  std::string stderr_text() const;
  /// Waits until stderr or stdout contains `needle`, polling every 20 ms up to `timeout_ms`;
  /// returns whether it was found. Returns early (after a last look) when the process exits.
  bool wait_for_output(const std::string& needle, int timeout_ms);

 private:
  struct Files;
  std::unique_ptr<Files> files_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int exit_code_ = -1000;
};

/// A TCP port free on 127.0.0.1 now: picked at random below the kernel's ephemeral range
/// (net.ipv4.ip_local_port_range), where no outgoing connection takes its local port, checked by
/// binding it (the socket is closed again, so another test's listener could in principle take it
/// before the caller does), never the same twice in one process; the kernel's pick (bind to 0)
/// when no such port is found in 200 tries. Thread-safe. Throws std::runtime_error when no
/// socket can be made or bound.
int free_tcp_port();

/// Whether something accepts a TCP connection on 127.0.0.1:`port` now (one connect attempt,
/// closed at once; false when the socket cannot be made).
bool accepts_tcp(int port);

/// Calls `pred` every 20 ms until it returns true or `timeout_ms` passed; returns pred() (one
/// last call after the deadline).
bool eventually(const std::function<bool()>& pred, int timeout_ms);

}  // namespace mesh::testing
