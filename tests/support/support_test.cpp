// Tests of the test harness itself: processes, temporary folders, a real nats-server.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "mesh/testing/nats_server.h"
#include "mesh/testing/process.h"
#include "mesh/testing/temp_dir.h"

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

}  // namespace
}  // namespace mesh::testing
