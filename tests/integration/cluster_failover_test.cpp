// Hosts on a NATS cluster (issue 15, item 3): a host lists every server; when the server it is
// connected to dies it reconnects to another and learns its latest declaration as on any
// reconnect — also one written while it was away.
#include <csignal>

#include "cluster_fixture.h"

namespace mesh::itest {
namespace {

using FailoverTest = ClusterTest;

TEST_F(FailoverTest, HostReconnectsToAnotherServerAndGetsItsLatestDeclaration) {
  start_control(0);
  add_host("h1", 1);
  push_motd("web", "1.0", "one\\n");
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  auto first = mesh({"deploy", "web", "1.0", "--wait", "30s", "--output", "json"});
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  ASSERT_EQ(motd_of("h1"), "one\n");

  std::optional<std::size_t> server;
  ASSERT_TRUE(mesh::testing::eventually([&] { return (server = nats_->server_of_client("h1")).has_value(); }, 10000));
  const std::size_t before_reconnects = [&] {
    std::size_t n = 0;
    const std::string log = hosts_["h1"].proc->stderr_text();
    for (std::size_t at = 0; (at = log.find("link event=reconnected", at)) != std::string::npos; ++at) ++n;
    return n;
  }();
  nats_->kill(*server);

  // Written while the host is (perhaps still) away: its push may be lost, its reconnect fetches it.
  push_motd("web", "2.0", "two\\n");
  auto second = mesh({"deploy", "web", "2.0", "--wait", "60s", "--output", "json"});
  EXPECT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_EQ(cluster_count(cluster_json(second.out), "applied"), 1u) << second.out;
  EXPECT_EQ(motd_of("h1"), "two\n");

  std::optional<std::size_t> now_on;
  ASSERT_TRUE(mesh::testing::eventually([&] { return (now_on = nats_->server_of_client("h1")).has_value(); }, 20000));
  EXPECT_NE(*now_on, *server) << "the host is on a server that runs";
  const std::string log = hosts_["h1"].proc->stderr_text();
  std::size_t reconnects = 0;
  for (std::size_t at = 0; (at = log.find("link event=reconnected", at)) != std::string::npos; ++at) ++reconnects;
  EXPECT_GT(reconnects, before_reconnects) << log;
  EXPECT_TRUE(hosts_["h1"].proc->running());

  // The server comes back; nothing changes for the host, and its contact keeps advancing.
  nats_->start(*server);
  auto nodes = [&] { return cluster_json(mesh({"nodes", "--output", "json"}).out); };
  const std::string seen = nodes().as_array().at(0).get_string("last_contact");
  EXPECT_TRUE(mesh::testing::eventually(
      [&] { return nodes().as_array().at(0).get_string("last_contact") != seen; }, 20000))
      << nodes().to_json();
}

}  // namespace
}  // namespace mesh::itest
