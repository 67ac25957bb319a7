#include <gtest/gtest.h>

#include "mesh/common/config.h"
#include "mesh/control/config.h"

namespace mesh::control {
namespace {

using common::ConfigFile;

sdk::Result<ControlConfig> load(const std::string& text) {
  auto file = ConfigFile::parse(text, "control.toml");
  if (!file) return sdk::fail(file.error());
  return load_control_config(*file);
}

const char* kMinimal = R"([control]
state_dir = "/var/lib/nox-mesh-control"

[plugins]
dir = "/usr/lib/nox-mesh/plugins"
)";

TEST(ControlConfigTest, MinimalConfigGetsDefaults) {
  auto c = load(kMinimal);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->state_dir, "/var/lib/nox-mesh-control");
  EXPECT_EQ(c->plugin_dirs, std::vector<std::string>{"/usr/lib/nox-mesh/plugins"});
  EXPECT_EQ(c->retain, 50u);
  EXPECT_EQ(c->heartbeat_flush.count(), 250);
  EXPECT_EQ(c->store_plugin, "sqlite");
  EXPECT_EQ(c->transport_plugin, "nats");
  EXPECT_EQ(c->max_message, 0u);
  EXPECT_EQ(c->clock_tolerance.count(), 60000);
}

TEST(ControlConfigTest, PluginsDirMayBeAListSearchedInOrder) {
  auto c = load("[control]\nstate_dir = \"/s\"\n[plugins]\ndir = [\"/usr/lib/nox-mesh/plugins\", \"/usr/local/lib/nox-mesh/plugins\"]\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->plugin_dirs,
            (std::vector<std::string>{"/usr/lib/nox-mesh/plugins", "/usr/local/lib/nox-mesh/plugins"}));
  auto empty = load("[control]\nstate_dir = \"/s\"\n[plugins]\ndir = []\n");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().message, "control.toml:4: plugins.dir: must not be empty");
}

TEST(ControlConfigTest, ClockTolerance) {
  auto c = load(std::string(kMinimal).replace(std::string(kMinimal).find("\n\n"), 2, "\nclock_tolerance = \"2m\"\n\n"));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->clock_tolerance.count(), 120000);
  auto bad = load(std::string(kMinimal).replace(std::string(kMinimal).find("\n\n"), 2, "\nclock_tolerance = \"10ms\"\n\n"));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("control.clock_tolerance: must be between 1s and 1h"), std::string::npos)
      << bad.error().message;
}

// Several control planes (decision records 90-91): keys_dir defaults to state_dir; the lease is
// bounded; pid_file may be one file or a list.
TEST(ControlConfigTest, KeysDirLeaseAndPidFiles) {
  auto c = load(kMinimal);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->keys_dir, "/var/lib/nox-mesh-control");
  EXPECT_EQ(c->lease.count(), 15000);
  EXPECT_TRUE(c->broker.pid_files.empty());
  auto set = [](const std::string& extra) {
    return load(std::string(kMinimal).replace(std::string(kMinimal).find("\n\n"), 2, "\n" + extra + "\n\n"));
  };
  auto shared = set("keys_dir = \"/srv/keys\"\nlease = \"30s\"");
  ASSERT_TRUE(shared) << shared.error().message;
  EXPECT_EQ(shared->keys_dir, "/srv/keys");
  EXPECT_EQ(shared->lease.count(), 30000);
  for (const char* bad : {"lease = \"1s\"", "lease = \"11m\""}) {
    auto r = set(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("control.toml:3: control.lease: must be between 2s and 10m"), std::string::npos)
        << r.error().message;
  }
  auto empty = set("keys_dir = \"\"");
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message.find("control.keys_dir: must not be empty"), std::string::npos) << empty.error().message;
  auto word = set("lease = \"soon\"");
  ASSERT_FALSE(word);
  EXPECT_NE(word.error().message.find("control.lease"), std::string::npos) << word.error().message;

  auto one = load(std::string(kMinimal) + "\n[broker]\nauthorization_file = \"/a\"\npid_file = \"/run/n.pid\"\n");
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(one->broker.pid_files, std::vector<std::string>{"/run/n.pid"});
  auto three = load(std::string(kMinimal) +
                    "\n[broker]\nauthorization_file = \"/a\"\npid_file = [\"/run/n0.pid\", \"/run/n1.pid\", \"/run/n2.pid\"]\n");
  ASSERT_TRUE(three) << three.error().message;
  EXPECT_EQ(three->broker.pid_files.size(), 3u);
  auto twice = load(std::string(kMinimal) + "\n[broker]\nauthorization_file = \"/a\"\npid_file = [\"/p\", \"/p\"]\n");
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message.find("broker.pid_file"), std::string::npos) << twice.error().message;
}

TEST(ControlConfigTest, ReadsEveryKey) {
  auto c = load(R"([control]
state_dir = "/s"
retain = 7
heartbeat_flush = "100ms"

[plugins]
dir = "/p"

[store]
plugin = "jetstream-kv"

[transport]
plugin = "nats"
servers = ["nats://127.0.0.1:4222"]

[limits]
max_message = 65536
node_store_rate = 4096
node_store_burst = 65536
)");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->retain, 7u);
  EXPECT_EQ(c->heartbeat_flush.count(), 100);
  EXPECT_EQ(c->store_plugin, "jetstream-kv");
  EXPECT_EQ(c->max_message, 65536u);
  EXPECT_EQ(c->node_store_rate, 4096.0);
  EXPECT_EQ(c->node_store_burst, 65536.0);
  auto low = load(std::string(kMinimal) + "[limits]\nnode_store_rate = 10\n");
  ASSERT_FALSE(low);
  EXPECT_NE(low.error().message.find("limits.node_store_rate"), std::string::npos) << low.error().message;
}

TEST(ControlConfigTest, UnknownKeyNamesFileLineAndKey) {
  auto c = load("[control]\nstate_dir = \"/s\"\nretian = 5\n\n[plugins]\ndir = \"/p\"\n");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, sdk::ErrorCode::InvalidArgument);
  EXPECT_NE(c.error().message.find("control.toml:3: control.retian: unknown"),
            std::string::npos)
      << c.error().message;
}

TEST(ControlConfigTest, WrongTypeAndUnknownTableAndMissingKeys) {
  auto t = load("[control]\nstate_dir = \"/s\"\nretain = \"many\"\n[plugins]\ndir = \"/p\"\n");
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("control.toml:3: control.retain: must be a integer"), std::string::npos)
      << t.error().message;

  auto u = load(std::string(kMinimal) + "\n[timer]\nx = 1\n");
  ASSERT_FALSE(u);
  EXPECT_NE(u.error().message.find("control.toml:7: timer: unknown table"), std::string::npos)
      << u.error().message;

  auto m = load("[plugins]\ndir = \"/p\"\n");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("control.state_dir: is required"), std::string::npos) << m.error().message;

  auto p = load("[control]\nstate_dir = \"/s\"\n");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("plugins.dir: is required"), std::string::npos) << p.error().message;
}

TEST(ControlConfigTest, RangesAreChecked) {
  auto slow = load("[control]\nstate_dir = \"/s\"\nheartbeat_flush = \"2s\"\n[plugins]\ndir = \"/p\"\n");
  ASSERT_FALSE(slow);
  EXPECT_NE(slow.error().message.find("control.toml:3: control.heartbeat_flush: must be between 1ms and 500ms"),
            std::string::npos)
      << slow.error().message;
  auto bad = load("[control]\nstate_dir = \"/s\"\nheartbeat_flush = \"soon\"\n[plugins]\ndir = \"/p\"\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("control.heartbeat_flush"), std::string::npos);
  auto retain = load("[control]\nstate_dir = \"/s\"\nretain = 0\n[plugins]\ndir = \"/p\"\n");
  ASSERT_FALSE(retain);
  EXPECT_NE(retain.error().message.find("control.retain: must be between 1 and 100000"), std::string::npos);
  auto limit = load(std::string(kMinimal) + "[limits]\nmax_message = 10\n");
  ASSERT_FALSE(limit);
  EXPECT_NE(limit.error().message.find("limits.max_message"), std::string::npos);
  auto plugin = load(std::string(kMinimal) + "[store]\nplugin = 5\n");
  ASSERT_FALSE(plugin);
  EXPECT_NE(plugin.error().message.find("control.toml:7: store.plugin: must be a string"), std::string::npos)
      << plugin.error().message;
}

TEST(ControlConfigTest, PluginTablesAreCheckedAgainstThePluginSchema) {
  const sdk::Schema store_schema{"store", "", {sdk::Attribute{"path", sdk::ValueType::String, true, "db"}}};
  const sdk::Schema transport_schema{
      "transport", "", {sdk::Attribute{"servers", sdk::ValueType::StringList, true, "urls"},
                        sdk::Attribute{"name", sdk::ValueType::String, false, "", {}, sdk::Value("x")}}};

  auto c = load(std::string(kMinimal) + "\n[store]\nplugin = \"sqlite\"\n\n[transport]\nservers = [\"nats://h:1\"]\n");
  ASSERT_TRUE(c) << c.error().message;
  auto store = plugin_table(*c, "store", store_schema);
  ASSERT_TRUE(store) << store.error().message;
  EXPECT_EQ(store->get_string("path"), "/var/lib/nox-mesh-control/mesh.db") << "path defaults into state_dir";
  EXPECT_FALSE(store->find("plugin"));
  auto transport = plugin_table(*c, "transport", transport_schema);
  ASSERT_TRUE(transport) << transport.error().message;
  EXPECT_EQ(transport->get_string("name"), "x") << "defaults filled in";

  auto bad = load(std::string(kMinimal) + "\n[transport]\nservers = [\"nats://h:1\"]\nsevrers = 1\n");
  ASSERT_TRUE(bad);
  auto e = plugin_table(*bad, "transport", transport_schema);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("control.toml:9: transport.sevrers: unknown"), std::string::npos)
      << e.error().message;
}

TEST(ControlConfigTest, ABuildUserIsNeededOnARootControlPlaneWithPipelinesAndMustExist) {
  const std::string with_dir = std::string(kMinimal) + "\n[pipelines]\ndir = \"/srv/pipelines\"\n";
  auto c = load(with_dir);
  ASSERT_TRUE(c) << c.error().message;
  // Not root, or no pipelines: nothing to ask of the machine.
  EXPECT_TRUE(check_pipelines_on_this_machine(*c, false));
  auto none = load(kMinimal);
  ASSERT_TRUE(none);
  EXPECT_TRUE(check_pipelines_on_this_machine(*none, true));
  // Root with pipelines and no build_user: refused, naming the file, the line and the table.
  auto root = check_pipelines_on_this_machine(*c, true);
  ASSERT_FALSE(root);
  EXPECT_NE(root.error().message.find("control.toml:7: pipelines:"), std::string::npos) << root.error().message;
  EXPECT_NE(root.error().message.find("build_user"), std::string::npos) << root.error().message;
  // A user that does not exist, and one with uid 0 under another name, are refused naming the key.
  auto ghost = load(with_dir + "build_user = \"no-such-user-nox-mesh\"\n");
  ASSERT_TRUE(ghost);
  auto g = check_pipelines_on_this_machine(*ghost, false);
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message.find("control.toml:9: pipelines.build_user: 'no-such-user-nox-mesh': no such user"),
            std::string::npos)
      << g.error().message;
  auto nobody = load(with_dir + "build_user = \"nobody\"\n");
  ASSERT_TRUE(nobody);
  EXPECT_TRUE(check_pipelines_on_this_machine(*nobody, true));
}

}  // namespace
}  // namespace mesh::control
