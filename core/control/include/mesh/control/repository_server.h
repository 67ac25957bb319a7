// The HTTP server of the mesh's apt repository (decision record 58): mesh-control serves the
// `[repository] dir` read-only on a loopback address (`[repository] listen`), with Boost.Beast.
// GET and HEAD of regular files only: no directory listings, no hidden names (a path component
// starting with '.': the lock, half-built indexes, incoming files), no '..', no symbolic link as
// the last component; anything else is 404, another method 405. apt needs nothing more: the
// index and the pool are plain files, signed (InRelease) and hashed.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mesh/sdk/result.h"

namespace mesh::control {

/// Parses "127.0.0.1:8080", "[::1]:8080" or "localhost:8080" (port 0: any free port).
/// Errors: InvalidArgument on path "repository.listen" — not host:port, or not a loopback
/// address (the repository is served to the local machine only; put a proxy in front of it to
/// serve a fleet).
struct ListenAddress {
  std::string host;
  std::uint16_t port = 0;
};
sdk::Result<ListenAddress> parse_listen_address(const std::string& text);

class RepositoryServer {
 public:
  /// Binds `listen` and starts serving `dir` on a thread of its own (one more per connection, at
  /// most 32 at once; beyond, a connection waits in the listen backlog). Errors: InvalidArgument
  /// (a bad listen address), Unavailable (the address cannot be bound: in use, no permission).
  static sdk::Result<std::unique_ptr<RepositoryServer>> start(const std::string& dir, const std::string& listen);
  /// Stops: closes the listening socket and every connection, and joins the threads.
  ~RepositoryServer();
  RepositoryServer(const RepositoryServer&) = delete;
  RepositoryServer& operator=(const RepositoryServer&) = delete;

  /// The port actually bound (useful with port 0).
  std::uint16_t port() const noexcept { return port_; }
  /// Requests answered so far (any status).
  std::uint64_t requests() const noexcept { return requests_.load(); }

 private:
  RepositoryServer() = default;
  void accept_loop();
  void serve(int fd, std::uint64_t id);

  std::string dir_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> requests_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> open_fds_;
  std::map<std::uint64_t, std::thread> workers_;
  std::vector<std::uint64_t> done_;  // finished workers, joined by the acceptor
  std::uint64_t next_worker_ = 0;
  std::atomic<int> active_{0};
};

}  // namespace mesh::control
