#include "mesh/testing/nats_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sys/time.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
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

// 32 random hex characters (the routes' password).
std::string random_hex() {
  std::random_device rd;
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 32; ++i) out += digits[rd() % 16];
  return out;
}

void write_file(const std::filesystem::path& path, const std::string& text, std::filesystem::perms mode) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    // Owner-only before the secret is written into it.
    std::filesystem::permissions(path, mode);
    out << text;
    out.close();
    if (!out) throw std::runtime_error("NatsCluster: cannot write " + path.string());
  }
  std::filesystem::permissions(path, mode);
}

// The routes' TLS files in `dir`: a CA made for this cluster alone (ca.pem; its key ca.key) and
// one certificate for 127.0.0.1 every server presents (route.pem, route.key), both server and
// client authentication, since a route is dialled by one server and accepted by the other.
void make_route_tls(const std::filesystem::path& dir) {
  const auto cnf = dir / "openssl.cnf";
  write_file(cnf,
             "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = mesh-routes-test-ca\n"
             "[ca]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n"
             "subjectKeyIdentifier = hash\n"
             "[route]\nbasicConstraints = critical,CA:FALSE\nkeyUsage = critical,digitalSignature\n"
             "extendedKeyUsage = serverAuth,clientAuth\nsubjectAltName = IP:127.0.0.1\n",
             std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const std::string d = dir.string() + "/";
  const std::vector<std::vector<std::string>> steps = {
      {"openssl", "req", "-x509", "-config", cnf.string(), "-extensions", "ca", "-newkey", "ec", "-pkeyopt",
       "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-keyout", d + "ca.key", "-out", d + "ca.pem"},
      {"openssl", "req", "-new", "-config", cnf.string(), "-subj", "/CN=mesh-route", "-newkey", "ec", "-pkeyopt",
       "ec_paramgen_curve:P-256", "-nodes", "-keyout", d + "route.key", "-out", d + "route.csr"},
      {"openssl", "x509", "-req", "-in", d + "route.csr", "-CA", d + "ca.pem", "-CAkey", d + "ca.key",
       "-set_serial", "2", "-days", "2", "-extfile", cnf.string(), "-extensions", "route", "-out",
       d + "route.pem"}};
  for (const auto& argv : steps) {
    const ProcessResult r = run_process(argv, {}, 30000);
    if (r.exit_code != 0)
      throw std::runtime_error("NatsCluster: the routes' certificates cannot be made: openssl " + argv[1] +
                               " exited with " + std::to_string(r.exit_code) + ": " + r.err);
  }
  for (const char* key : {"ca.key", "route.key"})
    std::filesystem::permissions(dir / key, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

}  // namespace

std::string monitoring_get(int port, const std::string& path) {
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

std::optional<long long> monitoring_number(const std::string& json, const std::string& key) {
  const auto at = json.find("\"" + key + "\"");
  if (at == std::string::npos) return std::nullopt;
  auto pos = json.find(':', at);
  if (pos == std::string::npos) return std::nullopt;
  ++pos;
  while (pos < json.size() && (json[pos] == ' ' || json[pos] == '\n' || json[pos] == '\t')) ++pos;
  std::size_t end = pos;
  while (end < json.size() && (std::isdigit(static_cast<unsigned char>(json[end])) || json[end] == '-')) ++end;
  if (end == pos) return std::nullopt;
  return std::stoll(json.substr(pos, end - pos));
}

NatsCluster::NatsCluster(std::size_t size, std::string extra_config)
    : dir_(std::make_unique<TempDir>()) {
  if (size == 0) throw std::invalid_argument("NatsCluster: size must be at least 1");
  // The certificates first: the ports are picked just before the servers bind them, so that the
  // time another process could take one in between stays as short as it can be.
  make_route_tls(dir_->path());
  route_password_ = random_hex();
  for (std::size_t i = 0; i < size; ++i) {
    route_ports_.push_back(free_tcp_port());
    monitor_ports_.push_back(free_tcp_port());
  }
  const std::string credentials = route_user() + ":" + route_password_ + "@";
  std::string routes;
  for (int p : route_ports_)
    routes += "  nats-route://" + credentials + "127.0.0.1:" + std::to_string(p) + "\n";
  // The shape of README "A NATS cluster": one 0600 file, the same on every server, holds
  // everything the routes' authentication needs; each server's own config holds no secret.
  write_file(routes_config_path(),
             "authorization { user: " + route_user() + ", password: \"" + route_password_ +
                 "\" }\nroutes: [\n" + routes + "]\ntls {\n  cert_file: \"" + route_cert_path() +
                 "\"\n  key_file: \"" + route_key_path() + "\"\n  ca_file: \"" + route_ca_path() +
                 "\"\n  verify: true\n}\n",
             std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  for (std::size_t i = 0; i < size; ++i) {
    const std::string path = (dir_->path() / ("n" + std::to_string(i) + ".conf")).string();
    std::ofstream conf(path);
    conf << "server_name: n" << i << "\n"
         << "http: 127.0.0.1:" << monitor_ports_[i] << "\n"
         << "pid_file: \"" << pid_path(i) << "\"\n"
         << "cluster {\n  name: mesh\n  listen: 127.0.0.1:" << route_ports_[i] << "\n"
         << "  include \"routes.conf\"\n}\n"
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
int NatsCluster::route_port(std::size_t i) const { return route_ports_.at(i); }
int NatsCluster::monitor_port(std::size_t i) const { return monitor_ports_.at(i); }
std::string NatsCluster::routes_config_path() const { return (dir_->path() / "routes.conf").string(); }
std::string NatsCluster::route_user() const { return "mesh-route"; }
std::string NatsCluster::route_password() const { return route_password_; }
std::string NatsCluster::route_ca_path() const { return (dir_->path() / "ca.pem").string(); }
std::string NatsCluster::route_cert_path() const { return (dir_->path() / "route.pem").string(); }
std::string NatsCluster::route_key_path() const { return (dir_->path() / "route.key").string(); }
std::optional<int> NatsCluster::route_count(std::size_t i) const {
  if (!servers_.at(i)->running()) return std::nullopt;
  const auto n = monitoring_number(monitoring_get(monitor_ports_[i], "/routez"), "num_routes");
  if (!n) return std::nullopt;
  return static_cast<int>(*n);
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
    const std::string leader = meta_leader_of(monitoring_get(monitor_ports_[i], "/jsz"));
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
    if (monitoring_get(monitor_ports_[i], "/connz?limit=100000").find(needle) != std::string::npos) return i;
  }
  return std::nullopt;
}

std::optional<std::size_t> NatsCluster::wait_for_meta_leader(int timeout_ms) const {
  std::optional<std::size_t> leader;
  eventually([&] { return (leader = meta_leader()).has_value(); }, timeout_ms);
  return leader;
}

}  // namespace mesh::testing
