// A local mesh whose mesh-control loads the publish stage and serves its repository on a free
// loopback port: the fixture of the publish integration and system tests.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mesh/cli/client.h"
#include "mesh/common/trust.h"
#include "mesh_fixture.h"
#include "publish_test_util.h"

namespace mesh::stages::publish::test {

inline int free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

struct HttpResponse {
  int status = 0;
  std::string body;
};

/// One HTTP/1.1 request to 127.0.0.1:`port` (Connection: close), the raw response parsed just
/// enough: status code and body.
inline HttpResponse http_request(int port, const std::string& method, const std::string& target) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  HttpResponse r;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return r;
  }
  const std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string raw;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (raw.rfind("HTTP/1.1 ", 0) == 0) r.status = std::atoi(raw.c_str() + 9);
  if (auto end = raw.find("\r\n\r\n"); end != std::string::npos) r.body = raw.substr(end + 4);
  return r;
}

class PublishMeshTest : public itest::MeshTest {
 public:
  void SetUp() override {
    nats_ = std::make_unique<mesh::testing::NatsServer>();
    port_ = free_tcp_port();
    const fs::path cfg = dir() / "control.toml";
    itest::write_text(cfg, "[control]\nstate_dir = \"" + (dir() / "control").string() +
                               "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\n\n[store]\nplugin = \"sqlite\"\n\n"
                               "[transport]\nplugin = \"nats\"\nservers = [\"" + nats_->url() +
                               "\"]\n\n[stages]\nload = [\"publish\"]\n\n[stages.publish]\narchitectures = [\"amd64\"]\n\n"
                               "[repository]\ndir = \"" + repo().string() + "\"\nlisten = \"127.0.0.1:" +
                               std::to_string(port_) + "\"\n");
    control_ = std::make_unique<mesh::testing::BackgroundProcess>(
        std::vector<std::string>{itest::bin("mesh-control"), "run", "--config", cfg.string(), "--log-level", "debug"});
    ASSERT_TRUE(mesh::testing::eventually([&] { return mesh({"nodes"}).exit_code == 0; }, 30000))
        << control_->stderr_text();
  }

  fs::path repo() const { return dir() / "repo"; }
  int port() const { return port_; }

  /// A client of the operator API in this process, as `mesh` is (the admin identity).
  std::unique_ptr<cli::Client> client(const std::string& identity_file = "") {
    auto id = trust::load_operator_identity(identity_file.empty() ? admin_identity() : identity_file);
    EXPECT_TRUE(id) << id.error().message;
    cli::ClientOptions o;
    o.plugin_dir = MESH_TEST_PLUGIN_DIR;
    o.transport_config = sdk::Value::object();
    o.transport_config.set("servers", sdk::Value(sdk::Value::Array{sdk::Value(nats_->url())}));
    o.servers = nats_->url();
    o.timeout = std::chrono::seconds(30);
    o.identity = *id;
    o.control_key = id->control_key;
    auto c = cli::Client::connect(o);
    EXPECT_TRUE(c) << c.error().message;
    return c ? std::move(*c) : nullptr;
  }

  int port_ = 0;
};

}  // namespace mesh::stages::publish::test
