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
/// Not thread-safe; use from the test's main thread (see process.h about PR_SET_PDEATHSIG).
class NatsCluster {
 public:
  /// Writes a config for each of `size` (>= 1) servers — `extra_config` (nats-server config
  /// syntax, e.g. an authorization block or `include "auth.conf"`) appended to each — and starts
  /// them one after another, each waited for as NatsServer does (ready in its log, port accepts
  /// TCP). It does not wait for a JetStream meta leader: call wait_for_meta_leader().
  /// Throws std::runtime_error (with the failing server's stderr and log) when one cannot start.
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
  std::vector<int> monitor_ports_;
  std::vector<std::string> config_paths_;
  std::vector<std::unique_ptr<NatsServer>> servers_;
};

}  // namespace mesh::testing
