#include "mesh/host/briefing.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "mesh/common/fs.h"
#include "mesh/common/protocol.h"
#include "mesh/host/describe.h"
#include "mesh/host/runtime.h"

namespace mesh::host {
namespace {

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
  std::size_t start = 0;
  while (start <= p.size()) {
    std::size_t colon = p.find(':', start);
    if (colon == std::string::npos) colon = p.size();
    std::string dir = p.substr(start, colon - start);
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
    start = colon + 1;
  }
  return false;
}

// Runs argv with stdout captured, killed after `timeout_ms`. nullopt on failure or timeout.
std::optional<std::string> run_captured(const std::vector<std::string>& argv, int timeout_ms) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    ::dup2(fds[1], 1);
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::dup2(devnull, 2);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    char buf[4096];
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    if (out.size() < 64 * 1024) out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return out;
}

std::string first_line(std::string s) {
  auto nl = s.find('\n');
  if (nl != std::string::npos) s.resize(nl);
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s.substr(0, 200);
}

std::string os_release() {
  std::ifstream in("/etc/os-release");
  std::string line, pretty;
  while (std::getline(in, line))
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      pretty = line.substr(12);
      if (pretty.size() >= 2 && (pretty.front() == '"' || pretty.front() == '\'')) pretty = pretty.substr(1, pretty.size() - 2);
    }
  return pretty;
}

}  // namespace

std::vector<BriefingLine> run_briefing_checks(const HostConfig& config, sdk::Value* schemas) {
  std::vector<BriefingLine> lines;
  if (schemas) *schemas = sdk::Value::array();
  // The state directory: everything the host keeps lives there.
  {
    auto dir = common::make_dirs(config.state_dir, 0700);
    const std::string probe = config.state_dir + "/.briefing-probe";
    auto w = dir ? common::write_file_atomic(probe, "ok\n", 0600) : dir;
    ::unlink(probe.c_str());
    lines.push_back({"state_dir", w ? "pass" : "fail",
                     w ? config.state_dir + " is writable"
                       : config.state_dir + " is not writable: " + w.error().message});
  }
  // Free disk where the state (and, usually, what the mesh manages) lives.
  {
    struct statvfs st {};
    if (::statvfs(config.state_dir.c_str(), &st) == 0) {
      const unsigned long long free_mib =
          static_cast<unsigned long long>(st.f_bavail) * st.f_frsize / (1024ULL * 1024ULL);
      const bool ok = free_mib >= config.min_free_mib;
      lines.push_back({"disk", ok ? "pass" : "fail",
                       std::to_string(free_mib) + " MiB free at " + config.state_dir + " (at least " +
                           std::to_string(config.min_free_mib) + " MiB " + (ok ? "required)" : "needed)")});
    } else {
      lines.push_back({"disk", "fail", "cannot measure free space at " + config.state_dir + ": " + std::strerror(errno)});
    }
  }
  // Each configured provider plugin, loaded and configured as the daemon will.
  for (const auto& name : config.load) {
    auto p = load_providers(config.plugin_dirs, {name}, &config, config.state_dir);
    lines.push_back({"plugin:" + name, p ? "pass" : "fail",
                     p ? "loads from " + loader::describe_dirs(config.plugin_dirs) : p.error().describe()});
    // Its schema, as `mesh-host plugins describe --output json` prints it, for the control
    // plane's check of declarations to this node (docs/protocol.md "Briefing").
    if (p && schemas)
      for (const auto& type : p->registry.types())
        if (const sdk::Provider* provider = p->registry.find(type)) {
          sdk::Value s = schema_json(provider->schema());
          s.set("name", type);
          schemas->as_array().push_back(std::move(s));
        }
  }
  if (schemas && schemas->to_json().size() > kMaxBriefingSchemasBytes) {
    lines.push_back({"schemas", "info",
                     "provider schemas not sent: " + std::to_string(schemas->to_json().size()) +
                         " bytes of JSON, over the limit of " + std::to_string(kMaxBriefingSchemasBytes) +
                         " (the control plane checks declarations to this node for shape only)"});
    *schemas = sdk::Value(nullptr);
  }
  // Facts.
  {
    std::string os = os_release();
    std::string kernel;
    std::ifstream k("/proc/sys/kernel/osrelease");
    std::getline(k, kernel);
    lines.push_back({"os", "info", (os.empty() ? std::string("unknown (no /etc/os-release)") : os) +
                                       (kernel.empty() ? "" : ", kernel " + kernel)});
  }
  {
    const bool apt = on_path("apt-get"), dpkg = on_path("dpkg");
    std::string detail = apt || dpkg ? std::string(apt ? "apt" : "") + (apt && dpkg ? " and " : "") + (dpkg ? "dpkg" : "") + " present"
                                     : "none found (apt, dpkg)";
    lines.push_back({"package_manager", "info", detail});
  }
  {
    struct stat st {};
    const bool systemd = ::stat("/run/systemd/system", &st) == 0 && S_ISDIR(st.st_mode);
    lines.push_back({"service_manager", "info", systemd ? "systemd running" : "systemd not running"});
  }
  {
    std::string detail;
    for (const char* engine : {"podman", "docker"}) {
      if (!on_path(engine)) continue;
      auto v = run_captured({engine, "version", "--format", "{{.Client.Version}}"}, 2000);
      if (v && !first_line(*v).empty()) {
        detail = std::string(engine) + " " + first_line(*v);
        break;
      }
      detail = std::string(engine) + " installed but `" + engine + " version` did not answer within 2 s";
    }
    lines.push_back({"container_engine", "info", detail.empty() ? "none found (podman, docker)" : detail});
  }
  return lines;
}

namespace {

// [{check, outcome, detail}, …]: the lines as the briefing request and the local view carry them.
sdk::Value lines_value(const std::vector<BriefingLine>& lines) {
  sdk::Value arr = sdk::Value::array();
  for (const auto& l : lines) {
    sdk::Value e = sdk::Value::object();
    e.set("check", l.check);
    e.set("outcome", l.outcome);
    e.set("detail", l.detail);
    arr.as_array().push_back(std::move(e));
  }
  return arr;
}

}  // namespace

std::string briefing_request_json(const std::string& node, const std::vector<BriefingLine>& lines,
                                  std::int64_t at_ms, const sdk::Value* schemas) {
  sdk::Value v = sdk::Value::object();
  v.set("node", node);
  v.set("at_ms", at_ms);
  v.set("host_version", protocol::kHostVersion);
  v.set("lines", lines_value(lines));
  if (schemas && schemas->is_array()) v.set("schemas", *schemas);
  return v.to_json();
}

sdk::Value local_briefing(const std::string& node, const std::vector<BriefingLine>& lines) {
  bool failed = false;
  for (const auto& l : lines) failed = failed || l.outcome == "fail";
  sdk::Value v = sdk::Value::object();
  v.set("node", node);
  v.set("outcome", failed ? "fail" : "pass");
  v.set("lines", lines_value(lines));
  return v;
}

std::string briefing_text(const std::string& node, const sdk::Value& briefing) {
  const std::string outcome = briefing.get_string("outcome", "fail");
  std::string out = "briefing " + node + ": " + outcome + "\n";
  if (const sdk::Value* lines = briefing.find("lines"); lines && lines->is_array())
    for (const auto& l : lines->as_array()) {
      std::string o = l.get_string("outcome");
      o.resize(6, ' ');
      out += "  " + o + " " + l.get_string("check") + ": " + l.get_string("detail") + "\n";
    }
  out += std::string("eligible: ") +
         (outcome == "pass" ? "yes\n" : "no (a failed line makes the node ineligible for assignment until a briefing passes)\n");
  return out;
}

}  // namespace mesh::host
