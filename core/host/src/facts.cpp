#include "mesh/host/facts.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <vector>

namespace mesh::host {
namespace {

// The directory holding `program` (executable) on `path`, or "".
std::string find_on_path(const std::string& program, const std::string& path) {
  std::string p = path;
  if (p.empty()) {
    const char* env = std::getenv("PATH");
    p = env ? env : "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
  }
  std::size_t start = 0;
  while (start <= p.size()) {
    std::size_t colon = p.find(':', start);
    if (colon == std::string::npos) colon = p.size();
    std::string dir = p.substr(start, colon - start);
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return dir + "/" + program;
    start = colon + 1;
  }
  return "";
}

// Runs argv (argv[0] a full path) with stdout captured, killed after `timeout_ms`. nullopt on
// failure, a non-zero exit or the timeout. stdin and stderr are /dev/null; no shell.
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
    // Nothing of the host but these three descriptors reaches the probe (its broker connection).
    ::close_range(3, ~0U, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
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
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s.substr(0, 200);
}

// A value a fact may hold: 1 to kMaxFactValue printable ASCII characters or UTF-8 bytes.
bool fact_value_ok(const std::string& v) {
  if (v.empty() || v.size() > kMaxFactValue) return false;
  for (unsigned char c : v)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

void set_fact(Facts& facts, const std::string& key, const std::string& value) {
  if (fact_value_ok(value)) facts[key] = value;
}

std::string join_root(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  return (root.back() == '/' ? root.substr(0, root.size() - 1) : root) + path;
}

}  // namespace

std::string unquote_os_release(const std::string& raw) {
  std::string v = raw;
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t' || v.back() == '\r')) v.pop_back();
  if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') return v.substr(1, v.size() - 2);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') {
    std::string out;
    for (std::size_t i = 1; i + 1 < v.size(); ++i) {
      // Inside double quotes a backslash escapes $ " \ and `, as in a shell.
      if (v[i] == '\\' && i + 2 < v.size() &&
          (v[i + 1] == '$' || v[i + 1] == '"' || v[i + 1] == '\\' || v[i + 1] == '`'))
        ++i;
      out += v[i];
    }
    return out;
  }
  return v;
}

std::string dpkg_arch(const std::string& machine) {
  static const std::pair<const char*, const char*> kMap[] = {
      {"x86_64", "amd64"},   {"amd64", "amd64"},     {"aarch64", "arm64"},  {"arm64", "arm64"},
      {"armv7l", "armhf"},   {"armv6l", "armel"},    {"armv5tel", "armel"}, {"i386", "i386"},
      {"i486", "i386"},      {"i586", "i386"},       {"i686", "i386"},      {"ppc64le", "ppc64el"},
      {"ppc64", "ppc64"},    {"s390x", "s390x"},     {"riscv64", "riscv64"}, {"mips64", "mips64el"},
      {"loongarch64", "loong64"},
  };
  for (const auto& [m, a] : kMap)
    if (machine == m) return a;
  return machine;
}

MachineProbe probe_machine(const FactSources& sources) {
  MachineProbe probe;
  Facts& facts = probe.facts;

  // os-release(5): /etc/os-release, else /usr/lib/os-release.
  for (const char* candidate : {"/etc/os-release", "/usr/lib/os-release"}) {
    const std::string file = join_root(sources.root, candidate);
    std::ifstream in(file);
    if (!in) continue;
    probe.os_release_path = file;
    std::string line;
    while (std::getline(in, line)) {
      const auto eq = line.find('=');
      if (line.empty() || line[0] == '#' || eq == std::string::npos) continue;
      const std::string key = line.substr(0, eq);
      const std::string value = unquote_os_release(line.substr(eq + 1));
      if (key == "ID") set_fact(facts, "os.id", value);
      else if (key == "VERSION_ID") set_fact(facts, "os.version_id", value);
      else if (key == "VERSION_CODENAME") set_fact(facts, "os.codename", value);
      else if (key == "PRETTY_NAME") probe.os_pretty = value.substr(0, 200);
    }
    break;
  }

  struct utsname u {};
  const bool have_uname = ::uname(&u) == 0;
  if (have_uname) set_fact(facts, "kernel", u.release);

  const std::string apt = find_on_path("apt-get", sources.path);
  const std::string dpkg = find_on_path("dpkg", sources.path);
  probe.apt = !apt.empty();
  probe.dpkg = !dpkg.empty();
  facts["package_manager"] = probe.apt && probe.dpkg ? "apt" : "none";

  // The architecture packages are built for: dpkg's own answer, else the kernel's machine.
  if (!dpkg.empty())
    if (auto a = run_captured({dpkg, "--print-architecture"}, sources.program_timeout_ms))
      set_fact(facts, "arch", first_line(*a));
  if (!facts.count("arch") && have_uname) set_fact(facts, "arch", dpkg_arch(u.machine));

  {
    struct stat st {};
    probe.systemd = ::stat(join_root(sources.root, "/run/systemd/system").c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    facts["service_manager"] = probe.systemd ? "systemd" : "none";
  }

  facts["container_engine"] = "none";
  for (const char* engine : {"podman", "docker"}) {
    const std::string program = find_on_path(engine, sources.path);
    if (program.empty()) continue;
    auto v = run_captured({program, "version", "--format", "{{.Client.Version}}"}, sources.program_timeout_ms);
    if (v && !first_line(*v).empty()) {
      probe.container_detail = std::string(engine) + " " + first_line(*v);
      facts["container_engine"] = engine;
      break;
    }
    if (probe.container_detail.empty())
      probe.container_detail = std::string(engine) + " installed but `" + engine + " version` did not answer within " +
                               std::to_string(sources.program_timeout_ms / 1000) + " s";
  }
  return probe;
}

}  // namespace mesh::host
