#include "mesh/common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <system_error>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace mesh::common {

std::string ProcessResult::describe_end(std::chrono::milliseconds limit) const {
  if (!started) return error;
  if (timed_out)
    return "did not finish within " +
           (limit.count() % 1000 ? std::to_string(limit.count()) + " ms" : std::to_string(limit.count() / 1000) + " s");
  if (signal) return "killed by signal " + std::to_string(signal);
  return "exit status " + std::to_string(exit_code);
}

ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          std::size_t max_output) {
  ProcessResult r;
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/') {
    r.error = argv.empty() ? "no program given" : "'" + (argv[0]) + "' is not an absolute path";
    return r;
  }
  // Everything the child needs is built before fork (only async-signal-safe calls after it).
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_text;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view kv(*e);
    bool drop = false;
    for (const char* name : {"NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID=", "LISTEN_FDS=", "LISTEN_PID=",
                             "LISTEN_FDNAMES="})
      drop = drop || kv.rfind(name, 0) == 0;
    if (!drop) env_text.emplace_back(kv);
  }
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    r.error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = ::fork();
  if (pid < 0) {
    r.error = std::string("fork: ") + std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    if (devnull >= 0) ::close(devnull);
    return r;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    // No descriptor of the caller's survives but 0-2 (the pipe and /dev/null are O_CLOEXEC too).
    ::close_range(3, ~0U, 0);
    ::execve(args[0], args.data(), envp.data());
    const char msg[] = "exec failed\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::close(fds[1]);
  if (devnull >= 0) ::close(devnull);
  r.started = true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    const ssize_t got = ::read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // EOF: every writer (the child and what it left running) closed it
    if (r.output.size() < max_output)
      r.output.append(buf, std::min<std::size_t>(static_cast<std::size_t>(got), max_output - r.output.size()));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

bool process_runs(long pid, std::string_view program) {
  if (pid <= 0) return false;
  const std::string dir = "/proc/" + std::to_string(pid);
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink(dir + "/exe", ec);
  if (!ec) {
    std::string name = exe.filename().string();
    // A program replaced on disk while it runs reads "nats-server (deleted)".
    if (const auto cut = name.find(" (deleted)"); cut != std::string::npos) name.resize(cut);
    return name == program;
  }
  std::FILE* f = std::fopen((dir + "/comm").c_str(), "re");
  if (!f) return false;
  char buf[64] = {0};
  const bool read = std::fgets(buf, sizeof buf, f) != nullptr;
  std::fclose(f);
  if (!read) return false;
  std::string_view comm(buf);
  while (!comm.empty() && (comm.back() == '\n' || comm.back() == '\r')) comm.remove_suffix(1);
  // comm is cut to 15 bytes.
  return comm == program.substr(0, 15);
}

}  // namespace mesh::common
