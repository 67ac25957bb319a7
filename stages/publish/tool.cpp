#include "tool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <thread>

extern char** environ;

namespace mesh::stages::publish {
namespace {

constexpr std::size_t kKeep = 64 * 1024;

void append_capped(std::string& out, const char* data, std::size_t n) {
  out.append(data, n);
  if (out.size() > 2 * kKeep) out.erase(0, out.size() - kKeep);
}

std::vector<std::string> environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry(*e);
    const std::string_view key = entry.substr(0, entry.find('='));
    if (key == "PATH" || key == "LANG" || key == "LANGUAGE" || key.rfind("LC_", 0) == 0) continue;
    env.emplace_back(entry);
  }
  env.emplace_back(std::string("PATH=") + kToolPath);
  env.emplace_back("LC_ALL=C");
  return env;
}

}  // namespace

std::string find_tool(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : std::string();
  std::string_view path = kToolPath;
  while (!path.empty()) {
    const auto colon = path.find(':');
    const std::string candidate = std::string(path.substr(0, colon)) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) break;
    path.remove_prefix(colon + 1);
  }
  return {};
}

std::string ToolResult::describe(const std::string& what) const {
  std::string tail = out;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  // The last lines say why.
  std::size_t cut = tail.size();
  for (int lines = 0; lines < 8 && cut != std::string::npos && cut > 0; ++lines) cut = tail.rfind('\n', cut - 1);
  if (cut != std::string::npos && cut > 0) tail = tail.substr(cut + 1);
  if (tail.size() > 2000) tail = tail.substr(tail.size() - 2000);
  // One line: the error is a run's one-line summary ("a; b" for the lines a and b).
  std::string joined;
  for (std::size_t start = 0; start <= tail.size();) {
    const auto nl = tail.find('\n', start);
    std::string line = tail.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) joined += (joined.empty() ? "" : "; ") + line;
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  tail = std::move(joined);
  std::string head;
  if (!started) head = what + " did not start: " + spawn_error;
  else if (timed_out) head = what + " did not finish in time (killed)";
  else if (cancelled) head = what + " was cancelled";
  else if (exit_code < 0) head = what + " was killed by signal " + std::to_string(-exit_code);
  else head = what + " exited with " + std::to_string(exit_code);
  return tail.empty() ? head : head + ": " + tail;
}

ToolResult run_tool(const Tool& tool, const sdk::CancelToken& cancel) {
  ToolResult r;
  if (tool.argv.empty()) {
    r.spawn_error = "no program";
    return r;
  }
  const std::string program = find_tool(tool.argv[0]);
  if (program.empty()) {
    r.spawn_error = tool.argv[0] + " is not installed (not found in " + kToolPath + ")";
    return r;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    r.spawn_error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (tool.stdout_file.empty())
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  else
    posix_spawn_file_actions_addopen(&actions, 1, tool.stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  // Nothing of mesh-control but these three descriptors reaches the tool (its broker connection
  // above all: gpg may leave a gpg-agent running that would keep it open).
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  if (!tool.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, tool.cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);  // mesh-control blocks SIGTERM/SIGINT: not the child
  posix_spawnattr_setsigdefault(&attr, &all);

  std::vector<std::string> env = environment();
  std::vector<char*> argv, envp;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (std::size_t i = 1; i < tool.argv.size(); ++i) argv.push_back(const_cast<char*>(tool.argv[i].c_str()));
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, program.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    r.spawn_error = program + ": " + std::strerror(rc);
    return r;
  }
  r.started = true;
  const auto deadline = std::chrono::steady_clock::now() + tool.timeout;
  bool open = true;
  int status = 0;
  bool exited = false;
  char buf[8192];
  while (!exited) {
    if (open) {
      pollfd p{fds[0], POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) {
        const ssize_t n = ::read(fds[0], buf, sizeof buf);
        if (n > 0) append_capped(r.out, buf, static_cast<std::size_t>(n));
        else if (n == 0 || (errno != EINTR && errno != EAGAIN)) open = false;
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      exited = true;
      break;
    }
    const bool late = std::chrono::steady_clock::now() >= deadline;
    if (late || cancel.cancelled()) {
      (late ? r.timed_out : r.cancelled) = true;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      exited = true;
    }
  }
  // What is still in the pipe (a grandchild holding it open is not waited for).
  if (open) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{fds[0], POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) break;
      const ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n <= 0) break;
      append_capped(r.out, buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fds[0]);
  if (r.out.size() > kKeep) r.out.erase(0, r.out.size() - kKeep);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.exit_code = -WTERMSIG(status);
  return r;
}

}  // namespace mesh::stages::publish
