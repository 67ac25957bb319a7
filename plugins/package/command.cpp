#include "command.h"

#include "mesh/support/errno_text.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string_view>

extern char** environ;

namespace mesh::plugins::package {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxCaptureBytes = 4 * 1024 * 1024;
constexpr auto kKillGrace = std::chrono::seconds(5);
constexpr auto kPipeGraceAfterExit = std::chrono::seconds(2);
constexpr auto kPollTick = std::chrono::milliseconds(50);

using support::errno_text;

void append_capped(std::string& to, const char* data, std::size_t n) {
  to.append(data, n);
  if (to.size() > kMaxCaptureBytes) to.erase(0, to.size() - kMaxCaptureBytes);
}

class Pipe {
 public:
  Pipe() = default;
  ~Pipe() { close_both(); }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  bool open() { return ::pipe2(fds_.data(), O_CLOEXEC) == 0; }
  int read_end() const { return fds_[0]; }
  int write_end() const { return fds_[1]; }
  void close_read() { close_fd(fds_[0]); }
  void close_write() { close_fd(fds_[1]); }
  void close_both() {
    close_read();
    close_write();
  }

 private:
  static void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  std::array<int, 2> fds_{-1, -1};
};

// posix_spawn attributes and file actions with destructors, so every early return cleans up.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  bool attr_ok = false;
  bool actions_ok = false;
  SpawnSetup() {
    attr_ok = posix_spawnattr_init(&attr) == 0;
    actions_ok = posix_spawn_file_actions_init(&actions) == 0;
  }
  ~SpawnSetup() {
    if (attr_ok) posix_spawnattr_destroy(&attr);
    if (actions_ok) posix_spawn_file_actions_destroy(&actions);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

}  // namespace

CommandResult run_command(const Command& command, const sdk::CancelToken& cancel) {
  CommandResult result;
  const auto started = Clock::now();
  if (command.argv.empty() || command.argv[0].empty() || command.argv[0][0] != '/') {
    result.spawn_error = "no absolute program path given";
    return result;
  }
  Pipe out;
  Pipe err;
  if (!out.open() || !err.open()) {
    result.spawn_error = "pipe2: " + errno_text(errno);
    return result;
  }
  SpawnSetup setup;
  if (!setup.attr_ok || !setup.actions_ok) {
    result.spawn_error = "posix_spawn set-up failed";
    return result;
  }
  // A process group of its own, so a timeout kills apt-get and the dpkg it runs; default signal
  // dispositions and an empty mask, whatever the host blocked or ignored (SIGPIPE, SIGTERM).
  sigset_t all;
  sigset_t none;
  sigfillset(&all);
  sigemptyset(&none);
  short flags = POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  posix_spawnattr_setflags(&setup.attr, flags);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  posix_spawnattr_setsigmask(&setup.attr, &none);
  posix_spawnattr_setsigdefault(&setup.attr, &all);
  posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, out.write_end(), 1);
  posix_spawn_file_actions_adddup2(&setup.actions, err.write_end(), 2);
  // The host may hold descriptors without O_CLOEXEC (sockets, sqlite); apt must not inherit them.
  posix_spawn_file_actions_addclosefrom_np(&setup.actions, 3);

  std::vector<char*> argv;
  for (const auto& a : command.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : command.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid = -1;
  const int rc =
      posix_spawn(&pid, argv[0], &setup.actions, &setup.attr, argv.data(), envp.data());
  out.close_write();
  err.close_write();
  if (rc != 0) {
    result.spawn_error = "cannot run " + command.argv[0] + ": " + errno_text(rc);
    return result;
  }

  const auto deadline = started + command.timeout;
  bool killing = false;
  Clock::time_point kill_at{};
  bool sent_kill = false;
  bool exited = false;
  int status = 0;
  Clock::time_point exited_at{};
  std::array<char, 65536> buf;

  for (;;) {
    const auto now = Clock::now();
    const bool cancelled = command.cancellable && !result.changing && cancel.cancelled();
    if (!killing && (cancelled || now >= deadline)) {
      result.outcome = cancelled ? CommandResult::Outcome::Cancelled : CommandResult::Outcome::TimedOut;
      killing = true;
      ::kill(-pid, SIGTERM);
      kill_at = now + kKillGrace;
    }
    if (killing && !sent_kill && now >= kill_at) {
      ::kill(-pid, SIGKILL);
      sent_kill = true;
    }
    if (!exited) {
      // WNOWAIT: the zombie keeps the pid (and so the group id) reserved until the final reap,
      // so the group kill below cannot reach an unrelated process that reused the number.
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid == pid) {
        exited = true;
        exited_at = now;
        // After a timeout or cancel, whatever apt left behind in its group goes too.
        if (killing) ::kill(-pid, SIGKILL);
      }
    }
    const bool pipes_open = out.read_end() >= 0 || err.read_end() >= 0;
    if (exited && (!pipes_open || now >= exited_at + kPipeGraceAfterExit)) break;
    if (!pipes_open) {
      // Output closed but the process still runs: wait for it without spinning.
      ::poll(nullptr, 0, static_cast<int>(kPollTick.count()));
      continue;
    }
    std::array<pollfd, 2> fds{pollfd{out.read_end(), POLLIN, 0}, pollfd{err.read_end(), POLLIN, 0}};
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(kPollTick.count()));
    if (n < 0 && errno != EINTR) break;
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t got = ::read(fds[k].fd, buf.data(), buf.size());
      if (got > 0) {
        append_capped(k == 0 ? result.out : result.err, buf.data(), static_cast<std::size_t>(got));
        if (k == 0 && !result.changing && !command.changing_after.empty()) {
          // Look at what just came, plus enough before it for a marker split across reads.
          const std::size_t look = std::min(result.out.size(), static_cast<std::size_t>(got) + 64);
          const std::string_view tail(result.out.data() + result.out.size() - look, look);
          for (const auto& marker : command.changing_after)
            if (tail.find(marker) != std::string_view::npos) result.changing = true;
        }
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        if (k == 0)
          out.close_read();
        else
          err.close_read();
      }
    }
  }
  // Only when poll failed is the tool still running: make sure nothing is left, then reap.
  if (!exited) ::kill(-pid, SIGKILL);
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
  if (killing) {
    result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
  }
  if (WIFEXITED(status)) {
    result.outcome = CommandResult::Outcome::Exited;
    result.exit_code = WEXITSTATUS(status);
  } else {
    result.outcome = CommandResult::Outcome::Signalled;
    result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  }
  return result;
}

std::string find_program(const std::string& name) {
  std::string_view dirs = kToolPath;
  while (!dirs.empty()) {
    const auto colon = dirs.find(':');
    const std::string_view dir = dirs.substr(0, colon);
    const std::string path = std::string(dir) + "/" + name;
    if (::access(path.c_str(), X_OK) == 0) return path;
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return {};
}

std::vector<std::string> tool_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry(*e);
    const auto eq = entry.find('=');
    const std::string_view key = entry.substr(0, eq);
    if (key == "PATH" || key == "LANG" || key == "LANGUAGE" || key.rfind("LC_", 0) == 0 ||
        key == "DEBIAN_FRONTEND" || key == "APT_LISTCHANGES_FRONTEND")
      continue;
    env.emplace_back(entry);
  }
  env.emplace_back(std::string("PATH=") + kToolPath);
  env.emplace_back("LC_ALL=C");
  env.emplace_back("DEBIAN_FRONTEND=noninteractive");
  env.emplace_back("APT_LISTCHANGES_FRONTEND=none");
  return env;
}

std::string describe_command(const std::vector<std::string>& argv) {
  std::string out;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    std::string_view a = argv[i];
    if (i == 0) {
      const auto slash = a.rfind('/');
      if (slash != std::string_view::npos) a.remove_prefix(slash + 1);
    }
    if (!out.empty()) out += ' ';
    for (char c : a) out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

}  // namespace mesh::plugins::package
