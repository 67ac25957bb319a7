#include "mesh/testing/nats_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "mesh/testing/process.h"
#include "mesh/testing/temp_dir.h"

namespace mesh::testing {
namespace {

std::string find_nats_server() {
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      if (dir.empty()) continue;
      std::string candidate = dir + "/nats-server";
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  for (const char* candidate : {"/usr/sbin/nats-server", "/usr/bin/nats-server"})
    if (::access(candidate, X_OK) == 0) return candidate;
  throw std::runtime_error("nats-server not found on PATH, in /usr/sbin or /usr/bin");
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

std::string tail_of(const std::string& path, std::size_t max_bytes = 4000) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  std::string text = out.str();
  return text.size() > max_bytes ? "..." + text.substr(text.size() - max_bytes) : text;
}

}  // namespace

namespace {
// How many times the server's log says "Server is ready" (0 when there is no log yet).
std::size_t ready_lines(const std::string& path) {
  std::ifstream in(path);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find("Server is ready") != std::string::npos) ++n;
  return n;
}
}  // namespace

NatsServer::NatsServer(std::vector<std::string> extra_args, bool jetstream)
    : extra_args_(std::move(extra_args)),
      jetstream_(jetstream),
      binary_(find_nats_server()),
      dir_(std::make_unique<TempDir>()) {
  // free_tcp_port() closes its socket before the server binds, so another process may take the
  // port in between; try a few ports before giving up.
  for (int attempt = 1;; ++attempt) {
    port_ = free_tcp_port();
    try {
      start();
      return;
    } catch (const std::runtime_error& e) {
      if (attempt >= 3 || std::string(e.what()).find("address already in use") == std::string::npos)
        throw;
    }
  }
}

NatsServer::~NatsServer() { stop(); }

std::string NatsServer::url() const { return "nats://127.0.0.1:" + std::to_string(port_); }

std::string NatsServer::log_path() const { return (dir_->path() / "nats-server.log").string(); }

bool NatsServer::running() const { return process_ && process_->running(); }

void NatsServer::stop() {
  if (!process_) return;
  process_->stop(SIGTERM, 3000);
  process_.reset();
}

void NatsServer::start() {
  if (running()) return;
  process_.reset();
  std::vector<std::string> argv = {binary_, "-a", "127.0.0.1", "-p", std::to_string(port_),
                                   "-l", log_path()};
  if (jetstream_) {
    argv.insert(argv.end(), {"-js", "-sd", (dir_->path() / "jetstream").string()});
  }
  argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
  // Ready means this server said so in its log (a restart appends to the same log, so a new
  // line is waited for): a port that accepts TCP may belong to another process that took it
  // between free_tcp_port() and our bind, while our server is still failing to start.
  const std::size_t ready_before = ready_lines(log_path());
  process_ = std::make_unique<BackgroundProcess>(argv);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    if (!process_->running()) {
      std::string why = "nats-server on port " + std::to_string(port_) + " exited with " +
                        std::to_string(process_->exit_code()) + "; stderr: " +
                        process_->stderr_text() + "; log: " + tail_of(log_path());
      process_.reset();
      throw std::runtime_error(why);
    }
    if (ready_lines(log_path()) > ready_before && accepts_tcp(port_)) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string why = "nats-server on port " + std::to_string(port_) +
                        " did not accept connections within 10 s; stderr: " +
                        process_->stderr_text() + "; log: " + tail_of(log_path());
      stop();
      throw std::runtime_error(why);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace mesh::testing
