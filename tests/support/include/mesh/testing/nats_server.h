// Nox Mesh test support — a real nats-server on a free loopback port, for integration tests.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mesh::testing {

class BackgroundProcess;
class TempDir;

/// Runs `nats-server -a 127.0.0.1 -p <port> -l <log> [-js -sd <dir>] <extra_args...>`.
///
///   mesh::testing::NatsServer server;                       // plain core NATS
///   mesh::testing::NatsServer js({}, /*jetstream=*/true);   // JetStream, store in a temp dir
///   mesh::testing::NatsServer auth({"-c", conf.string()});  // with a config file
///
/// The binary is found on PATH, else in /usr/sbin or /usr/bin. Not thread-safe; use from the
/// test's main thread (see process.h about PR_SET_PDEATHSIG).
class NatsServer {
 public:
  /// Picks a free port, starts the server and waits (up to 10 s) until it accepts TCP
  /// connections. Throws std::runtime_error with the server's stderr and log on failure.
  explicit NatsServer(std::vector<std::string> extra_args = {}, bool jetstream = false);
  /// Stops the server (SIGTERM, then SIGKILL after 3 s) and removes its temporary files.
  ~NatsServer();
  NatsServer(const NatsServer&) = delete;
  NatsServer& operator=(const NatsServer&) = delete;

  /// "nats://127.0.0.1:<port>".
  std::string url() const;
  int port() const { return port_; }
  /// Stops the server now (SIGTERM, then SIGKILL after 3 s). url()/port() stay valid. No-op when
  /// already stopped.
  void stop();
  /// Kills the server with SIGKILL (no shutdown, as a crash or power loss would); url()/port()
  /// stay valid and start() brings it back on the same port and store dir. No-op when stopped.
  void kill();
  /// Sends SIGHUP: the server re-reads its config file (-c), e.g. a changed authorization
  /// block. Returns at once (the reload is logged as "Reloaded server configuration").
  /// No-op when stopped.
  void reload();
  /// Starts it again on the same port (and the same JetStream store dir); waits as the
  /// constructor does and throws the same way. No-op when running.
  void start();
  bool running() const;
  /// The server's log file (-l); appended to across restarts.
  std::string log_path() const;

 private:
  std::vector<std::string> extra_args_;
  bool jetstream_;
  int port_ = 0;
  std::string binary_;
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<BackgroundProcess> process_;
};

/// A cluster of `size` nats-servers on loopback, JetStream enabled on each, for tests of the
/// mesh on a cluster (fail-over, replicated streams):
///
///   mesh::testing::NatsCluster cluster;           // 3 servers, routes between all of them
///   cluster.wait_for_meta_leader(20000);          // JetStream ready for replicas 3
///   transport.servers = cluster.urls();           // every client URL
///   cluster.kill(1); ... cluster.start(1);        // crash one server and bring it back
///
/// Server i is named "n<i>" in cluster "mesh"; it has a client port (url(i)), a route port and a
/// monitoring port (127.0.0.1 only), a config file (config_path(i)), a pid file (pid_path(i)) and a
/// JetStream store dir,
/// all in the cluster's temporary folder, kept across stop/kill/start and removed on
/// destruction. Ports are chosen free when the cluster is made and never change.
///
/// The routes are authenticated as README "A NATS cluster" documents (decision record 180):
/// each server's `cluster {}` block includes routes_config_path(), a 0600 file holding the route
/// user and password (`authorization`), the routes' URLs carrying them, and route TLS with
/// `verify: true` — a certificate for 127.0.0.1 signed by a CA made for this cluster alone,
/// which every server presents and requires of the other side. A server without that file is
/// refused by the cluster, and is not dialled into it when it takes a stopped server's route
/// port. Certificates are made with the `openssl` command (a P-256 key each, valid 2 days).
/// Not thread-safe; use from the test's main thread (see process.h about PR_SET_PDEATHSIG).
class NatsCluster {
 public:
  /// Makes the routes' CA, certificate and password (routes_config_path()), writes a config for
  /// each of `size` (>= 1) servers — `extra_config` (nats-server config syntax at the top level,
  /// e.g. an authorization block or `include "auth.conf"`) appended to each — and starts them
  /// one after another, each waited for as NatsServer does (ready in its log, port accepts TCP).
  /// It does not wait for a JetStream meta leader: call wait_for_meta_leader().
  /// Throws std::runtime_error (with the failing server's stderr and log, or openssl's stderr)
  /// when one cannot start or the certificates cannot be made.
  explicit NatsCluster(std::size_t size = 3, std::string extra_config = "");
  /// Stops every server and removes the temporary folder.
  ~NatsCluster();
  NatsCluster(const NatsCluster&) = delete;
  NatsCluster& operator=(const NatsCluster&) = delete;

  std::size_t size() const { return servers_.size(); }
  /// Server i's client URL "nats://127.0.0.1:<port>". i < size(), else std::out_of_range.
  std::string url(std::size_t i) const;
  /// Every server's client URL, in order (what a host or control plane lists in `servers`).
  std::vector<std::string> urls() const;
  /// The same, joined with "," (the form nats.c's natsOptions_SetURL and `nats` CLIs accept).
  std::string urls_joined() const;
  int port(std::size_t i) const;
  /// Server i's name ("n<i>").
  std::string name(std::size_t i) const;
  std::string log_path(std::size_t i) const;
  /// Server i's config file; rewrite it and call reload(i) to change e.g. authorization.
  std::string config_path(std::size_t i) const;
  /// The folder holding every server's config (a place to put an included auth file).
  std::string dir() const;
  /// Server i's pid file (`pid_file` in its config), what a reload by signal reads.
  std::string pid_path(std::size_t i) const;

  /// Server i's route port (its `cluster { listen }`, 127.0.0.1) and monitoring port (`http`).
  /// i < size(), else std::out_of_range.
  int route_port(std::size_t i) const;
  int monitor_port(std::size_t i) const;
  /// The file every server's `cluster {}` block includes (mode 0600, in dir()): `authorization
  /// { user, password }`, `routes: [...]` (every server's route URL with the credentials) and
  /// `tls { cert_file, key_file, ca_file, verify: true }`. A server whose cluster block includes
  /// it joins the cluster (on 127.0.0.1: the certificate names that address only).
  std::string routes_config_path() const;
  /// The route user and password in that file (the password: 32 random hex characters, new for
  /// each cluster).
  std::string route_user() const;
  std::string route_password() const;
  /// The routes' TLS files (PEM, in dir()): the CA certificate every server verifies the other
  /// side with, and the certificate and key (0600) every server presents.
  std::string route_ca_path() const;
  std::string route_cert_path() const;
  std::string route_key_path() const;
  /// How many routes server i has now, from its /routez (`num_routes`); std::nullopt when it is
  /// not running or does not answer (2 s timeout). A full mesh of n running servers: n - 1 each.
  std::optional<int> route_count(std::size_t i) const;

  bool running(std::size_t i) const;
  /// SIGTERM, then SIGKILL after 3 s (a clean shutdown: the server leaves JetStream groups).
  void stop(std::size_t i);
  /// SIGKILL, as a crash would. The others elect a new meta/stream leader in their own time
  /// (several seconds with nats-server 2.9's raft timeouts).
  void kill(std::size_t i);
  /// Starts server i again (same ports, config, store dir); waits as the constructor does.
  void start(std::size_t i);
  /// SIGHUP to server i (re-read config_path(i)).
  void reload(std::size_t i);

  /// The index of the server the running servers agree is the JetStream meta leader: every
  /// running server's monitoring endpoint (/jsz) names the same leader and that leader is
  /// running. std::nullopt when there is none yet (election under way, no quorum) or when they
  /// disagree. Each call makes one HTTP request per running server (loopback, 2 s timeout each).
  std::optional<std::size_t> meta_leader() const;
  /// The index of the running server a client named `client_name` (natsOptions_SetName; the nats
  /// transport's [transport] name) is connected to, from each server's /connz; std::nullopt when
  /// none lists it (not connected, or reconnecting).
  std::optional<std::size_t> server_of_client(const std::string& client_name) const;
  /// Polls meta_leader() every 50 ms up to `timeout_ms`; returns the leader or std::nullopt.
  std::optional<std::size_t> wait_for_meta_leader(int timeout_ms) const;

 private:
  std::unique_ptr<TempDir> dir_;
  std::string route_password_;
  std::vector<int> route_ports_;
  std::vector<int> monitor_ports_;
  std::vector<std::string> config_paths_;
  std::vector<std::unique_ptr<NatsServer>> servers_;
};

/// GET http://127.0.0.1:`port``path` (a nats-server monitoring endpoint such as "/routez");
/// the body, or "" when nothing answers within 2 s. HTTP/1.0, one connection per call.
std::string monitoring_get(int port, const std::string& path);

/// The value of the number field `"key": N` first found in `json` (nats-server's monitoring
/// answers: "num_routes", "num_connections"); std::nullopt when absent.
std::optional<long long> monitoring_number(const std::string& json, const std::string& key);

}  // namespace mesh::testing
