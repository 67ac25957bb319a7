// The read-only HTTP server of the apt repository (mesh/control/repository_server.h): Boost.Beast
// parses requests and writes responses over a file descriptor stream with poll() time limits.
#include "mesh/control/repository_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include <spdlog/spdlog.h>

#include "mesh/common/logging.h"

namespace mesh::control {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using sdk::ErrorCode;

constexpr int kIoTimeoutMs = 30'000;
constexpr int kMaxConnections = 32;

// A blocking socket as Beast's SyncReadStream / SyncWriteStream, each wait bounded by poll().
class FdStream {
 public:
  explicit FdStream(int fd) : fd_(fd) {}

  template <class MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers, beast::error_code& ec) {
    ec = {};
    for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers); ++it) {
      boost::asio::mutable_buffer b = *it;
      if (b.size() == 0) continue;
      if (!wait(POLLIN, ec)) return 0;
      const ssize_t n = ::recv(fd_, b.data(), b.size(), 0);
      if (n < 0) {
        ec = beast::error_code(errno, boost::system::system_category());
        return 0;
      }
      if (n == 0) ec = http::error::end_of_stream;
      return static_cast<std::size_t>(n);
    }
    return 0;
  }
  template <class MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers) {
    beast::error_code ec;
    auto n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
  template <class ConstBufferSequence>
  std::size_t write_some(const ConstBufferSequence& buffers, beast::error_code& ec) {
    ec = {};
    for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers); ++it) {
      boost::asio::const_buffer b = *it;
      if (b.size() == 0) continue;
      if (!wait(POLLOUT, ec)) return 0;
      const ssize_t n = ::send(fd_, b.data(), b.size(), MSG_NOSIGNAL);
      if (n < 0) {
        ec = beast::error_code(errno, boost::system::system_category());
        return 0;
      }
      return static_cast<std::size_t>(n);
    }
    return 0;
  }
  template <class ConstBufferSequence>
  std::size_t write_some(const ConstBufferSequence& buffers) {
    beast::error_code ec;
    auto n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  bool wait(short events, beast::error_code& ec) {
    pollfd p{fd_, events, 0};
    for (;;) {
      const int r = ::poll(&p, 1, kIoTimeoutMs);
      if (r > 0) return true;
      if (r == 0) {
        ec = beast::error::timeout;
        return false;
      }
      if (errno != EINTR) {
        ec = beast::error_code(errno, boost::system::system_category());
        return false;
      }
    }
  }
  int fd_;
};

bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr a4{};
  if (::inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (::inet_pton(AF_INET6, host.c_str(), &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

// The file a request target names under `dir`, or "" when it may not be served.
std::string resolve(const std::string& dir, std::string_view target) {
  if (auto q = target.find_first_of("?#"); q != std::string_view::npos) target = target.substr(0, q);
  if (target.empty() || target.front() != '/') return {};
  std::string decoded;
  for (std::size_t i = 0; i < target.size(); ++i) {
    char c = target[i];
    if (c == '%') {
      if (i + 2 >= target.size()) return {};
      auto hex = [](char h) -> int {
        if (h >= '0' && h <= '9') return h - '0';
        if (h >= 'a' && h <= 'f') return h - 'a' + 10;
        if (h >= 'A' && h <= 'F') return h - 'A' + 10;
        return -1;
      };
      const int hi = hex(target[i + 1]), lo = hex(target[i + 2]);
      if (hi < 0 || lo < 0) return {};
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    if (c == '\0' || c == '\\') return {};
    decoded.push_back(c);
  }
  // Every component: not empty, not hidden (which also refuses "." and "..").
  std::size_t start = 1;
  while (start <= decoded.size()) {
    std::size_t slash = decoded.find('/', start);
    std::string_view part = std::string_view(decoded).substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part.front() == '.') return {};
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return dir + decoded;
}

}  // namespace

sdk::Result<ListenAddress> parse_listen_address(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return sdk::fail(ErrorCode::InvalidArgument, "'" + text + "': " + why, "repository.listen");
  };
  std::string host, port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') return bad("not [host]:port");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) return bad("not host:port (e.g. 127.0.0.1:8080)");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) > 65535)
    return bad("the port must be a number from 0 to 65535");
  if (!is_loopback(host))
    return bad("not a loopback address: the repository is served to this machine only (127.0.0.1, ::1 or "
               "localhost); put a web server or proxy in front of the directory to serve it further");
  return ListenAddress{host == "localhost" ? "127.0.0.1" : host, static_cast<std::uint16_t>(std::stoi(port))};
}

sdk::Result<std::unique_ptr<RepositoryServer>> RepositoryServer::start(const std::string& dir, const std::string& listen) {
  MESH_TRY(address, parse_listen_address(listen));
  std::unique_ptr<RepositoryServer> s(new RepositoryServer());
  s->dir_ = dir;
  while (s->dir_.size() > 1 && s->dir_.back() == '/') s->dir_.pop_back();
  const bool v6 = address.host.find(':') != std::string::npos;
  const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return sdk::fail(ErrorCode::Unavailable, std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(address.port);
    ::inet_pton(AF_INET6, address.host.c_str(), &a->sin6_addr);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(address.port);
    ::inet_pton(AF_INET, address.host.c_str(), &a->sin_addr);
    len = sizeof *a;
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd, 64) != 0) {
    const int e = errno;
    ::close(fd);
    return sdk::fail(ErrorCode::Unavailable, "cannot listen on " + listen + ": " + std::strerror(e), "repository.listen");
  }
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
    s->port_ = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  s->listen_fd_ = fd;
  s->acceptor_ = std::thread([p = s.get()] { p->accept_loop(); });
  return s;
}

RepositoryServer::~RepositoryServer() {
  stopping_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  std::map<std::uint64_t, std::thread> workers;
  {
    std::lock_guard lock(mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    workers.swap(workers_);
  }
  for (auto& [id, t] : workers)
    if (t.joinable()) t.join();
}

void RepositoryServer::accept_loop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    if (active_.load() >= kMaxConnections) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(mu_);
    if (stopping_) {
      ::close(fd);
      break;
    }
    // Finished workers are joined as new ones start, so the list stays short.
    for (std::uint64_t id : done_) {
      auto it = workers_.find(id);
      if (it != workers_.end()) {
        if (it->second.joinable()) it->second.join();
        workers_.erase(it);
      }
    }
    done_.clear();
    open_fds_.push_back(fd);
    ++active_;
    const std::uint64_t id = ++next_worker_;
    workers_.emplace(id, std::thread([this, fd, id] { serve(fd, id); }));
  }
}

void RepositoryServer::serve(int fd, std::uint64_t id) {
  FdStream stream(fd);
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::empty_body> parser;
    parser.header_limit(16 * 1024);
    beast::error_code ec;
    http::read(stream, buffer, parser, ec);
    if (ec) break;
    const auto& req = parser.get();
    ++requests_;
    const bool keep = req.keep_alive();
    auto simple = [&](http::status status, const std::string& text) {
      http::response<http::string_body> res{status, req.version()};
      res.set(http::field::server, "nox-mesh-control");
      res.set(http::field::content_type, "text/plain");
      res.keep_alive(keep);
      res.body() = req.method() == http::verb::head ? std::string() : text;
      res.prepare_payload();
      if (req.method() == http::verb::head) res.content_length(text.size());
      http::write(stream, res, ec);
    };
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      simple(http::status::method_not_allowed, "only GET and HEAD\n");
      break;
    }
    const std::string path = resolve(dir_, std::string_view(req.target().data(), req.target().size()));
    int file = path.empty() ? -1 : ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st {};
    if (file >= 0 && (::fstat(file, &st) != 0 || !S_ISREG(st.st_mode))) {
      ::close(file);
      file = -1;
    }
    if (file < 0) {
      common::logger()->debug("repository http status=404 target={}", std::string(req.target()).substr(0, 200));
      simple(http::status::not_found, "not found\n");
      if (ec || !keep) break;
      continue;
    }
    ::fcntl(file, F_SETFL, 0);
    if (req.method() == http::verb::head) {
      ::close(file);
      http::response<http::empty_body> res{http::status::ok, req.version()};
      res.set(http::field::server, "nox-mesh-control");
      res.set(http::field::content_type, "application/octet-stream");
      res.content_length(static_cast<std::uint64_t>(st.st_size));
      res.keep_alive(keep);
      http::response_serializer<http::empty_body> sr{res};
      http::write_header(stream, sr, ec);
    } else {
      http::file_body::value_type body;
      beast::file f;
      f.native_handle(file);
      body.reset(std::move(f), ec);
      if (ec) break;
      http::response<http::file_body> res{std::piecewise_construct, std::make_tuple(std::move(body)),
                                          std::make_tuple(http::status::ok, req.version())};
      res.set(http::field::server, "nox-mesh-control");
      res.set(http::field::content_type, "application/octet-stream");
      res.keep_alive(keep);
      res.prepare_payload();
      http::write(stream, res, ec);
    }
    if (ec || !keep) break;
  }
  ::shutdown(fd, SHUT_WR);
  std::lock_guard lock(mu_);
  ::close(fd);
  open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
  done_.push_back(id);
  --active_;
}

}  // namespace mesh::control
