// Tests of the test harness itself: processes, temporary folders, a real nats-server, and the
// cluster's route authentication (decision record 180: the shape README "A NATS cluster" documents).
#include <gtest/gtest.h>
#include <nats/nats.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include "mesh/testing/nats_server.h"
#include "mesh/testing/process.h"
#include "mesh/testing/temp_dir.h"
#include "mesh/testing/text.h"

namespace mesh::testing {
namespace {

TEST(TempDirTest, CreatesAndRemovesRecursively) {
  std::filesystem::path kept;
  {
    TempDir dir;
    kept = dir.path();
    ASSERT_TRUE(std::filesystem::is_directory(kept));
    std::filesystem::create_directories(kept / "a" / "b");
    std::ofstream(kept / "a" / "b" / "f") << "x";
  }
  EXPECT_FALSE(std::filesystem::exists(kept));
}

TEST(ProcessTest, RunCapturesOutputExitCodeEnvAndStdin) {
  auto r = run_process({"/bin/sh", "-c", "read line; echo \"$line $MESH_X\"; echo err >&2; exit 3"},
                       {"MESH_X=42"}, 10000, "hello\n");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "hello 42\n");
  EXPECT_EQ(r.err, "err\n");
}

TEST(ProcessTest, RunTimesOutWithSigkillAndReportsMissingPrograms) {
  auto slow = run_process({"sleep", "10"}, {}, 200);
  EXPECT_EQ(slow.exit_code, -9);
  auto missing = run_process({"/nonexistent/program"});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_NE(missing.err.find("cannot execute"), std::string::npos);
}

TEST(ProcessTest, BackgroundProcessOutputAndStop) {
  BackgroundProcess p({"/bin/sh", "-c", "echo ready >&2; exec sleep 30"});
  EXPECT_TRUE(p.wait_for_output("ready", 5000));
  EXPECT_TRUE(p.running());
  EXPECT_EQ(p.stop(), -SIGTERM);
  EXPECT_FALSE(p.running());
  EXPECT_EQ(p.stop(), -SIGTERM);  // idempotent
  EXPECT_THROW(BackgroundProcess({"/nonexistent/program"}), std::runtime_error);
}

TEST(ProcessTest, EventuallyAndFreePort) {
  int calls = 0;
  EXPECT_TRUE(eventually([&] { return ++calls >= 3; }, 2000));
  EXPECT_FALSE(eventually([] { return false; }, 50));
  const int port = free_tcp_port();
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
}

TEST(NatsServerTest, StartsStopsAndRestartsOnTheSamePort) {
  NatsServer server({}, /*jetstream=*/true);
  EXPECT_TRUE(server.running());
  EXPECT_EQ(server.url(), "nats://127.0.0.1:" + std::to_string(server.port()));
  const int port = server.port();
  server.stop();
  EXPECT_FALSE(server.running());
  server.start();
  EXPECT_TRUE(server.running());
  EXPECT_EQ(server.port(), port);
  EXPECT_TRUE(std::filesystem::exists(server.log_path()));
}

TEST(NatsServerTest, BadArgumentsThrowWithTheServersComplaint) {
  try {
    NatsServer server({"-c", "/nonexistent/mesh.conf"});
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("mesh.conf"), std::string::npos) << e.what();
  }
}

TEST(NatsServerTest, KillIsSigkillAndStartComesBack) {
  NatsServer server;
  server.kill();
  EXPECT_FALSE(server.running());
  server.start();
  EXPECT_TRUE(server.running());
  EXPECT_TRUE(accepts_tcp(server.port()));
}

// Three servers with routes: a meta leader is elected; killing it makes another server the
// leader; the killed one comes back on its port and rejoins under the same leader.
TEST(NatsClusterTest, ElectsAMetaLeaderAndSurvivesTheLossOfOne) {
  NatsCluster cluster;
  ASSERT_EQ(cluster.size(), 3u);
  ASSERT_EQ(cluster.urls().size(), 3u);
  EXPECT_EQ(cluster.urls_joined(),
            cluster.url(0) + "," + cluster.url(1) + "," + cluster.url(2));
  auto leader = cluster.wait_for_meta_leader(30000);
  ASSERT_TRUE(leader.has_value()) << "no meta leader; log of n0:\n" << cluster.log_path(0);
  const std::size_t first = *leader;
  cluster.kill(first);
  EXPECT_FALSE(cluster.running(first));
  EXPECT_FALSE(accepts_tcp(cluster.port(first)));
  // meta_leader() never names a server that is down, and the two left elect one of themselves.
  leader = cluster.wait_for_meta_leader(60000);
  ASSERT_TRUE(leader.has_value());
  EXPECT_NE(*leader, first);
  cluster.start(first);
  EXPECT_TRUE(accepts_tcp(cluster.port(first)));
  EXPECT_TRUE(eventually([&] { return cluster.meta_leader().has_value(); }, 30000));
  std::ifstream conf(cluster.config_path(first));
  std::string text((std::istreambuf_iterator<char>(conf)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("server_name: " + cluster.name(first)), std::string::npos);
}

TEST(NatsClusterTest, ExtraConfigReachesEveryServer) {
  // A config every server refuses: the constructor reports the server's complaint.
  try {
    NatsCluster cluster(3, "no_such_option_here: 1");
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_option_here"), std::string::npos) << e.what();
  }
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

using mesh::testing::occurrences;

/// A plain nats.c client without credentials (what a rogue server's user, or a client of an open
/// server, would use): subscribe, publish, collect what arrived.
struct Client {
  natsConnection* nc = nullptr;
  natsSubscription* sub = nullptr;
  explicit Client(const std::string& url) {
    natsOptions* o = nullptr;
    natsOptions_Create(&o);
    natsOptions_SetURL(o, url.c_str());
    natsOptions_SetTimeout(o, 3000);
    natsOptions_SetMaxReconnect(o, 0);
    natsConnection_Connect(&nc, o);
    natsOptions_Destroy(o);
  }
  ~Client() {
    if (sub) natsSubscription_Destroy(sub);
    if (nc) natsConnection_Destroy(nc);
  }
  bool connected() const { return nc != nullptr; }
  bool subscribe(const std::string& subject) {
    return natsConnection_SubscribeSync(&sub, nc, subject.c_str()) == NATS_OK &&
           natsConnection_FlushTimeout(nc, 3000) == NATS_OK;
  }
  bool publish(const std::string& subject, const std::string& data) {
    return natsConnection_PublishString(nc, subject.c_str(), data.c_str()) == NATS_OK &&
           natsConnection_FlushTimeout(nc, 3000) == NATS_OK;
  }
  /// Every message that arrives within `wait_ms`, as "subject data" lines.
  std::string received(int wait_ms) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      natsMsg* m = nullptr;
      if (natsSubscription_NextMsg(&m, sub, 50) == NATS_OK && m) {
        out += std::string(natsMsg_GetSubject(m)) + " " +
               std::string(natsMsg_GetData(m), static_cast<std::size_t>(natsMsg_GetDataLength(m))) + "\n";
        natsMsg_Destroy(m);
      }
    }
    return out;
  }
};

/// A server of our own, outside the cluster: client port chosen by NatsServer, monitoring on
/// `monitor_port`, and `cluster_block` (the inside of its `cluster {}`), config in `dir`.
std::unique_ptr<NatsServer> outsider(const std::filesystem::path& dir, const std::string& name, int monitor_port,
                                     const std::string& cluster_block) {
  const auto conf = dir / (name + ".conf");
  std::ofstream(conf) << "server_name: " << name << "\nhttp: 127.0.0.1:" << monitor_port << "\ncluster {\n"
                      << cluster_block << "\n}\n";
  return std::make_unique<NatsServer>(std::vector<std::string>{"-c", conf.string()});
}

std::optional<long long> routes_of(int monitor_port) {
  return monitoring_number(monitoring_get(monitor_port, "/routez"), "num_routes");
}

/// A self-signed certificate for 127.0.0.1 that no CA of the cluster signed ("<dir>/<name>.pem",
/// "<dir>/<name>.key").
void self_signed(const std::filesystem::path& dir, const std::string& name) {
  const auto r = run_process({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                              "-nodes", "-days", "2", "-subj", "/CN=" + name, "-addext",
                              "subjectAltName=IP:127.0.0.1", "-keyout", (dir / (name + ".key")).string(), "-out",
                              (dir / (name + ".pem")).string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

/// Publishes probes on server `from` until a client of server `to` gets one (interest has
/// crossed the routes), then `subject data` once more, and returns whether `to` got that too.
bool delivered_across(NatsCluster& cluster, std::size_t from, std::size_t to, const std::string& subject,
                      const std::string& data) {
  Client sender(cluster.url(from)), receiver(cluster.url(to));
  if (!sender.connected() || !receiver.connected() || !receiver.subscribe(subject)) return false;
  bool crossed = false;
  for (int i = 0; i < 100 && !crossed; ++i) {
    sender.publish(subject, "probe");
    crossed = receiver.received(100).find("probe") != std::string::npos;
  }
  return crossed && sender.publish(subject, data) && receiver.received(1000).find(data) != std::string::npos;
}

// The routes' secret is in one 0600 file included by every server's cluster block; the servers'
// own configs hold none of it, and neither their logs nor any monitoring endpoint shows it
// (the monitoring port has no authentication: docs/security.md).
TEST(NatsClusterTest, RoutesAreAuthenticatedFromOneOwnerOnlyFile) {
  NatsCluster cluster;
  ASSERT_TRUE(cluster.wait_for_meta_leader(30000).has_value());
  struct stat st{};
  ASSERT_EQ(::stat(cluster.routes_config_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(cluster.route_key_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string password = cluster.route_password();
  ASSERT_EQ(password.size(), 32u);
  const std::string routes = read_all(cluster.routes_config_path());
  EXPECT_NE(routes.find("authorization { user: mesh-route, password: \"" + password + "\" }"), std::string::npos)
      << routes;
  EXPECT_NE(routes.find("nats-route://mesh-route:" + password + "@127.0.0.1:" + std::to_string(cluster.route_port(1))),
            std::string::npos)
      << routes;
  EXPECT_NE(routes.find("verify: true"), std::string::npos) << routes;
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    EXPECT_TRUE(eventually([&] { return cluster.route_count(i) == 2; }, 10000)) << read_all(cluster.log_path(i));
    const std::string conf = read_all(cluster.config_path(i));
    EXPECT_EQ(conf.find(password), std::string::npos) << conf;
    EXPECT_NE(conf.find("include \"routes.conf\""), std::string::npos) << conf;
    EXPECT_EQ(read_all(cluster.log_path(i)).find(password), std::string::npos);
    for (const char* endpoint : {"/varz", "/routez", "/routez?subs=1", "/connz?auth=1&subs=detail", "/jsz", "/subsz"})
      EXPECT_EQ(monitoring_get(cluster.monitor_port(i), endpoint).find(password), std::string::npos) << endpoint;
  }
  EXPECT_TRUE(delivered_across(cluster, 0, 2, "check.routes", "across"));
}

// The positive control of the refusals below: a server whose cluster block includes the
// routes file joins the cluster, and its clients get the cluster's messages.
TEST(NatsClusterTest, AServerGivenTheRoutesFileJoins) {
  NatsCluster cluster;
  ASSERT_TRUE(cluster.wait_for_meta_leader(30000).has_value());
  const int monitor = free_tcp_port();
  auto extra = outsider(cluster.dir(), "n9", monitor,
                        "  name: mesh\n  listen: 127.0.0.1:" + std::to_string(free_tcp_port()) +
                            "\n  include \"routes.conf\"");
  EXPECT_TRUE(eventually([&] { return routes_of(monitor) == 3; }, 15000)) << read_all(extra->log_path());
  Client listener(extra->url());
  ASSERT_TRUE(listener.connected());
  ASSERT_TRUE(listener.subscribe("joined.>"));
  Client sender(cluster.url(0));
  bool got = false;
  for (int i = 0; i < 100 && !got; ++i) {
    sender.publish("joined.x", "hello");
    got = listener.received(100).find("hello") != std::string::npos;
  }
  EXPECT_TRUE(got);
}

// Issue 15, finding 15: a server that dials a route port without the routes' credentials is
// refused — with no credentials at all (the finding's rogue), with the password but a
// certificate of another CA, with a certificate of the routes' CA but no or a wrong password. Its
// route is never made, and its clients see none of the cluster's messages.
TEST(NatsClusterTest, AServerWithoutTheRouteCredentialsIsRefused) {
  NatsCluster cluster;
  ASSERT_TRUE(cluster.wait_for_meta_leader(30000).has_value());
  TempDir mine;
  self_signed(mine.path(), "rogue");
  if (HasFatalFailure()) return;
  const std::string target = "127.0.0.1:" + std::to_string(cluster.route_port(0));
  const std::string password = cluster.route_password();
  const std::string cluster_tls = "  tls { cert_file: \"" + cluster.route_cert_path() + "\", key_file: \"" +
                                  cluster.route_key_path() + "\", ca_file: \"" + cluster.route_ca_path() +
                                  "\", verify: true }\n";
  struct Case {
    const char* what;
    std::string block;
  };
  const std::vector<Case> cases = {
      {"no credentials (finding 15)", "  routes: [nats-route://" + target + "]\n"},
      {"the password, a certificate of another CA",
       "  routes: [nats-route://mesh-route:" + password + "@" + target + "]\n  tls { cert_file: \"" +
           (mine.path() / "rogue.pem").string() + "\", key_file: \"" + (mine.path() / "rogue.key").string() +
           "\", ca_file: \"" + cluster.route_ca_path() + "\" }\n"},
      {"a certificate of the routes' CA, no password", "  routes: [nats-route://" + target + "]\n" + cluster_tls},
      {"a certificate of the routes' CA, a wrong password",
       "  routes: [nats-route://mesh-route:" + std::string(32, 'a') + "@" + target + "]\n" + cluster_tls},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const int monitor = free_tcp_port();
    const std::string name = "rogue" + std::to_string(&c - cases.data());
    auto rogue = outsider(mine.path(), name, monitor,
                          "  name: mesh\n  listen: 127.0.0.1:" + std::to_string(free_tcp_port()) + "\n" + c.block);
    Client spy(rogue->url());
    ASSERT_TRUE(spy.connected());
    ASSERT_TRUE(spy.subscribe(">"));
    // The rogue has tried at least twice (it dials again every second) and each attempt ended.
    EXPECT_TRUE(eventually([&] { return occurrences(read_all(rogue->log_path()), "Router connection closed") >= 2; },
                           15000))
        << read_all(rogue->log_path());
    EXPECT_EQ(routes_of(monitor), 0) << read_all(rogue->log_path());
    for (std::size_t i = 0; i < cluster.size(); ++i) EXPECT_EQ(cluster.route_count(i), 2) << i;
    EXPECT_TRUE(delivered_across(cluster, 0, 2, "secret.declaration", "db_password=hunter2"));
    EXPECT_EQ(spy.received(500), "");
  }
}

// Route TLS with verify authenticates the side that accepts a route too: a local user who binds
// the route port of a stopped server is not dialled into the cluster by the others (with route
// passwords alone it would be: the dialling server sends its credentials and takes whatever
// answers for a route). Plain and with a certificate of another CA.
TEST(NatsClusterTest, AServerOnAStoppedServersRoutePortIsNotDialledIn) {
  NatsCluster cluster;
  ASSERT_TRUE(cluster.wait_for_meta_leader(30000).has_value());
  TempDir mine;
  self_signed(mine.path(), "squatter");
  if (HasFatalFailure()) return;
  cluster.stop(1);
  ASSERT_TRUE(eventually([&] { return cluster.route_count(0) == 1 && cluster.route_count(2) == 1; }, 15000));
  const std::string listen = "  name: mesh\n  listen: 127.0.0.1:" + std::to_string(cluster.route_port(1)) + "\n";
  for (const std::string& tls :
       {std::string(), "  tls { cert_file: \"" + (mine.path() / "squatter.pem").string() + "\", key_file: \"" +
                           (mine.path() / "squatter.key").string() + "\", ca_file: \"" +
                           (mine.path() / "squatter.pem").string() + "\" }\n"}) {
    SCOPED_TRACE(tls.empty() ? "plain" : "a certificate of another CA");
    const int monitor = free_tcp_port();
    auto squatter = outsider(mine.path(), tls.empty() ? "squatter0" : "squatter1", monitor, listen + tls);
    Client spy(squatter->url());
    ASSERT_TRUE(spy.connected());
    ASSERT_TRUE(spy.subscribe(">"));
    // n0 and n2 dial it (every second) and give up at the TLS handshake.
    const auto before = read_all(cluster.log_path(0)).size();
    EXPECT_TRUE(eventually(
        [&] { return occurrences(read_all(cluster.log_path(0)).substr(before), "TLS Handshake Failure") >= 2; },
        15000))
        << read_all(cluster.log_path(0)).substr(before) << "\n---- squatter\n" << read_all(squatter->log_path());
    EXPECT_EQ(routes_of(monitor), 0) << read_all(squatter->log_path());
    EXPECT_EQ(cluster.route_count(0), 1);
    EXPECT_EQ(cluster.route_count(2), 1);
    EXPECT_TRUE(delivered_across(cluster, 0, 2, "secret.declaration", "db_password=hunter2"));
    EXPECT_EQ(spy.received(500), "");
  }
  cluster.start(1);
  EXPECT_TRUE(eventually([&] { return cluster.route_count(0) == 2 && cluster.route_count(1) == 2; }, 15000));
}

}  // namespace
}  // namespace mesh::testing
