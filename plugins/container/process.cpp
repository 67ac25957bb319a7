#include "process.h"

#include "mesh/support/errno_text.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace mesh::plugins::container {
namespace {

using Clock = std::chrono::steady_clock;
using sdk::ErrorCode;

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// Reads what is available; returns false at EOF or on a hard error (the caller stops polling).
bool drain(int fd, std::string& into) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      const std::size_t room = kMaxOutputBytes > into.size() ? kMaxOutputBytes - into.size() : 0;
      into.append(buf, std::min<std::size_t>(room, static_cast<std::size_t>(n)));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1;
}

struct SpawnAttr {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnAttr() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnAttr() {
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
  }
};

}  // namespace

sdk::Result<ProcessOutcome> run_process(const std::vector<std::string>& argv,
                                        std::chrono::milliseconds timeout,
                                        const sdk::CancelToken* cancel) {
  if (argv.empty() || argv[0].empty())
    return sdk::fail(ErrorCode::Internal, "run_process: empty argv");
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    return sdk::fail(ErrorCode::Internal, std::string("pipe: ") + support::errno_text(errno));
  Fd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0)
    return sdk::fail(ErrorCode::Internal, std::string("pipe: ") + support::errno_text(errno));
  Fd err_r(err_pipe[0]), err_w(err_pipe[1]);

  SpawnAttr sa;
  posix_spawn_file_actions_addopen(&sa.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&sa.actions, out_w.get(), 1);
  posix_spawn_file_actions_adddup2(&sa.actions, err_w.get(), 2);
  // Nothing of the host but these three descriptors reaches the child (its broker connection above all).
  posix_spawn_file_actions_addclosefrom_np(&sa.actions, 3);
  // The host may block or ignore signals (SIGPIPE, SIGTERM in a daemon); the engine must not
  // inherit that.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&sa.attr, &none);
  posix_spawnattr_setsigdefault(&sa.attr, &all);
  posix_spawnattr_setpgroup(&sa.attr, 0);
  posix_spawnattr_setflags(&sa.attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  pid_t pid = -1;
  const bool search = argv[0].find('/') == std::string::npos;
  int rc = search ? ::posix_spawnp(&pid, cargv[0], &sa.actions, &sa.attr, cargv.data(), environ)
                  : ::posix_spawn(&pid, cargv[0], &sa.actions, &sa.attr, cargv.data(), environ);
  if (rc != 0)
    return sdk::fail(ErrorCode::Unavailable,
                     "cannot run '" + argv[0] + "': " + support::errno_text(rc) +
                         (search ? " (looked up on PATH)" : ""));
  out_w.reset();
  err_w.reset();
  ::fcntl(out_r.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err_r.get(), F_SETFL, O_NONBLOCK);

  ProcessOutcome outcome;
  const auto started = Clock::now();
  const bool limited = timeout.count() > 0;
  bool out_open = true, err_open = true;
  bool exited = false;
  int status = 0;
  Clock::time_point term_sent{};
  Clock::time_point drain_deadline{};

  while (true) {
    if (!exited) {
      pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid || (r < 0 && errno == ECHILD)) {
        exited = true;
        if (r < 0) status = 0xff00;  // reaped elsewhere (SIGCHLD ignored): unknown status
        drain_deadline = Clock::now() + std::chrono::milliseconds(200);
      }
    }
    if (exited && ((!out_open && !err_open) || Clock::now() >= drain_deadline)) break;

    if (!exited) {
      const auto now = Clock::now();
      if (term_sent == Clock::time_point{}) {
        if (cancel && cancel->cancelled()) outcome.cancelled = true;
        else if (limited && now - started >= timeout) outcome.timed_out = true;
        if (outcome.cancelled || outcome.timed_out) {
          ::kill(-pid, SIGTERM);
          term_sent = now;
        }
      } else if (now - term_sent >= std::chrono::seconds(1)) {
        ::kill(-pid, SIGKILL);
      }
    }

    pollfd fds[2];
    nfds_t n = 0;
    if (out_open) fds[n++] = {out_r.get(), POLLIN, 0};
    if (err_open) fds[n++] = {err_r.get(), POLLIN, 0};
    if (n == 0) {
      // Both pipes closed but the child still runs: just wait for it.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    int pr = ::poll(fds, n, exited ? 20 : 50);
    if (pr < 0 && errno != EINTR) break;
    if (out_open) out_open = drain(out_r.get(), outcome.out);
    if (err_open) err_open = drain(err_r.get(), outcome.err);
  }
  outcome.exit_code = decode_status(status);
  return outcome;
}

}  // namespace mesh::plugins::container
