#include "build_runner.h"

// process/v2 compiled into this file (src.hpp below), not header-only: 1.81 leaves parts of its
// header-only mode undefined.
#define BOOST_PROCESS_V2_SEPARATE_COMPILATION 1
#ifndef BOOST_PROCESS_USE_STD_FS
#define BOOST_PROCESS_USE_STD_FS 1
#endif
// Boost 1.81's process/v2 config names boost::optional and the type traits without including
// them when it uses std::filesystem.
#include <boost/optional.hpp>
#include <boost/type_traits.hpp>
#include <boost/asio/connect_pipe.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/readable_pipe.hpp>
#include <boost/asio/writable_pipe.hpp>
#include <boost/process/v2/environment.hpp>
#include <boost/process/v2/process.hpp>
#include <boost/process/v2/start_dir.hpp>
#include <boost/process/v2/stdio.hpp>
// The compiled parts of process/v2 (process_environment, ...): once, in this file only.
#include <boost/process/v2/src.hpp>

#include <fcntl.h>
#include <fnmatch.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <filesystem>
#include <map>
#include <system_error>

#include "mesh/support/errno_text.h"
#include "mesh/support/sha256.h"

namespace mesh::stages::build {
namespace {

namespace asio = boost::asio;
namespace bp = boost::process::v2;
namespace fs = std::filesystem;
using sdk::ErrorCode;
using Clock = std::chrono::steady_clock;

constexpr auto kKillGrace = std::chrono::seconds(5);
constexpr auto kPipeGraceAfterExit = std::chrono::seconds(2);
constexpr int kPollMs = 100;
constexpr std::size_t kMaxLine = 64 * 1024;

// ---- The supervisor (decision record 74). It runs in the child of a multi-threaded process
// after fork, without exec: only async-signal-safe calls, no allocation.

void supervisor_signals(sigset_t& set) {
  ::sigemptyset(&set);
  for (int s : {SIGCHLD, SIGUSR1, SIGTERM, SIGINT, SIGHUP, SIGQUIT}) ::sigaddset(&set, s);
}

std::int64_t now_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void reap_all() {
  int st = 0;
  while (::waitpid(-1, &st, WNOHANG) > 0) {
  }
}

// Kills every descendant: the supervisor is a subreaper, so whatever a killed child had started
// (in its group or not, setsid or not) becomes the supervisor's child in turn, and the next round
// kills it. Read from /proc/<pid>/task/<pid>/children (the supervisor has one thread).
void kill_descendants() {
  char path[64] = "/proc/";
  auto put = [](char* at, long v) {
    char digits[24];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v > 0);
    while (n > 0) *at++ = digits[--n];
    return at;
  };
  const long self = ::getpid();
  char* at = put(path + 6, self);
  const char* mid = "/task/";
  while (*mid) *at++ = *mid++;
  at = put(at, self);
  const char* tail = "/children";
  while (*tail) *at++ = *tail++;
  *at = '\0';
  for (int round = 0; round < 2000; ++round) {  // 2000 × 5 ms: 10 s at most
    bool any = false;
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char buf[4096];
      long pid = 0;
      bool in_number = false;
      for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        for (ssize_t i = 0; i < n; ++i) {
          if (buf[i] >= '0' && buf[i] <= '9') {
            pid = pid * 10 + (buf[i] - '0');
            in_number = true;
          } else if (in_number) {
            ::kill(static_cast<pid_t>(pid), SIGKILL);
            any = true;
            pid = 0;
            in_number = false;
          }
        }
      }
      if (in_number) {
        ::kill(static_cast<pid_t>(pid), SIGKILL);
        any = true;
      }
      ::close(fd);
    }
    reap_all();
    if (!any) {
      // No child listed: done when there is none left to reap either.
      int st = 0;
      const pid_t w = ::waitpid(-1, &st, WNOHANG);
      if (w < 0 && errno == ECHILD) return;
      if (fd < 0 && w == 0) return;  // no /proc: the caller's group kill is all there is
    }
    timespec pause{0, 5 * 1000 * 1000};
    ::nanosleep(&pause, nullptr);
  }
}

// Ends the supervisor the way the command ended, so the parent reads the command's status.
[[noreturn]] void exit_like(int status) {
  if (WIFEXITED(status)) ::_exit(WEXITSTATUS(status));
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(sig, &dfl, nullptr);
  rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  sigset_t only;
  ::sigemptyset(&only);
  ::sigaddset(&only, sig);
  ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
  ::kill(::getpid(), sig);
  ::_exit(128 + sig);
}

// The supervisor's life: waits for the command; when it ends, kills what it left and exits with
// its status; when the thread that runs the build dies (SIGUSR1, or a new parent), kills the
// whole tree and itself. A SIGTERM (the runner's timeout or cancel, sent to the whole group)
// gives the command kKillGrace less a second before the supervisor kills the tree itself, ahead
// of the runner's own SIGKILL, which would end the supervisor before it could.
[[noreturn]] void supervise(pid_t parent, pid_t command, const sigset_t& waited) {
  // Only the command's tree holds the output pipe: EOF comes when it is gone.
  ::close_range(3, ~0U, 0);
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    if (null > 2) ::close(null);
  }
  std::int64_t kill_at = -1;
  for (;;) {
    timespec wait{0, 200 * 1000 * 1000};
    siginfo_t info{};
    const int sig = ::sigtimedwait(&waited, &info, &wait);
    if (sig == SIGUSR1 || ::getppid() != parent) {
      kill_descendants();
      ::kill(0, SIGKILL);  // and whatever is left of the group, itself included
      ::_exit(128 + SIGKILL);
    }
    if ((sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT) && kill_at < 0)
      kill_at = now_ms() + std::chrono::duration_cast<std::chrono::milliseconds>(kKillGrace).count() - 1000;
    int st = 0;
    pid_t w;
    while ((w = ::waitpid(-1, &st, WNOHANG)) > 0) {
      if (w == command) {
        kill_descendants();
        exit_like(st);
      }
    }
    if (kill_at >= 0 && now_ms() >= kill_at) {
      ::kill(command, SIGKILL);
      kill_at = now_ms() + 1000000;  // the command's reap above does the rest
    }
  }
}

// Runs in the child between fork and exec: only async-signal-safe calls. Its own process group
// (so a timeout kills everything the build started), then the user's groups and ids.
struct DropPrivileges {
  const BuildUser* user;
  pid_t parent;
  template <class Launcher>
  bp::error_code on_exec_setup(Launcher&, const bp::filesystem::path&, const char* const*) {
    auto err = [](int e) { return bp::error_code(e, boost::system::system_category()); };
    if (::setpgid(0, 0) != 0) return err(errno);
    if (user->switch_user) {
      if (::setgroups(user->groups.size(), user->groups.data()) != 0) return err(errno);
      if (::setgid(user->gid) != 0) return err(errno);
      if (::setuid(user->uid) != 0) return err(errno);
      // Paranoia: a setuid that left a way back to root must stop the build.
      if (::setuid(0) == 0) return err(EPERM);
    }
    // No descriptor of mesh-control's reaches the build: its broker connection (which would let
    // the build speak on the broker as the control plane, and keeps a killed instance's
    // subscriptions alive while the build runs), its store, its listening sockets. Marked
    // close-on-exec rather than closed, so the launcher's own exec-error pipe still works.
    if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
      // Kernels before 5.11: one by one, up to the descriptor limit.
      rlimit lim{};
      const rlim_t top = ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY
                             ? std::min<rlim_t>(lim.rlim_cur, 1u << 20)
                             : 65536;
      for (rlim_t fd = 3; fd < top; ++fd) {
        const int flags = ::fcntl(static_cast<int>(fd), F_GETFD);
        if (flags >= 0 && ::fcntl(static_cast<int>(fd), F_SETFD, flags | FD_CLOEXEC) != 0) return err(errno);
      }
    }
    // This process becomes the build's supervisor (decision record 74): a subreaper, told by
    // SIGUSR1 when the thread that runs the build dies (set after setuid: a change of
    // credentials clears the setting). The signals it waits for are blocked before the fork, so
    // none is lost; the command's process restores the mask.
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) return err(errno);
    // Children must be waitable whatever mesh-control did with SIGCHLD (an ignored one is
    // inherited, and would reap them behind the supervisor's back).
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    if (::sigaction(SIGCHLD, &dfl, nullptr) != 0) return err(errno);
    sigset_t waited, none;
    supervisor_signals(waited);
    ::sigemptyset(&none);
    if (::sigprocmask(SIG_BLOCK, &waited, nullptr) != 0) return err(errno);
    if (::prctl(PR_SET_PDEATHSIG, SIGUSR1) != 0) return err(errno);
    if (::getppid() != parent) return err(ESRCH);
    const pid_t supervisor = ::getpid();
    const pid_t command = ::fork();
    if (command < 0) return err(errno);
    if (command > 0) supervise(parent, command, waited);  // never returns
    // The command: the launcher execs it on return, with no signal blocked (exec would keep a
    // blocked SIGTERM of mesh-control's threads). It dies with its supervisor at least.
    if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0) return err(errno);
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return err(errno);
    if (::getppid() != supervisor) return err(ESRCH);
    return {};
  }
};

// "artifact big.deb is larger than 1073741824 bytes" — the stage adds which setting raises it.
sdk::Error over_limit(const std::string& name, std::uint64_t seen, std::uint64_t max_size) {
  return sdk::Error{ErrorCode::Failed,
                    "artifact " + name + " has " + std::to_string(seen) + " bytes or more, over the limit of " +
                        std::to_string(max_size) + " bytes",
                    "max_artifact_size"};
}

std::optional<passwd> lookup_user(const std::string& name, std::vector<char>& buf) {
  passwd pw{};
  passwd* found = nullptr;
  buf.resize(16384);
  if (::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || !found) return std::nullopt;
  return pw;
}

bool executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

sdk::Result<BuildUser> resolve_build_user(const std::string& name) {
  const bool root = ::geteuid() == 0;
  BuildUser user;
  if (name.empty()) {
    if (root)
      return sdk::fail(ErrorCode::InvalidArgument,
                       "builds never run as root: set [pipelines] build_user to an unprivileged user", "build_user");
    std::vector<char> buf(16384);
    passwd pw{};
    passwd* found = nullptr;
    user.uid = ::geteuid();
    user.gid = ::getegid();
    if (::getpwuid_r(user.uid, &pw, buf.data(), buf.size(), &found) == 0 && found) user.name = pw.pw_name;
    else user.name = std::to_string(user.uid);
    return user;
  }
  std::vector<char> buf;
  auto pw = lookup_user(name, buf);
  if (!pw) return sdk::fail(ErrorCode::InvalidArgument, "build_user '" + name + "': no such user", "build_user");
  if (pw->pw_uid == 0)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "build_user '" + name + "' is root (uid 0): builds never run as root", "build_user");
  user.name = name;
  user.uid = pw->pw_uid;
  user.gid = pw->pw_gid;
  if (root) {
    int n = 64;
    user.groups.resize(static_cast<std::size_t>(n));
    if (::getgrouplist(name.c_str(), user.gid, user.groups.data(), &n) < 0) {
      user.groups.resize(static_cast<std::size_t>(n));
      ::getgrouplist(name.c_str(), user.gid, user.groups.data(), &n);
    }
    user.groups.resize(static_cast<std::size_t>(std::max(n, 0)));
    // Never a supplementary group 0 (root's group) for a build either.
    std::erase(user.groups, static_cast<gid_t>(0));
    if (user.gid == 0)
      return sdk::fail(ErrorCode::InvalidArgument,
                       "build_user '" + name + "' has group root (gid 0) as its primary group: builds never run "
                       "with root's group", "build_user");
    user.switch_user = true;
    return user;
  }
  if (pw->pw_uid != ::geteuid())
    return sdk::fail(ErrorCode::FailedPrecondition,
                     "build_user '" + name + "': mesh-control runs as uid " + std::to_string(::geteuid()) +
                         " and cannot switch to another user (run it as root, or set build_user to its own user)",
                     "build_user");
  return user;
}

sdk::Result<std::string> find_program(const std::string& program) {
  if (program.empty()) return sdk::fail(ErrorCode::InvalidArgument, "the command is empty", "command");
  if (program.find('/') != std::string::npos) {
    if (program[0] != '/')
      return sdk::fail(ErrorCode::InvalidArgument,
                       "command '" + program + "': a program path must be absolute (or a bare name looked up in " +
                           kBuildPath + ")",
                       "command");
    if (!executable_file(program))
      return sdk::fail(ErrorCode::InvalidArgument, "command '" + program + "' does not exist or is not executable",
                       "command");
    return program;
  }
  std::string_view path = kBuildPath;
  while (!path.empty()) {
    auto colon = path.find(':');
    std::string dir(path.substr(0, colon));
    path = colon == std::string_view::npos ? std::string_view{} : path.substr(colon + 1);
    std::string candidate = dir + "/" + program;
    if (executable_file(candidate)) return candidate;
  }
  return sdk::fail(ErrorCode::InvalidArgument,
                   "command '" + program + "' not found (looked in " + kBuildPath + ")", "command");
}

std::vector<std::string> build_environment(const BuildUser& user, const std::string& work_dir,
                                           const std::vector<std::string>& extra) {
  std::map<std::string, std::string> env{{"PATH", kBuildPath},
                                         {"HOME", work_dir},
                                         {"LC_ALL", "C.UTF-8"},
                                         {"USER", user.name},
                                         {"LOGNAME", user.name}};
  for (const auto& e : extra) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env[e.substr(0, eq)] = e.substr(eq + 1);
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::string describe_command(const std::vector<std::string>& argv) {
  std::string out;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    std::string a = argv[i];
    if (i == 0) a = fs::path(a).filename().string();
    if (!out.empty()) out += ' ';
    out += a;
  }
  return out;
}

sdk::Result<BuildOutcome> run_build(const BuildSpec& spec, const LineSink& sink, const sdk::CancelToken& cancel) {
  if (spec.command.empty()) return sdk::fail(ErrorCode::InvalidArgument, "the command is empty", "command");
  MESH_TRY(exe, find_program(spec.command[0]));
  if (spec.user.switch_user && ::chown(spec.work_dir.c_str(), spec.user.uid, spec.user.gid) != 0)
    return sdk::fail(ErrorCode::Internal,
                     "cannot give the work directory " + spec.work_dir + " to " + spec.user.name + ": " +
                         support::errno_text(errno));

  BuildOutcome outcome;
  std::deque<std::string> tail;
  std::string partial;
  auto emit = [&](std::string_view line) {
    ++outcome.lines;
    if (sink) sink(line);
    tail.emplace_back(line);
    while (tail.size() > spec.tail_lines) tail.pop_front();
  };
  auto take = [&](const char* data, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      if (data[i] == '\n') {
        emit(partial);
        partial.clear();
      } else {
        partial.push_back(data[i]);
        if (partial.size() >= kMaxLine) {
          emit(partial);
          partial.clear();
        }
      }
    }
  };

  const auto started = Clock::now();
  asio::io_context ctx;
  asio::readable_pipe rp(ctx);
  asio::writable_pipe wp(ctx);
  boost::system::error_code ec;
  asio::connect_pipe(rp, wp, ec);
  if (ec) return sdk::fail(ErrorCode::Internal, "cannot make a pipe: " + ec.message());

  std::vector<std::string> args(spec.command.begin() + 1, spec.command.end());
  std::vector<bp::environment::key_value_pair> env;
  for (const auto& e : spec.environment) env.emplace_back(e);
  DropPrivileges drop{&spec.user, ::getpid()};
  std::optional<bp::process> proc;
  try {
    proc.emplace(ctx.get_executor(), bp::filesystem::path(exe), args,
                 bp::process_stdio{nullptr, wp, wp}, bp::process_start_dir(spec.work_dir),
                 bp::process_environment(env), drop);
  } catch (const boost::system::system_error& e) {
    return sdk::fail(ErrorCode::InvalidArgument,
                     "cannot run " + describe_command(spec.command) + " as " + spec.user.name + ": " +
                         e.code().message(),
                     "command");
  }
  wp.close(ec);
  const pid_t pid = proc->id();

  const int fd = rp.native_handle();
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  const auto deadline = started + spec.timeout;
  bool killing = false, sent_kill = false, exited = false, pipe_open = true;
  Clock::time_point kill_at{}, exited_at{};
  int status = 0;
  char buf[65536];
  for (;;) {
    const auto now = Clock::now();
    if (!killing && !exited && (cancel.cancelled() || now >= deadline)) {
      (cancel.cancelled() ? outcome.cancelled : outcome.timed_out) = true;
      killing = true;
      ::kill(-pid, SIGTERM);
      kill_at = now + kKillGrace;
    }
    if (killing && !sent_kill && !exited && now >= kill_at) {
      ::kill(-pid, SIGKILL);
      sent_kill = true;
    }
    if (!exited) {
      siginfo_t info{};
      // WNOWAIT: the zombie keeps the pid, and so the group id, until the final reap below.
      if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) {
        exited = true;
        exited_at = now;
        // Whatever the build left running in its group goes too.
        ::kill(-pid, SIGKILL);
      }
    }
    if (exited && (!pipe_open || now >= exited_at + kPipeGraceAfterExit)) break;
    if (!pipe_open) {
      ::poll(nullptr, 0, kPollMs);
      continue;
    }
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, kPollMs);
    if (r > 0) {
      for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) {
          take(buf, static_cast<std::size_t>(n));
          continue;
        }
        if (n == 0) pipe_open = false;
        else if (errno == EINTR) continue;
        else if (errno != EAGAIN && errno != EWOULDBLOCK) pipe_open = false;
        break;
      }
    }
  }
  if (!partial.empty()) emit(partial);
  // The final reap (the handle's own wait would also do it).
  if (::waitpid(pid, &status, 0) == pid) {
    if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) outcome.exit_code = -WTERMSIG(status);
  }
  proc->detach();
  outcome.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
  outcome.tail.assign(tail.begin(), tail.end());
  return outcome;
}

sdk::Result<std::vector<Artifact>> collect_artifacts(const std::string& dir, const std::vector<std::string>& patterns,
                                                     std::uint64_t max_size) {
  for (const auto& p : patterns) {
    if (p.empty() || p[0] == '/' || p == ".." || p.rfind("../", 0) == 0 || p.find("/../") != std::string::npos ||
        (p.size() >= 3 && p.compare(p.size() - 3, 3, "/..") == 0))
      return sdk::fail(ErrorCode::InvalidArgument,
                       "artifact pattern '" + p + "' must be relative to the work directory, without '..'",
                       "artifacts");
  }
  std::vector<std::string> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  if (ec) return sdk::fail(ErrorCode::Internal, "cannot list " + dir + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return sdk::fail(ErrorCode::Internal, "cannot list " + dir + ": " + ec.message());
    // symlink_status: a link is never followed (nor is a linked directory descended into).
    if (it->symlink_status(ec).type() == fs::file_type::regular)
      files.push_back(fs::relative(it->path(), dir).string());
  }
  std::sort(files.begin(), files.end());
  std::vector<Artifact> out;
  for (const auto& p : patterns) {
    bool matched = false;
    for (const auto& f : files) {
      if (::fnmatch(p.c_str(), f.c_str(), FNM_PATHNAME) != 0) continue;
      matched = true;
      if (std::any_of(out.begin(), out.end(), [&](const Artifact& a) { return a.name == f; })) continue;
      Artifact a;
      a.name = f;
      a.path = (fs::path(dir) / f).string();
      struct stat lst {};
      if (::lstat(a.path.c_str(), &lst) == 0 && static_cast<std::uint64_t>(lst.st_size) > max_size)
        return sdk::fail(over_limit(f, static_cast<std::uint64_t>(lst.st_size), max_size));
      const int fd = ::open(a.path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) return sdk::fail(ErrorCode::Internal, "cannot read artifact " + f + ": " + support::errno_text(errno));
      struct stat st {};
      if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return sdk::fail(ErrorCode::Internal, "artifact " + f + " is not a regular file");
      }
      support::Sha256 h;
      char buf[65536];
      for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) {
          h.update(buf, static_cast<std::size_t>(n));
          a.size += static_cast<std::uint64_t>(n);
          if (a.size > max_size) {
            ::close(fd);
            return sdk::fail(over_limit(f, a.size, max_size));
          }
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          const int e = errno;
          ::close(fd);
          return sdk::fail(ErrorCode::Internal, "cannot read artifact " + f + ": " + support::errno_text(e));
        }
        break;
      }
      ::close(fd);
      a.sha256 = h.hex_digest();
      out.push_back(std::move(a));
    }
    if (!matched)
      return sdk::fail(ErrorCode::FailedPrecondition, "artifact pattern '" + p + "' matched no file", "artifacts");
  }
  std::sort(out.begin(), out.end(), [](const Artifact& a, const Artifact& b) { return a.name < b.name; });
  return out;
}

sdk::Result<std::pair<std::string, std::uint64_t>> copy_bounded(const std::string& from, const std::string& to,
                                                               std::uint64_t max_size, const std::string& name) {
  const int in = ::open(from.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) return sdk::fail(ErrorCode::Internal, "cannot read artifact " + name + ": " + support::errno_text(errno));
  struct stat st {};
  if (::fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(in);
    return sdk::fail(ErrorCode::Internal, "artifact " + name + " is not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_size) {
    ::close(in);
    return sdk::fail(over_limit(name, static_cast<std::uint64_t>(st.st_size), max_size));
  }
  ::unlink(to.c_str());
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) {
    const int e = errno;
    ::close(in);
    return sdk::fail(ErrorCode::Internal, "cannot keep artifact " + name + ": " + support::errno_text(e));
  }
  auto give_up = [&](sdk::Error e) {
    ::close(in);
    ::close(out);
    ::unlink(to.c_str());
    return sdk::fail(std::move(e));
  };
  support::Sha256 h;
  std::uint64_t size = 0;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return give_up({ErrorCode::Internal, "cannot read artifact " + name + ": " + support::errno_text(errno), ""});
    if (n == 0) break;
    size += static_cast<std::uint64_t>(n);
    if (size > max_size) return give_up(over_limit(name, size, max_size));
    h.update(buf, static_cast<std::size_t>(n));
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out, buf + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0)
        return give_up({ErrorCode::Internal, "cannot keep artifact " + name + ": " + support::errno_text(errno), ""});
      done += w;
    }
  }
  ::close(in);
  if (::close(out) != 0) {
    const int e = errno;
    ::unlink(to.c_str());
    return sdk::fail(ErrorCode::Internal, "cannot keep artifact " + name + ": " + support::errno_text(e));
  }
  return std::make_pair(h.hex_digest(), size);
}

}  // namespace mesh::stages::build
