// Issue 15, finding 15, end to end (decision record 180): on the documented cluster — routes
// authenticated by a password and TLS with verify, from the 0600 routes.conf every server
// includes (tests/support NatsCluster) — a nats-server that a local user starts with a route to
// the cluster and no credentials is refused: its route is never made, and a client of it sees
// nothing of a permissioned mesh at work (enrolments, declarations with a secret in them,
// reports, heartbeats). With the routes as they were before decision 180 (no authentication) the
// same test fails: the rogue has 3 routes and its client gets mesh.api.*, mesh.enrol,
// mesh.briefing.*, mesh.heartbeat.*, ... (checked once by hand).
#include <nats/nats.h>

#include "cluster_fixture.h"
#include "mesh/testing/text.h"

namespace mesh::itest {
namespace {

using mesh::testing::occurrences;

/// An anonymous nats.c client of the rogue server, subscribed to everything from the start.
struct Spy {
  natsConnection* nc = nullptr;
  natsSubscription* sub = nullptr;
  explicit Spy(const std::string& url) {
    natsOptions* o = nullptr;
    natsOptions_Create(&o);
    natsOptions_SetURL(o, url.c_str());
    natsOptions_SetTimeout(o, 3000);
    natsOptions_SetMaxReconnect(o, 0);
    natsConnection_Connect(&nc, o);
    natsOptions_Destroy(o);
    if (nc) {
      natsConnection_SubscribeSync(&sub, nc, ">");
      natsSubscription_SetPendingLimits(sub, -1, -1);
      natsConnection_FlushTimeout(nc, 3000);
    }
  }
  ~Spy() {
    if (sub) natsSubscription_Destroy(sub);
    if (nc) natsConnection_Destroy(nc);
  }
  /// The subjects of every message it got so far (and within `wait_ms` more), one a line.
  std::string subjects(int wait_ms) {
    std::string out;
    for (;;) {
      natsMsg* m = nullptr;
      if (natsSubscription_NextMsg(&m, sub, wait_ms) != NATS_OK || !m) return out;
      out += std::string(natsMsg_GetSubject(m)) + "\n";
      natsMsg_Destroy(m);
    }
  }
};

TEST_F(PermissionedClusterTest, ARogueServerWithoutTheRouteCredentialsSeesNothingOfTheMesh) {
  // The finding's rogue.conf: its own ports, one route to n0's route port, no credentials.
  TempDir rogue_dir;
  const int rogue_monitor = mesh::testing::free_tcp_port();
  const fs::path rogue_conf = rogue_dir.path() / "rogue.conf";
  cluster_write(rogue_conf, "server_name: rogue\nhttp: 127.0.0.1:" + std::to_string(rogue_monitor) +
                                "\ncluster { name: mesh, listen: 127.0.0.1:" +
                                std::to_string(mesh::testing::free_tcp_port()) +
                                ", routes: [nats-route://127.0.0.1:" + std::to_string(nats_->route_port(0)) + "] }\n");
  mesh::testing::NatsServer rogue({"-c", rogue_conf.string()});
  Spy spy(rogue.url());
  ASSERT_NE(spy.sub, nullptr) << "a client of the rogue server subscribes to everything";

  start_control(0);
  for (std::size_t i = 0; i < 3; ++i) add_host("web-0" + std::to_string(i + 1), i);
  push_motd("web", "1.0", "db_password=hunter2");
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  auto d = mesh({"deploy", "web", "1.0", "--wait", "60s", "--output", "json"});
  ASSERT_EQ(d.exit_code, 0) << d.out << d.err;
  EXPECT_EQ(cluster_count(cluster_json(d.out), "applied"), 3u) << d.out;
  for (const char* node : {"web-01", "web-02", "web-03"}) EXPECT_EQ(motd_of(node), "db_password=hunter2");

  // The rogue keeps trying (about every second; at least twice by now); no route was ever made.
  EXPECT_TRUE(mesh::testing::eventually(
      [&] { return occurrences(cluster_read(rogue.log_path()), "Router connection closed") >= 2; }, 15000))
      << cluster_read(rogue.log_path());
  const std::string rogue_log = cluster_read(rogue.log_path());
  EXPECT_EQ(mesh::testing::monitoring_number(mesh::testing::monitoring_get(rogue_monitor, "/routez"), "num_routes"),
            0)
      << rogue_log;
  for (std::size_t i = 0; i < nats_->size(); ++i) EXPECT_EQ(nats_->route_count(i), 2) << "server " << i;
  // Nothing of the mesh reached its client.
  EXPECT_EQ(spy.subjects(500), "");
}

}  // namespace
}  // namespace mesh::itest
