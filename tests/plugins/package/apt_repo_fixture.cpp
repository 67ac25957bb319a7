#include "apt_repo_fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace mesh::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string find_in_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  for (const char* dir : {"/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/bin"}) {
    const std::string p = std::string(dir) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return {};
}

void write_file(const std::string& path, const std::string& content, mode_t mode = 0644) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << content;
  f.close();
  if (!f) throw std::runtime_error("cannot write " + path);
  ::chmod(path.c_str(), mode);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void check(const ProgramResult& r, const std::string& what) {
  if (r.exit_code != 0)
    throw std::runtime_error(what + " failed (exit " + std::to_string(r.exit_code) + "): " + r.out);
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("bind 127.0.0.1:0: " + std::string(std::strerror(errno)));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool can_connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

std::string deb_file_name(const std::string& name, const std::string& version) {
  std::string v = version;
  for (auto& c : v)
    if (c == ':') c = '%';
  return name + "_" + v + "_all.deb";
}

}  // namespace

ProgramResult run_program(const std::vector<std::string>& argv, int timeout_ms) {
  ProgramResult result;
  if (argv.empty()) return result;
  const std::string program = find_in_path(argv[0]);
  if (program.empty()) {
    result.exit_code = 127;
    result.out = argv[0] + ": not found";
    return result;
  }
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args[0] = const_cast<char*>(program.c_str());
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::setpgid(0, 0);
    const int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::setenv("LC_ALL", "C", 1);
    ::execv(program.c_str(), args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  bool killed = false;
  std::array<char, 8192> buf;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 && !killed) {
      ::kill(-pid, SIGKILL);
      killed = true;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int n = ::poll(&p, 1, killed ? 1000 : static_cast<int>(std::min<long>(left.count(), 200)));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) {
      if (killed) break;
      continue;
    }
    const ssize_t got = ::read(fds[0], buf.data(), buf.size());
    if (got <= 0) break;
    result.out.append(buf.data(), static_cast<std::size_t>(got));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return result;
}

std::string apt_repo_skip_reason() {
  if (::geteuid() != 0) return "needs root (installs and purges packages with apt and dpkg)";
  for (const char* tool : {"apt-get", "apt-cache", "dpkg", "dpkg-query", "dpkg-deb", "gzip"})
    if (find_in_path(tool).empty()) return std::string(tool) + " not found: needs Debian's apt/dpkg";
  if (find_in_path("dpkg-scanpackages").empty())
    return "dpkg-scanpackages not found (install dpkg-dev)";
  if (find_in_path("python3").empty()) return "python3 not found (serves the test repository)";
  return {};
}

AptRepo::AptRepo(AptRepoOptions options) : options_(options) {
  std::string tmpl = fs::temp_directory_path().string() + "/nox-mesh-apt-repo.XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
  dir_ = tmpl;
  ::chmod(dir_.c_str(), 0755);
  repo_dir_ = dir_ + "/repo";
  fs::create_directories(repo_dir_);
  fs::create_directories(dir_ + "/build");
  sources_file_ = dir_ + "/nox-mesh-test.list";
}

AptRepo::~AptRepo() {
  try {
    stop();
    if (!names_.empty() && ::geteuid() == 0) purge_packages();
    if (port_ != 0) {
      // What apt keeps of this repository outside the temporary folder (non-isolated runs).
      std::error_code ec;
      const std::string prefix = "127.0.0.1:" + std::to_string(port_) + "_";
      for (const auto& e : fs::directory_iterator("/var/lib/apt/lists", ec))
        if (e.path().filename().string().rfind(prefix, 0) == 0) fs::remove(e.path(), ec);
    }
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/var/cache/apt/archives", ec))
      for (const auto& n : names_)
        if (e.path().filename().string().rfind(n + "_", 0) == 0) fs::remove(e.path(), ec);
    if (apt_config_set_) {
      if (saved_apt_config_)
        ::setenv("APT_CONFIG", saved_apt_config_->c_str(), 1);
      else
        ::unsetenv("APT_CONFIG");
    }
    fs::remove_all(dir_, ec);
  } catch (...) {
    // Best effort: a destructor must not throw.
  }
}

void AptRepo::add_package(const AptTestPackage& p) {
  if (p.name.rfind(kPackagePrefix, 0) != 0)
    throw std::invalid_argument("test package names must start with " + std::string(kPackagePrefix) +
                                ": " + p.name);
  const std::string root = dir_ + "/build/" + p.name + "_" + p.version;
  fs::remove_all(root);
  fs::create_directories(root + "/DEBIAN");
  fs::create_directories(root + "/usr/share/nox-mesh-test/" + p.name);
  write_file(root + "/usr/share/nox-mesh-test/" + p.name + "/version", p.version + "\n");
  std::string control = "Package: " + p.name + "\nVersion: " + p.version +
                        "\nArchitecture: all\nMaintainer: Nox Mesh tests <tests@example.invalid>\n"
                        "Section: misc\nPriority: optional\n";
  if (!p.depends.empty()) control += "Depends: " + p.depends + "\n";
  control += "Description: Nox Mesh test package (safe to purge)\n";
  write_file(root + "/DEBIAN/control", control);
  if (p.conffile) {
    fs::create_directories(root + "/etc/nox-mesh-test");
    const std::string conf = "/etc/nox-mesh-test/" + p.name + ".conf";
    write_file(root + conf, "version=" + p.version + "\n");
    write_file(root + "/DEBIAN/conffiles", conf + "\n");
  }
  if (!p.postinst.empty()) {
    write_file(root + "/DEBIAN/postinst", "#!/bin/sh\nset -e\n" + p.postinst + "\n");
    ::chmod((root + "/DEBIAN/postinst").c_str(), 0755);
  }
  const std::string deb = repo_dir_ + "/" + deb_file_name(p.name, p.version);
  check(run_program({"dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, deb}),
        "dpkg-deb --build " + p.name + " " + p.version);
  bool known = false;
  for (const auto& n : names_) known = known || n == p.name;
  if (!known) names_.push_back(p.name);
}

void AptRepo::remove_deb(const std::string& name, const std::string& version) {
  const std::string deb = repo_dir_ + "/" + deb_file_name(name, version);
  if (!fs::remove(deb)) throw std::runtime_error("no such .deb: " + deb);
}

void AptRepo::index() {
  // A test helper may use a shell; the product may not.
  check(run_program({"sh", "-c",
                     "cd '" + repo_dir_ +
                         "' && dpkg-scanpackages -m . /dev/null 2>/dev/null | gzip -9c > "
                         "Packages.gz.new && mv Packages.gz.new Packages.gz"}),
        "dpkg-scanpackages");
}

void AptRepo::write_apt_config() {
  const std::string apt = dir_ + "/apt";
  for (const char* sub : {"/sources.list.d", "/lists/partial", "/archives/partial"})
    fs::create_directories(apt + sub);
  write_file(apt + "/sources.list", "");
  apt_config_file_ = apt + "/apt.conf";
  write_file(apt_config_file_,
             "// Nox Mesh tests: no system sources; lists and archives in a temporary folder.\n"
             "Dir::Etc::sourcelist \"" + apt + "/sources.list\";\n"
             "Dir::Etc::sourceparts \"" + apt + "/sources.list.d\";\n"
             "Dir::State::lists \"" + apt + "/lists\";\n"
             "Dir::Cache::archives \"" + apt + "/archives\";\n"
             "Dir::Cache::pkgcache \"\";\n"
             "Dir::Cache::srcpkgcache \"\";\n"
             "// A dead mirror fails at once instead of after apt's back-off retries (~7 s).\n"
             "Acquire::Retries \"0\";\n");
  for (const char* sub : {"", "/sources.list.d", "/lists", "/archives"})
    ::chmod((apt + sub).c_str(), 0755);
}

void AptRepo::start() {
  if (running()) return;
  const std::string python = find_in_path("python3");
  if (python.empty()) throw std::runtime_error("python3 not found");
  const bool keep_port = port_ != 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (!keep_port) port_ = free_port();
    const std::string log = dir_ + "/http.log";
    const std::string port_text = std::to_string(port_);
    const std::string self_pid = std::to_string(::getpid());
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int devnull = ::open("/dev/null", O_RDONLY);
      const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(devnull, 0);
      ::dup2(out, 1);
      ::dup2(out, 2);
      ::execl(python.c_str(), "python3", "-m", "http.server", "--bind", "127.0.0.1",
              "--directory", repo_dir_.c_str(), port_text.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    server_pid_ = pid;
    const auto deadline = Clock::now() + std::chrono::seconds(15);
    bool up = false;
    bool died = false;
    while (Clock::now() < deadline) {
      if (can_connect(port_)) {
        up = true;
        break;
      }
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        died = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (up) break;
    if (!died) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    server_pid_ = -1;
    if (attempt == 4 || keep_port)
      throw std::runtime_error("the HTTP server did not start on port " + port_text + ": " +
                               server_log());
  }
  write_file(sources_file_, "deb [trusted=yes] http://127.0.0.1:" + std::to_string(port_) + "/ ./\n");
  if (options_.isolate_apt_config && !apt_config_set_) {
    write_apt_config();
    if (const char* old = ::getenv("APT_CONFIG")) saved_apt_config_ = std::string(old);
    ::setenv("APT_CONFIG", apt_config_file_.c_str(), 1);
    apt_config_set_ = true;
  }
}

void AptRepo::stop() {
  if (server_pid_ <= 0) return;
  ::kill(server_pid_, SIGTERM);
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  while (::waitpid(server_pid_, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      ::kill(server_pid_, SIGKILL);
      ::waitpid(server_pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  server_pid_ = -1;
}

std::string AptRepo::server_log() const { return read_file(dir_ + "/http.log"); }

std::string AptRepo::installed_version(const std::string& name) {
  const auto r = run_program({"dpkg-query", "-W", "-f=${db:Status-Abbrev}|${Version}", name});
  if (r.exit_code != 0) return {};
  const auto bar = r.out.find('|');
  if (bar == std::string::npos || bar < 2) return {};
  const char status = r.out[1];
  if (status == 'n' || status == 'c') return {};
  return r.out.substr(bar + 1);
}

std::string AptRepo::dpkg_fingerprint(const std::string& name) {
  const auto r = run_program({"dpkg-query", "-W", "-f=${db:Status-Abbrev}|${Version}", name});
  if (r.exit_code != 0) return "unknown";
  std::error_code ec;
  const bool files =
      fs::exists("/usr/share/nox-mesh-test/" + name + "/version", ec);
  return r.out + (files ? " files" : " no-files");
}

void AptRepo::purge_packages() {
  std::vector<std::string> known;
  for (const auto& n : names_)
    if (dpkg_fingerprint(n) != "unknown") known.push_back(n);
  if (known.empty()) return;
  std::vector<std::string> argv{"dpkg", "--force-hold", "--force-depends", "--purge"};
  argv.insert(argv.end(), known.begin(), known.end());
  // Wait for the dpkg lock rather than fail when a test left apt running for a moment.
  for (int attempt = 0; attempt < 20; ++attempt) {
    const auto r = run_program(argv);
    if (r.exit_code == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

FileLockHolder::FileLockHolder(const std::string& path,
                               std::optional<std::chrono::milliseconds> release_after) {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0640);
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    if (fd < 0 || ::fcntl(fd, F_SETLKW, &fl) != 0) ::_exit(1);
    const char ok = 'L';
    if (::write(fds[1], &ok, 1) != 1) ::_exit(1);
    if (release_after) {
      const auto ms = release_after->count();
      timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000L};
      while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
      }
      ::_exit(0);  // the lock goes with the process
    }
    for (;;) ::pause();
  }
  ::close(fds[1]);
  pid_ = pid;
  pollfd p{fds[0], POLLIN, 0};
  char got = 0;
  const bool locked = ::poll(&p, 1, 10000) == 1 && ::read(fds[0], &got, 1) == 1 && got == 'L';
  ::close(fds[0]);
  if (!locked) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    throw std::runtime_error("could not take " + path + " within 10 s");
  }
}

FileLockHolder::~FileLockHolder() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

}  // namespace mesh::testing
