#include "unit_logs.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <utility>

extern char** environ;

namespace mesh::plugins::service {
namespace {

constexpr std::size_t kMaxCaptureBytes = 256 * 1024;
constexpr off_t kTailBytes = 64 * 1024;
constexpr std::chrono::milliseconds kJournalTimeout{3000};
constexpr const char* kJournalctlPaths[] = {"/usr/bin/journalctl", "/bin/journalctl"};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (!trim(line).empty()) out.emplace_back(trim(line));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : " | ") + l;
  return out;
}

// "append:/x", "file:/x", "truncate:/x" -> "/x"; anything else (journal, inherit, a path with
// specifiers we would have to expand) -> "".
std::string output_path(std::string_view value) {
  for (std::string_view prefix : {"append:", "file:", "truncate:"}) {
    if (value.substr(0, prefix.size()) == prefix) {
      std::string_view path = value.substr(prefix.size());
      if (!path.empty() && path.front() == '/' && path.find('%') == std::string_view::npos)
        return std::string(path);
      return "";
    }
  }
  return "";
}

}  // namespace

std::optional<std::string> run_capture(const std::vector<std::string>& argv,
                                       std::chrono::milliseconds timeout) {
  if (argv.empty() || ::access(argv[0].c_str(), X_OK) != 0) return std::nullopt;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  // Nothing of the host but these three descriptors reaches the child (its broker connection above all).
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return std::nullopt;
  }
  std::string out;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      timed_out = n == 0;
      break;
    }
    char buf[4096];
    const ssize_t got = ::read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    if (out.size() < kMaxCaptureBytes)
      out.append(buf, std::min(static_cast<std::size_t>(got), kMaxCaptureBytes - out.size()));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  pid_t w;
  do {
    w = ::waitpid(pid, &status, 0);
  } while (w < 0 && errno == EINTR);
  if (timed_out) return std::nullopt;
  // ECHILD: the host ignores SIGCHLD, so the status is lost; the output is still good.
  if (w < 0) return errno == ECHILD ? std::optional<std::string>(out) : std::nullopt;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return out;
}

std::optional<std::string> output_file_of(const std::vector<std::string>& unit_files) {
  std::string out, err;
  for (const auto& file : unit_files) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
      std::string_view l = trim(line);
      if (l.empty() || l.front() == '#' || l.front() == ';') continue;
      auto eq = l.find('=');
      if (eq == std::string_view::npos) continue;
      const std::string_view key = trim(l.substr(0, eq));
      const std::string_view value = trim(l.substr(eq + 1));
      if (key == "StandardOutput") out = output_path(value);
      if (key == "StandardError") err = output_path(value);
    }
  }
  if (!out.empty()) return out;
  if (!err.empty()) return err;
  return std::nullopt;
}

std::optional<std::vector<std::string>> tail_file(const std::string& path, int lines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > kTailBytes ? size - kTailBytes : 0;
  in.seekg(start);
  std::string text(static_cast<std::size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (start > 0) {
    auto nl = text.find('\n');  // drop the partial first line
    text.erase(0, nl == std::string::npos ? text.size() : nl + 1);
  }
  auto all = split_lines(text);
  if (static_cast<int>(all.size()) > lines) all.erase(all.begin(), all.end() - lines);
  return all;
}

std::string last_log_lines(const std::string& unit, const std::vector<std::string>& unit_files,
                           std::chrono::system_clock::time_point since, int lines) {
  const auto since_s =
      std::chrono::duration_cast<std::chrono::seconds>(since.time_since_epoch()).count() - 1;
  std::string journal_note = "journalctl is not installed";
  for (const char* journalctl : kJournalctlPaths) {
    if (::access(journalctl, X_OK) != 0) continue;
    auto out = run_capture({journalctl, "--unit", unit, "--lines", std::to_string(lines),
                            "--since", "@" + std::to_string(since_s), "--no-pager", "--quiet",
                            "--output", "cat"},
                           kJournalTimeout);
    if (!out) {
      journal_note = "journalctl failed";
    } else {
      auto got = split_lines(*out);
      if (!got.empty()) return "last log lines (journal): " + join(got);
      journal_note = "journalctl found no entries";
    }
    break;
  }
  std::string file_note = "the unit has no StandardOutput=append:FILE";
  if (auto file = output_file_of(unit_files)) {
    auto got = tail_file(*file, lines);
    if (got && !got->empty()) return "last log lines (" + *file + "): " + join(*got);
    file_note = *file + (got ? " is empty" : " cannot be read");
  }
  return "no journal available (" + journal_note + "; " + file_note + ")";
}

}  // namespace mesh::plugins::service
