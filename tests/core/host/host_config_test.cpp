// mesh-host's config as the loader sees it: a provider or transport named in the config that is
// not in the plugin folder is an error in the config file, naming the file, the line and the key.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "mesh/host/host_config.h"
#include "mesh/host/runtime.h"

namespace mesh::host {
namespace {

std::string config_text(const std::string& load, const std::string& transport = "nats") {
  return "[node]\nname = \"cfg-01\"\nstate_dir = \"/tmp/unused-state\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR
         "\"\nload = " + load + "\n\n[transport]\nplugin = \"" + transport + "\"\nservers = [\"nats://127.0.0.1:1\"]\n";
}

TEST(HostConfigTest, AProviderInPluginsLoadThatIsNotThereNamesTheKeyAndTheFile) {
  auto cfg = parse_host_config(config_text("[\"file\", \"nosuch\"]"), "/etc/nox/host.toml");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  auto p = load_providers(cfg->plugin_dirs, cfg->load, &*cfg, "");
  ASSERT_FALSE(p);
  const std::string msg = p.error().message;
  EXPECT_EQ(p.error().code, sdk::ErrorCode::InvalidArgument);
  EXPECT_EQ(p.error().path, "plugins.load");
  EXPECT_NE(msg.find("/etc/nox/host.toml:7: plugins.load"), std::string::npos) << msg;  // file:line: key
  EXPECT_NE(msg.find("'nosuch'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("mesh-provider-nosuch.so"), std::string::npos) << msg;
  EXPECT_NE(msg.find("file"), std::string::npos) << "lists the providers that are there: " << msg;
}

TEST(HostConfigTest, AProviderFromTheCommandLineIsNotBlamedOnTheConfig) {
  // `mesh-host apply --load nosuch --config host.toml`: the name came from --load.
  auto cfg = parse_host_config(config_text("[\"file\"]"), "/etc/nox/host.toml");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  auto p = load_providers(cfg->plugin_dirs, {"nosuch"}, &*cfg, "");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, sdk::ErrorCode::NotFound);
  EXPECT_EQ(p.error().message.find("plugins.load"), std::string::npos) << p.error().message;
}

TEST(HostConfigTest, ATransportThatIsNotThereNamesTransportPluginAndTheFile) {
  auto cfg = parse_host_config(config_text("[\"file\"]", "carrier-pigeon"), "/etc/nox/host.toml");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  auto t = load_transport(*cfg);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("/etc/nox/host.toml:10: transport.plugin"), std::string::npos) << t.error().message;
  EXPECT_NE(t.error().message.find("nats"), std::string::npos) << "lists the transports there: " << t.error().message;
}

// Decision 113: a host delivers on nats.c's shared pool unless its [transport] table says
// otherwise; a transport without the key is left alone.
TEST(HostConfigTest, HostTransportDefaultsAddSharedDeliveryOnlyWhenUnsetAndKnown) {
  const sdk::Schema with{"transport", "t", {{"servers", sdk::ValueType::StringList, true, "s"},
                                           {"shared_delivery", sdk::ValueType::Bool, false, "d"}}};
  const sdk::Schema without{"transport", "t", {{"servers", sdk::ValueType::StringList, true, "s"}}};
  sdk::Value unset = sdk::Value::object();
  host_transport_defaults(with, unset);
  ASSERT_NE(unset.find("shared_delivery"), nullptr);
  EXPECT_TRUE(unset.get_bool("shared_delivery", false));
  sdk::Value off = sdk::Value::object();
  off.set("shared_delivery", false);
  host_transport_defaults(with, off);
  EXPECT_FALSE(off.get_bool("shared_delivery", true));
  sdk::Value other = sdk::Value::object();
  host_transport_defaults(without, other);
  EXPECT_EQ(other.find("shared_delivery"), nullptr);
}

// Decision 161: a host's requests take their replies on inboxes of their own unless its
// [transport] table says otherwise.
TEST(HostConfigTest, HostTransportDefaultsAddPerRequestInboxOnlyWhenUnsetAndKnown) {
  const sdk::Schema with{"transport", "t", {{"servers", sdk::ValueType::StringList, true, "s"},
                                           {"per_request_inbox", sdk::ValueType::Bool, false, "d"}}};
  const sdk::Schema without{"transport", "t", {{"servers", sdk::ValueType::StringList, true, "s"}}};
  sdk::Value unset = sdk::Value::object();
  host_transport_defaults(with, unset);
  EXPECT_TRUE(unset.get_bool("per_request_inbox", false));
  EXPECT_EQ(unset.find("shared_delivery"), nullptr) << "only keys the schema has";
  sdk::Value off = sdk::Value::object();
  off.set("per_request_inbox", false);
  host_transport_defaults(with, off);
  EXPECT_FALSE(off.get_bool("per_request_inbox", true));
  sdk::Value other = sdk::Value::object();
  host_transport_defaults(without, other);
  EXPECT_EQ(other.find("per_request_inbox"), nullptr);
}

TEST(HostConfigTest, TheConfiguredProvidersLoad) {
  auto cfg = parse_host_config(config_text("[\"file\"]"), "/etc/nox/host.toml");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  auto p = load_providers(cfg->plugin_dirs, cfg->load, &*cfg, "");
  ASSERT_TRUE(p) << p.error().describe();
  EXPECT_EQ(p->registry.types().size(), 1u);
}

// [plugins] dir: a string or a list of directories, searched in order.
std::string config_with_dir(const std::string& dir) {
  return "[node]\nname = \"cfg-01\"\nstate_dir = \"/tmp/unused-state\"\n\n[plugins]\ndir = " + dir +
         "\nload = [\"file\"]\n\n[transport]\nservers = [\"nats://127.0.0.1:1\"]\n";
}

TEST(HostConfigTest, PluginsDirIsAStringOrAListOfDirectories) {
  auto one = parse_host_config(config_with_dir("\"/usr/lib/nox-mesh/plugins\""), "/etc/nox/host.toml");
  ASSERT_TRUE(one) << one.error().describe();
  EXPECT_EQ(one->plugin_dirs, std::vector<std::string>{"/usr/lib/nox-mesh/plugins"});
  auto two = parse_host_config(config_with_dir("[\"/usr/lib/nox-mesh/plugins\", \"/usr/local/lib/nox-mesh/plugins\"]"),
                               "/etc/nox/host.toml");
  ASSERT_TRUE(two) << two.error().describe();
  EXPECT_EQ(two->plugin_dirs,
            (std::vector<std::string>{"/usr/lib/nox-mesh/plugins", "/usr/local/lib/nox-mesh/plugins"}));
}

TEST(HostConfigTest, ABadPluginsDirNamesTheFileTheLineAndTheKey) {
  const std::pair<std::string, std::string> cases[] = {
      {"3", "must be a string or a list of strings"},
      {"[]", "must not be empty"},
      {"\"\"", "must not be empty"},
      {"[\"/a\", 3]", "entry 1 must be a string"},
      {"[\"/a\", \"\"]", "entry 1 must not be empty"},
      {"[\"/a\", \"/b\", \"/a\"]", "entry 2 ('/a') repeats entry 0"},
  };
  for (const auto& [value, why] : cases) {
    auto cfg = parse_host_config(config_with_dir(value), "/etc/nox/host.toml");
    ASSERT_FALSE(cfg) << value;
    EXPECT_EQ(cfg.error().code, sdk::ErrorCode::InvalidArgument);
    EXPECT_EQ(cfg.error().message, "/etc/nox/host.toml:6: plugins.dir: " + why) << value;
  }
}

TEST(HostConfigTest, ProvidersAndTheTransportLoadFromAnyDirectoryOfTheList) {
  // The first directory has none of them (a local directory not made yet): the second is used,
  // and a missing plugin's message names both directories.
  const std::string dirs = "[\"/nonexistent/nox-mesh/plugins\", \"" MESH_TEST_PLUGIN_DIR "\"]";
  auto cfg = parse_host_config(config_with_dir(dirs), "/etc/nox/host.toml");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  auto p = load_providers(cfg->plugin_dirs, cfg->load, &*cfg, "");
  ASSERT_TRUE(p) << p.error().describe();
  EXPECT_EQ(p->plugins.at(0).path, MESH_TEST_PLUGIN_DIR "/mesh-provider-file.so");
  auto bad = load_providers(cfg->plugin_dirs, {"nosuch"}, &*cfg, "");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("/nonexistent/nox-mesh/plugins, " MESH_TEST_PLUGIN_DIR), std::string::npos)
      << bad.error().message;
}

}  // namespace
}  // namespace mesh::host
