#include "mesh/testing/nats_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sys/time.h>

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

void NatsServer::kill() {
  if (!process_) return;
  process_->stop(SIGKILL, 3000);
  process_.reset();
}

void NatsServer::reload() {
  if (running()) ::kill(process_->pid(), SIGHUP);
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

namespace {

// GET http://127.0.0.1:<port><path>; the body, or "" when the server cannot be reached or does
// not answer within 2 s. HTTP/1.0 so the server closes the connection after the answer.
std::string http_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  timeval timeout{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  std::string answer;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) answer.append(buf, n);
    }
  }
  ::close(fd);
  const auto body = answer.find("\r\n\r\n");
  return body == std::string::npos ? "" : answer.substr(body + 4);
}

// The value of "leader" inside the "meta_cluster" object of a /jsz answer ("" when absent:
// no leader yet, or JetStream not clustered). The answer is nats-server's own indented JSON;
// the meta_cluster object holds no nested objects before "leader".
std::string meta_leader_of(const std::string& jsz) {
  const auto meta = jsz.find("\"meta_cluster\"");
  if (meta == std::string::npos) return "";
  const auto end = jsz.find('}', meta);
  const auto key = jsz.find("\"leader\"", meta);
  if (key == std::string::npos || key > end) return "";
  const auto open = jsz.find('"', jsz.find(':', key) + 1);
  if (open == std::string::npos || open > end) return "";
  const auto close = jsz.find('"', open + 1);
  if (close == std::string::npos || close > end) return "";
  return jsz.substr(open + 1, close - open - 1);
}

}  // namespace

NatsCluster::NatsCluster(std::size_t size, std::string extra_config)
    : dir_(std::make_unique<TempDir>()) {
  if (size == 0) throw std::invalid_argument("NatsCluster: size must be at least 1");
  std::vector<int> route_ports;
  for (std::size_t i = 0; i < size; ++i) {
    route_ports.push_back(free_tcp_port());
    monitor_ports_.push_back(free_tcp_port());
  }
  std::string routes;
  for (int p : route_ports)
    routes += (routes.empty() ? "" : ", ") + std::string("nats-route://127.0.0.1:") +
              std::to_string(p);
  for (std::size_t i = 0; i < size; ++i) {
    const std::string path = (dir_->path() / ("n" + std::to_string(i) + ".conf")).string();
    std::ofstream conf(path);
    conf << "server_name: n" << i << "\n"
         << "http: 127.0.0.1:" << monitor_ports_[i] << "\n"
         << "pid_file: \"" << pid_path(i) << "\"\n"
         << "cluster {\n  name: mesh\n  listen: 127.0.0.1:" << route_ports[i] << "\n"
         << "  routes: [" << routes << "]\n}\n"
         << extra_config << "\n";
    conf.close();
    if (!conf) throw std::runtime_error("NatsCluster: cannot write " + path);
    config_paths_.push_back(path);
  }
  for (std::size_t i = 0; i < size; ++i)
    servers_.push_back(std::make_unique<NatsServer>(
        std::vector<std::string>{"-c", config_paths_[i]}, /*jetstream=*/true));
}

NatsCluster::~NatsCluster() {
  for (auto& s : servers_) s->stop();
}

std::string NatsCluster::url(std::size_t i) const { return servers_.at(i)->url(); }

std::vector<std::string> NatsCluster::urls() const {
  std::vector<std::string> out;
  for (const auto& s : servers_) out.push_back(s->url());
  return out;
}

std::string NatsCluster::urls_joined() const {
  std::string out;
  for (const auto& s : servers_) out += (out.empty() ? "" : ",") + s->url();
  return out;
}

int NatsCluster::port(std::size_t i) const { return servers_.at(i)->port(); }
std::string NatsCluster::name(std::size_t i) const {
  (void)servers_.at(i);
  return "n" + std::to_string(i);
}
std::string NatsCluster::log_path(std::size_t i) const { return servers_.at(i)->log_path(); }
std::string NatsCluster::config_path(std::size_t i) const { return config_paths_.at(i); }
std::string NatsCluster::dir() const { return dir_->path().string(); }
std::string NatsCluster::pid_path(std::size_t i) const {
  if (i >= monitor_ports_.size()) throw std::out_of_range("NatsCluster: no server " + std::to_string(i));
  return (dir_->path() / ("n" + std::to_string(i) + ".pid")).string();
}
bool NatsCluster::running(std::size_t i) const { return servers_.at(i)->running(); }
void NatsCluster::stop(std::size_t i) { servers_.at(i)->stop(); }
void NatsCluster::kill(std::size_t i) { servers_.at(i)->kill(); }
void NatsCluster::start(std::size_t i) { servers_.at(i)->start(); }
void NatsCluster::reload(std::size_t i) { servers_.at(i)->reload(); }

std::optional<std::size_t> NatsCluster::meta_leader() const {
  std::optional<std::string> agreed;
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    if (!servers_[i]->running()) continue;
    const std::string leader = meta_leader_of(http_get(monitor_ports_[i], "/jsz"));
    if (leader.empty() || (agreed && *agreed != leader)) return std::nullopt;
    agreed = leader;
  }
  if (!agreed) return std::nullopt;
  for (std::size_t i = 0; i < servers_.size(); ++i)
    if (name(i) == *agreed) return servers_[i]->running() ? std::optional(i) : std::nullopt;
  return std::nullopt;
}

std::optional<std::size_t> NatsCluster::server_of_client(const std::string& client_name) const {
  const std::string needle = "\"name\": \"" + client_name + "\"";
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    if (!servers_[i]->running()) continue;
    if (http_get(monitor_ports_[i], "/connz?limit=100000").find(needle) != std::string::npos) return i;
  }
  return std::nullopt;
}

std::optional<std::size_t> NatsCluster::wait_for_meta_leader(int timeout_ms) const {
  std::optional<std::size_t> leader;
  eventually([&] { return (leader = meta_leader()).has_value(); }, timeout_ms);
  return leader;
}

}  // namespace mesh::testing
