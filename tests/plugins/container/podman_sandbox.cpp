#include "podman_sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

extern char** environ;

namespace mesh::testing {
namespace fs = std::filesystem;

namespace {

PodmanResult run_argv(const std::vector<std::string>& argv, int timeout_ms) {
  PodmanResult result;
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw std::runtime_error("pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, cargv[0], &actions, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  if (rc != 0) {
    ::close(fds[0].fd);
    ::close(fds[1].fd);
    result.exit_code = 127;
    result.err = "cannot run " + argv[0] + ": " + std::strerror(rc);
    return result;
  }
  ::fcntl(fds[0].fd, F_SETFL, O_NONBLOCK);
  ::fcntl(fds[1].fd, F_SETFL, O_NONBLOCK);
  std::string* sinks[2] = {&result.out, &result.err};
  auto drain = [&](int i) {
    char buf[8192];
    for (;;) {
      ssize_t r = ::read(fds[i].fd, buf, sizeof buf);
      if (r > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(r));
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      ::close(fds[i].fd);  // EOF or error
      fds[i].fd = -1;
      return;
    }
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool killed = false;
  int status = 0;
  for (;;) {
    ::poll(fds, 2, 50);  // fds of -1 are ignored
    for (int i = 0; i < 2; ++i)
      if (fds[i].fd >= 0) drain(i);
    // A detached descendant (conmon) may hold the pipes: podman's own exit ends the wait.
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    if (!killed && std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);
      killed = true;
    }
  }
  for (int i = 0; i < 2; ++i)
    if (fds[i].fd >= 0) {
      drain(i);
      if (fds[i].fd >= 0) ::close(fds[i].fd);
    }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return result;
}

std::string find_program(const std::string& name) {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    fs::path p = fs::path(dir) / name;
    if (::access(p.c_str(), X_OK) == 0 && fs::is_regular_file(p)) return p.string();
  }
  return {};
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string last_line(const std::string& text) {
  std::string t = trim(text);
  auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

// Every mount point at or below `dir`, deepest first.
std::vector<std::string> mounts_below(const fs::path& dir) {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  const std::string prefix = dir.string();
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, point;
    fields >> id >> parent >> devno >> root >> point;
    // mountinfo escapes space, tab, newline and backslash as octal.
    std::string decoded;
    for (std::size_t i = 0; i < point.size(); ++i) {
      if (point[i] == '\\' && i + 3 < point.size()) {
        decoded += static_cast<char>(std::stoi(point.substr(i + 1, 3), nullptr, 8));
        i += 3;
      } else {
        decoded += point[i];
      }
    }
    if (decoded == prefix || decoded.rfind(prefix + "/", 0) == 0) out.push_back(decoded);
  }
  std::sort(out.begin(), out.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return out;
}

std::unique_ptr<PodmanSandbox>& shared_slot() {
  static std::unique_ptr<PodmanSandbox> slot;
  return slot;
}

}  // namespace

PodmanResult PodmanSandbox::run(const std::vector<std::string>& args, int timeout_ms) const {
  std::vector<std::string> argv{podman_};
  argv.insert(argv.end(), global_args_.begin(), global_args_.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return run_argv(argv, timeout_ms);
}

std::unique_ptr<PodmanSandbox> PodmanSandbox::create(std::string& why_not) {
  std::unique_ptr<PodmanSandbox> box(new PodmanSandbox());
  box->podman_ = find_program("podman");
  if (box->podman_.empty()) {
    why_not = "podman is not installed (apt-get install podman)";
    return nullptr;
  }
  if (find_program("runc").empty()) {
    why_not = "runc is not installed (apt-get install runc)";
    return nullptr;
  }
  box->busybox_ = find_program("busybox");
  if (box->busybox_.empty()) {
    why_not = "busybox is not installed (apt-get install busybox-static)";
    return nullptr;
  }
  box->tar_ = find_program("tar");
  if (box->tar_.empty()) {
    why_not = "tar is not installed";
    return nullptr;
  }
  if (::geteuid() != 0) {
    why_not = "needs root (podman with a private --root as in docs PLATFORM: rootful)";
    return nullptr;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/mesh-podman-XXXXXX";
  if (!::mkdtemp(tmpl.data())) {
    why_not = std::string("mkdtemp failed: ") + std::strerror(errno);
    return nullptr;
  }
  box->dir_ = tmpl;
  fs::create_directories(box->dir_ / "tmp");
  box->global_args_ = {"--root",          (box->dir_ / "root").string(),
                       "--runroot",       (box->dir_ / "run").string(),
                       "--tmpdir",        (box->dir_ / "tmp").string(),
                       "--cgroup-manager=cgroupfs",
                       "--events-backend=file",
                       "--runtime",       "runc"};
  box->run_args_ = {"--ulimit", "nofile=1024:20000", "--ulimit", "nproc=1024:1024",
                    "--network=none"};

  auto version = box->run({"version", "--format", "json"});
  if (!version.ok()) {
    why_not = "podman does not answer: " + last_line(version.err);
    return nullptr;
  }
  try {
    box->image_ = box->import_image("localhost/mesh-test:latest", "");
  } catch (const std::exception& e) {
    why_not = std::string("cannot import the busybox test image: ") + e.what();
    return nullptr;
  }
  std::vector<std::string> smoke = {"run", "--rm"};
  smoke.insert(smoke.end(), box->run_args_.begin(), box->run_args_.end());
  smoke.insert(smoke.end(), {box->image_.reference, "echo", "mesh-smoke"});
  auto ran = box->run(smoke);
  if (!ran.ok() || ran.out.find("mesh-smoke") == std::string::npos) {
    why_not = "the kernel or runtime refused to run a container: " +
              last_line(ran.err.empty() ? ran.out : ran.err);
    return nullptr;
  }
  return box;
}

TestImage PodmanSandbox::import_image(const std::string& tag, const std::string& marker) const {
  static int counter = 0;
  const fs::path work = dir_ / ("image-" + std::to_string(++counter));
  const fs::path rootfs = work / "rootfs";
  fs::create_directories(rootfs / "bin");
  fs::create_directories(rootfs / "tmp");
  fs::copy_file(busybox_, rootfs / "bin" / "busybox");
  for (const char* applet : {"sh", "sleep", "echo", "cat", "env", "true", "false", "ls"})
    fs::create_symlink("busybox", rootfs / "bin" / applet);
  if (!marker.empty()) std::ofstream(rootfs / "marker") << marker << "\n";
  const std::string tarball = (work / "rootfs.tar").string();
  auto tarred = run_argv({tar_, "-C", rootfs.string(), "-cf", tarball, "."}, 60000);
  if (!tarred.ok()) throw std::runtime_error("tar: " + last_line(tarred.err));
  auto imported = run({"import", "--quiet", tarball, tag});
  if (!imported.ok()) throw std::runtime_error("podman import: " + last_line(imported.err));
  auto inspected = run({"image", "inspect", "--format", "{{.Id}} {{.Digest}}", tag});
  if (!inspected.ok()) throw std::runtime_error("podman image inspect: " + last_line(inspected.err));
  std::istringstream fields(trim(inspected.out));
  TestImage image;
  std::string digest;
  fields >> image.id >> digest;
  image.tag = tag;
  const std::string name = tag.substr(0, tag.rfind(':'));
  image.reference = name + "@" + digest;
  std::error_code ec;
  fs::remove_all(work, ec);
  return image;
}

sdk::Value PodmanSandbox::provider_config(const std::string& settle) const {
  sdk::Value::Array global, run_args;
  for (const auto& a : global_args_) global.emplace_back(a);
  for (const auto& a : run_args_) run_args.emplace_back(a);
  sdk::Value config = sdk::Value::object();
  config.set("engine", "podman");
  config.set("binary", podman_);
  config.set("global_args", sdk::Value(std::move(global)));
  config.set("run_args", sdk::Value(std::move(run_args)));
  config.set("settle", settle);
  config.set("timeout", "2m");
  config.set("stop_timeout", "0s");
  return config;
}

PodmanSandbox::~PodmanSandbox() {
  if (dir_.empty()) return;
  if (!podman_.empty() && fs::exists(dir_ / "root")) {
    run({"rm", "--all", "--force", "--time", "0"}, 120000);
    run({"volume", "rm", "--all", "--force"}, 60000);
    run({"rmi", "--all", "--force"}, 60000);
  }
  for (const auto& point : mounts_below(dir_)) ::umount2(point.c_str(), MNT_DETACH);
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void PodmanEnvironment::SetUp() {
  // Several test files of one binary may each register the environment: set up once.
  static bool attempted = false;
  static std::string why_not;
  if (!attempted) {
    attempted = true;
    shared_slot() = PodmanSandbox::create(why_not);
  }
  if (!shared_slot()) GTEST_SKIP() << "no podman sandbox on this machine: " << why_not;
}

void PodmanEnvironment::TearDown() { shared_slot().reset(); }

PodmanSandbox* shared_podman_sandbox() { return shared_slot().get(); }

}  // namespace mesh::testing
