// A signing key rotated while several control planes run (decision record 103): two mesh-control
// instances on a 3-node NATS cluster share keys_dir; `mesh-control rotate-key` is run once, and
// neither instance is restarted. Both take the new key from signing.json (each logs it once), the
// hosts pin it from the next declaration, and from then on every declaration either instance
// pushes is signed with the new key — a host that pinned it refuses the old one, so a push still
// signed with the old key would leave its node outstanding.
#include "cluster_fixture.h"
#include "mesh/testing/text.h"

namespace mesh::itest {
namespace {

using ClusterKeyRotationTest = ClusterTest;

using mesh::testing::occurrences;

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

TEST_F(ClusterKeyRotationTest, BothInstancesSignWithTheRotatedKeyWithoutARestart) {
  start_control(0);
  start_control(1);
  constexpr int kHosts = 4;
  for (int i = 0; i < kHosts; ++i) add_host("web-" + std::to_string(i), static_cast<std::size_t>(i));
  push_motd("web", "1.0", "{{node.name}} 1.0\\n");
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  auto deploy = [&](const std::string& version) {
    auto r = mesh({"deploy", "web", version, "--wait", "60s", "--output", "json"}, 90000);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err << control_logs();
    return cluster_json(r.out);
  };
  auto applied = [](const sdk::Value& rep) {
    const sdk::Value* l = rep.find("applied");
    return l && l->is_array() ? l->as_array().size() : 0u;
  };
  ASSERT_EQ(applied(deploy("1.0")), static_cast<std::size_t>(kHosts));
  const std::string k0 = trimmed(cluster_read(keys_dir() / "control.pub"));
  auto pinned = [&](int i) {
    return cluster_json(cluster_read(dir() / ("host-web-" + std::to_string(i)) / "identity.json")).get_string("control_key");
  };
  for (int i = 0; i < kHosts; ++i) EXPECT_EQ(pinned(i), k0);

  // Rotated through instance 0's config while both run; neither is restarted.
  auto rot = mesh::testing::run_process(
      {cluster_bin("mesh-control"), "rotate-key", "--config", (dir() / "control-0.toml").string()}, {}, 60000);
  ASSERT_EQ(rot.exit_code, 0) << rot.out << rot.err;
  const std::string k1 = trimmed(cluster_read(keys_dir() / "control.pub"));
  ASSERT_NE(k0, k1);
  EXPECT_NE(rot.out.find("no restart"), std::string::npos) << rot.out;
  // Each instance takes it from signing.json when it next signs: a deploy makes both sign (its API replies, pushes and acks spread over the group).
  const std::string reloaded = "signing key reloaded keys_dir=" + keys_dir().string() + " old_key=" + k0 +
                               " new_key=" + k1 + " rotations=1";
  push_motd("web", "1.1", "{{node.name}} 1.1\\n");
  ASSERT_EQ(applied(deploy("1.1")), static_cast<std::size_t>(kHosts));
  // Every host pinned the new key (from a message signed with it and the chain).
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        for (int i = 0; i < kHosts; ++i)
          if (pinned(i) != k1) return false;
        return true;
      },
      30000))
      << control_logs();
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        (void)mesh({"nodes"});  // something to sign for whichever instance has not signed since
        return occurrences(controls_[0]->stderr_text(), reloaded) == 1 &&
               occurrences(controls_[1]->stderr_text(), reloaded) == 1;
      },
      30000))
      << control_logs();

  // From now on the hosts refuse the old key. Deploys whose writes and pushes land on either
  // instance (the queue group spreads the requests) all apply: both push with the new key.
  const std::size_t pushes0 = occurrences(controls_[0]->stderr_text(), "declaration pushed node=");
  const std::size_t pushes1 = occurrences(controls_[1]->stderr_text(), "declaration pushed node=");
  // The queue group picks an instance at random for each request: deploy until each instance
  // pushed at least once (at least 6 deploys; 24 leave a chance of 2^-23 that one never did).
  auto pushed_since = [&](int i, std::size_t before) {
    return occurrences(controls_[i]->stderr_text(), "declaration pushed node=") > before;
  };
  std::string last;
  for (int v = 2; v < 26; ++v) {
    last = "1." + std::to_string(v);
    push_motd("web", last, "{{node.name}} " + last + "\\n");
    auto rep = deploy(last);
    EXPECT_EQ(applied(rep), static_cast<std::size_t>(kHosts)) << rep.to_json() << control_logs();
    if (v >= 7 && pushed_since(0, pushes0) && pushed_since(1, pushes1)) break;
  }
  EXPECT_TRUE(pushed_since(0, pushes0)) << "instance 0 pushed after the rotation";
  EXPECT_TRUE(pushed_since(1, pushes1)) << "instance 1 pushed after the rotation";
  for (int i = 0; i < kHosts; ++i) {
    EXPECT_EQ(cluster_read(dir() / "files" / ("web-" + std::to_string(i)) / "motd"),
              "web-" + std::to_string(i) + " " + last + "\n");
    EXPECT_EQ(pinned(i), k1);
  }
  EXPECT_EQ(occurrences(control_logs(), "signing key not reloaded"), 0u) << control_logs();
}

}  // namespace
}  // namespace mesh::itest
