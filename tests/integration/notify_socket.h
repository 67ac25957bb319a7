// A datagram socket standing in for systemd's notify socket (sd_notify(3)), for integration
// tests that start mesh-host with NOTIFY_SOCKET set. Header-only; not thread-safe.
#pragma once

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace mesh::testing {

/// A datagram socket standing in for systemd's notify socket.
class NotifySocket {
 public:
  explicit NotifySocket(const std::filesystem::path& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) throw std::runtime_error("bind notify socket");
    timeval tv{0, 100 * 1000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~NotifySocket() { ::close(fd_); }
  /// Collects datagrams for up to `ms`, stopping early once one contains `needle`.
  bool wait_for(const std::string& needle, int ms) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n > 0) {
        messages.emplace_back(buf, static_cast<std::size_t>(n));
        if (messages.back().find(needle) != std::string::npos) return true;
      }
    }
    return false;
  }
  std::vector<std::string> messages;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace mesh::testing
