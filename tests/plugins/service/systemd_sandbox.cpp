#include "systemd_sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace mesh::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\n')) ++i;
  return s.substr(i);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tail(const std::string& text, std::size_t bytes = 1500) {
  return text.size() <= bytes ? text : "..." + text.substr(text.size() - bytes);
}

bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::string find_in_path(const std::string& name) {
  for (const char* dir : {"/usr/bin", "/bin", "/usr/sbin", "/sbin"}) {
    std::string p = std::string(dir) + "/" + name;
    if (executable(p)) return p;
  }
  return {};
}

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

SandboxRun run_process(const std::vector<std::string>& argv, milliseconds timeout) {
  SandboxRun result;
  if (argv.empty()) return result;
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return result;
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    result.err = "cannot run " + argv[0] + ": " + std::strerror(rc);
    return result;
  }
  const auto deadline = steady_clock::now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now()).count();
    if (left <= 0) {
      result.timed_out = true;
      break;
    }
    const int n = ::poll(fds, 2, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      result.timed_out = n == 0;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      (i == 0 ? result.out : result.err).append(buf, static_cast<std::size_t>(got));
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  if (result.timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = decode_status(status);
  return result;
}

std::string SystemdSandbox::script_path() { return MESH_TEST_SYSTEMD_SANDBOX_SCRIPT; }

SystemdSandbox::SystemdSandbox(SystemdSandboxOptions options) : options_(std::move(options)) {
  std::string tmpl = "/tmp/" + options_.name + "-XXXXXX";
  if (!::mkdtemp(tmpl.data()))
    throw std::runtime_error("mkdtemp " + tmpl + ": " + std::strerror(errno));
  dir_ = tmpl;
  ::chmod(dir_.c_str(), 0755);
  std::filesystem::create_directories(unit_dir());
  // A name of our own, unique per sandbox: never one of systemd's targets.
  static std::atomic<int> counter{0};
  target_ = options_.name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) +
            ".target";
  write_unit(target_,
             "[Unit]\n"
             "Description=Nox Mesh test sandbox\n"
             "DefaultDependencies=no\n"
             "AllowIsolate=no\n");
}

SystemdSandbox::~SystemdSandbox() {
  stop();
  if (!options_.keep_dir) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

void SystemdSandbox::write_unit(const std::string& name, const std::string& text) const {
  const std::string path = unit_dir() + "/" + name;
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out.flush()) throw std::runtime_error("cannot write " + path);
}

std::string SystemdSandbox::log() const { return read_file(dir_ + "/sandbox.log"); }

bool SystemdSandbox::fail_start(std::string reason) {
  skipped_reason_ = std::move(reason);
  return false;
}

int SystemdSandbox::wait_script(milliseconds timeout) {
  if (script_pid_ <= 0) return script_status_;
  const auto deadline = steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t w = ::waitpid(script_pid_, &status, WNOHANG);
    if (w == script_pid_ || (w < 0 && errno == ECHILD)) {
      script_status_ = w == script_pid_ ? decode_status(status) : -1;
      script_pid_ = 0;
      init_pid_ = 0;
      return script_status_;
    }
    if (steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(milliseconds(20));
  }
}

bool SystemdSandbox::start() {
  if (running()) return true;
  skipped_reason_.clear();
  if (::geteuid() != 0)
    return fail_start("booting systemd in a namespace needs root with CAP_SYS_ADMIN; running as uid " +
                      std::to_string(::geteuid()));
  if (!executable("/lib/systemd/systemd")) return fail_start("/lib/systemd/systemd is not installed");
  const std::string unshare = find_in_path("unshare"), nsenter = find_in_path("nsenter");
  if (unshare.empty() || nsenter.empty())
    return fail_start("unshare/nsenter (util-linux) are not installed");
  if (!executable(script_path())) return fail_start(script_path() + " is not executable");

  const std::string log_path = dir_ + "/sandbox.log";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  std::vector<std::string> argv = options_.launch_prefix_for_test;
  argv.push_back("/bin/bash");
  argv.push_back(script_path());
  if (options_.overlay) {
    argv.push_back("--overlay");
    argv.push_back(overlay_dir());
  }
  argv.push_back(dir_);
  argv.push_back(target_);
  for (const auto& p : options_.keep_paths) argv.push_back(p);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return fail_start(std::string("cannot run the sandbox script: ") + std::strerror(rc));
  script_pid_ = pid;
  script_status_ = -1;
  cgroup_name_ = "nox-mesh-test-" + std::to_string(pid);

  const auto deadline = steady_clock::now() + options_.boot_timeout;
  for (;;) {
    if (const int code = wait_script(milliseconds(0)); code != -1 || !running())
      return fail_start("the systemd sandbox could not start (exit " + std::to_string(code) +
                        "): " + trim(tail(log())));
    const std::string pid_text = trim(read_file(dir_ + "/init.pid"));
    if (!pid_text.empty()) {
      init_pid_ = static_cast<pid_t>(std::atoi(pid_text.c_str()));
      struct stat st {};
      const std::string socket = "/proc/" + pid_text + "/root/run/systemd/private";
      if (init_pid_ > 0 && ::stat(socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) break;
    }
    if (steady_clock::now() >= deadline) {
      stop();
      return fail_start("systemd did not come up within " +
                        std::to_string(options_.boot_timeout.count() / 1000) +
                        " s (no private bus socket): " + trim(tail(log())));
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
  SandboxRun ready =
      run({"systemctl", "is-system-running", "--wait"}, std::max(left, milliseconds(1000)));
  const std::string state = trim(ready.out);
  if (state != "running" && state != "degraded") {
    stop();
    return fail_start("systemd did not finish booting within " +
                      std::to_string(options_.boot_timeout.count() / 1000) + " s (state '" + state +
                      "', " + trim(ready.err) + "): " + trim(tail(log())));
  }
  return true;
}

bool SystemdSandbox::stop() {
  if (!running()) return script_status_ == 0;
  if (init_pid_ > 0) (void)systemctl({"poweroff"});
  int code = wait_script(milliseconds(10000));
  if (code == -1 && running()) {
    ::kill(script_pid_, SIGTERM);  // the script SIGKILLs the namespace's init and cleans up
    code = wait_script(milliseconds(5000));
  }
  if (code == -1 && running()) {
    if (init_pid_ > 0) ::kill(init_pid_, SIGKILL);
    ::kill(script_pid_, SIGKILL);
    code = wait_script(milliseconds(5000));
  }
  return code == 0;
}

SandboxRun SystemdSandbox::run(const std::vector<std::string>& argv, milliseconds timeout) const {
  if (init_pid_ <= 0) {
    SandboxRun r;
    r.err = "the sandbox is not running";
    return r;
  }
  std::vector<std::string> full = {"nsenter", "-t", std::to_string(init_pid_), "-p", "-m", "--"};
  full.insert(full.end(), argv.begin(), argv.end());
  return run_process(full, timeout);
}

SandboxRun SystemdSandbox::systemctl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"systemctl"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, milliseconds(30000));
}

}  // namespace mesh::testing
