#include "mesh/testing/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "mesh/testing/temp_dir.h"

extern char** environ;

namespace mesh::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

/// The test's environment with `extra` ("K=V") entries added or replacing same-named ones.
std::vector<std::string> merged_environment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  for (const auto& kv : extra) {
    const std::string key = kv.substr(0, kv.find('=') + 1);  // "K=" (or the whole entry)
    bool replaced = false;
    for (auto& cur : env)
      if (cur.compare(0, key.size(), key) == 0) {
        cur = kv;
        replaced = true;
      }
    if (!replaced) env.push_back(kv);
  }
  return env;
}

/// argv[0] resolved against PATH (execvpe semantics without calling it after fork).
std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return name;  // execve fails with ENOENT, reported as such
}

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1000;
}

/// Forks and execs. The child gets stdin/stdout/stderr from the given files, no other inherited
/// descriptors, default signal mask and SIGPIPE, and dies with its parent thread. Returns the pid,
/// or throws when fork fails; `exec_errno` is set to the errno of a failed execve (else 0).
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const std::string& stdin_path, const std::string& stdout_path,
            const std::string& stderr_path, int& exec_errno) {
  if (argv.empty()) throw std::runtime_error("spawn: empty argv");
  // Everything the child needs is prepared before fork: after it only async-signal-safe calls.
  const std::string program = resolve_program(argv[0]);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const std::vector<std::string> envs = merged_environment(env);
  std::vector<char*> cenv;
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);

  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    int fd_in = ::open(stdin_path.c_str(), O_RDONLY);
    int fd_out = ::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    int fd_err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    int e = 0;
    if (fd_in < 0 || fd_out < 0 || fd_err < 0 || ::dup2(fd_in, 0) < 0 || ::dup2(fd_out, 1) < 0 ||
        ::dup2(fd_err, 2) < 0) {
      e = errno;
      [[maybe_unused]] auto n = ::write(err_pipe[1], &e, sizeof e);
      ::_exit(127);
    }
    // Close every other inherited descriptor (sockets of the test's own clients included), but
    // keep the close-on-exec error pipe until execve.
    const unsigned p = static_cast<unsigned>(err_pipe[1]);
    if (p > 3) ::close_range(3, p - 1, 0);
    ::close_range(p + 1, ~0U, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::execve(program.c_str(), cargv.data(), cenv.data());
    e = errno;
    [[maybe_unused]] auto n = ::write(err_pipe[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(err_pipe[1]);
  exec_errno = 0;
  int e = 0;
  ssize_t n;
  do n = ::read(err_pipe[0], &e, sizeof e);
  while (n < 0 && errno == EINTR);
  ::close(err_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof e)) exec_errno = e;
  return pid;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::vector<std::string>& env, int timeout_ms,
                          const std::string& stdin_text) {
  TempDir dir;
  const auto in = dir.path() / "stdin";
  const auto out = dir.path() / "stdout";
  const auto err = dir.path() / "stderr";
  write_file(in, stdin_text);
  int exec_errno = 0;
  const pid_t pid = spawn(argv, env, in, out, err, exec_errno);
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) break;
    if (Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ProcessResult result{timed_out ? -SIGKILL : decode_status(status), read_file(out),
                       read_file(err)};
  if (exec_errno != 0) {
    result.exit_code = 127;
    result.err += "cannot execute " + argv[0] + ": " + std::strerror(exec_errno) + "\n";
  }
  return result;
}

struct BackgroundProcess::Files {
  TempDir dir;
  std::filesystem::path out = dir.path() / "stdout";
  std::filesystem::path err = dir.path() / "stderr";
};

BackgroundProcess::BackgroundProcess(const std::vector<std::string>& argv,
                                     const std::vector<std::string>& env)
    : files_(std::make_unique<Files>()) {
  int exec_errno = 0;
  pid_ = spawn(argv, env, "/dev/null", files_->out, files_->err, exec_errno);
  if (exec_errno != 0) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    throw std::runtime_error("cannot execute " + argv[0] + ": " + std::strerror(exec_errno));
  }
}

BackgroundProcess::~BackgroundProcess() {
  if (running()) stop(SIGTERM, 3000);
}

bool BackgroundProcess::running() {
  if (reaped_) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    exit_code_ = decode_status(status);
    return false;
  }
  if (r < 0 && errno == ECHILD) {  // reaped elsewhere (a SIGCHLD handler of the test)
    reaped_ = true;
    return false;
  }
  return true;
}

int BackgroundProcess::stop(int signal, int timeout_ms) {
  if (!running()) return exit_code_;
  ::kill(pid_, signal);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (running()) {
    if (Clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      pid_t r;
      do r = ::waitpid(pid_, &status, 0);
      while (r < 0 && errno == EINTR);
      reaped_ = true;
      exit_code_ = r == pid_ ? decode_status(status) : -SIGKILL;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return exit_code_;
}

int BackgroundProcess::exit_code() {
  running();
  return exit_code_;
}

std::string BackgroundProcess::stdout_text() const { return read_file(files_->out); }
std::string BackgroundProcess::stderr_text() const { return read_file(files_->err); }

bool BackgroundProcess::wait_for_output(const std::string& needle, int timeout_ms) {
  const auto found = [&] {
    return stderr_text().find(needle) != std::string::npos ||
           stdout_text().find(needle) != std::string::npos;
  };
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const bool alive = running();
    if (found()) return true;
    if (!alive || Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

namespace {

// The lowest port of the kernel's ephemeral range (net.ipv4.ip_local_port_range), from which
// every outgoing connection of every process here takes its local port; 32768 when unreadable.
int ephemeral_low() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (in >> low >> high && low > 1024 && low <= high) return low;
  return 32768;
}

// Binds 127.0.0.1:port (0: one the kernel picks) and returns the bound port, or -1 when taken.
int bind_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int e = errno;
    ::close(fd);
    if (port != 0 && e == EADDRINUSE) return -1;
    throw std::runtime_error("bind 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(e));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

int free_tcp_port() {
  // Below the ephemeral range: a port the kernel hands out (bind to 0) is also one that any
  // process's next outgoing connection may take as its local port between this check and the
  // server's bind — the "address already in use" that failed a 3-server cluster's start in CI.
  // Below it only another test's listener can take it, and the pick is random over ~20,000
  // ports, never the same twice in one process.
  static std::mutex mutex;
  static std::set<int> handed_out;
  static std::mt19937 random{std::random_device{}()};
  const int high = ephemeral_low() - 1;
  const int low = std::max(10000, high - 20000);
  std::lock_guard lock(mutex);
  if (high - low >= 1000) {
    std::uniform_int_distribution<int> pick(low, high);
    for (int attempt = 0; attempt < 200; ++attempt) {
      const int port = pick(random);
      if (handed_out.count(port)) continue;
      if (bind_loopback(port) == port) {
        handed_out.insert(port);
        return port;
      }
    }
  }
  return bind_loopback(0);
}

bool accepts_tcp(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

bool eventually(const std::function<bool()>& pred, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

}  // namespace mesh::testing
