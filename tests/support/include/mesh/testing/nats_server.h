// Nox Mesh test support — a real nats-server on a free loopback port, for integration tests.
#pragma once

#include <memory>
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

}  // namespace mesh::testing
