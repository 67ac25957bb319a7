// `mesh` without a control plane: usage errors, local checks of the declaration file, and where
// plugins and servers are looked for.
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "mesh/common/json.h"
#include "mesh/cli/app.h"
#include "mesh/cli/locate.h"

namespace mesh::cli {
namespace {

namespace fs = std::filesystem;

struct Run {
  int code;
  std::string out;
  std::string err;
};

Run run(std::vector<std::string> args) {
  args.insert(args.begin(), "mesh");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  int code = run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

fs::path temp_file(const std::string& name, const std::string& text) {
  fs::path p = fs::temp_directory_path() / ("mesh-cli-test-" + std::to_string(::getpid()) + "-" + name);
  std::ofstream(p) << text;
  return p;
}

TEST(CliUsageTest, HelpAndVersionExitZero) {
  auto help = run({"--help"});
  EXPECT_EQ(help.code, 0);
  for (const char* cmd : {"token", "nodes", "node", "declare", "report", "history", "rollback", "operator", "--identity"})
    EXPECT_NE(help.out.find(cmd), std::string::npos) << cmd << "\n" << help.out;
  auto version = run({"--version"});
  EXPECT_EQ(version.code, 0);
  EXPECT_NE(version.out.find("mesh 0.1.0"), std::string::npos) << version.out;
  EXPECT_EQ(run({"report", "--help"}).code, 0);
}

TEST(CliUsageTest, BadUsageExitsTwo) {
  EXPECT_EQ(run({}).code, 2);
  EXPECT_EQ(run({"--bogus", "nodes"}).code, 2);
  EXPECT_EQ(run({"nodes", "--bogus"}).code, 2);
  EXPECT_EQ(run({"frobnicate"}).code, 2);
  EXPECT_EQ(run({"token"}).code, 2);
  EXPECT_EQ(run({"token", "issue"}).code, 2);
  EXPECT_EQ(run({"rollback", "web-01"}).code, 2);
  EXPECT_EQ(run({"rollback", "web-01", "--to", "x"}).code, 2);
  EXPECT_EQ(run({"--output", "yaml", "nodes"}).code, 2);
  auto junit = run({"--server", "nats://127.0.0.1:1", "nodes", "--output", "junit"});
  EXPECT_EQ(junit.code, 2);
  EXPECT_NE(junit.err.find("--output junit is only for mesh report"), std::string::npos);
  EXPECT_EQ(run({"--server", "nats://127.0.0.1:1", "report", "abc"}).code, 2);
  EXPECT_EQ(run({"--server", "nats://127.0.0.1:1", "report", "--wait", "forever"}).code, 2);
  EXPECT_EQ(run({"--server", "nats://127.0.0.1:1", "--timeout", "0s", "nodes"}).code, 2);
  EXPECT_EQ(run({"--server", "nats://127.0.0.1:1", "--log-level", "loud", "nodes"}).code, 2);
  EXPECT_EQ(run({"--server", "nats://127.0.0.1:1", "token", "issue", "web-01", "--ttl", "1y"}).code, 2);
}

TEST(CliUsageTest, NoServerAnywhereIsBadUsage) {
  ::unsetenv("NOX_MESH_SERVER");
  auto r = run({"nodes"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--server"), std::string::npos) << r.err;
}

TEST(CliUsageTest, NoIdentityIsBadUsageBeforeAnythingIsSent) {
  ::unsetenv("NOX_MESH_IDENTITY");
  auto r = run({"--server", "nats://127.0.0.1:1", "nodes"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no operator identity: use --identity FILE or the NOX_MESH_IDENTITY environment variable"),
            std::string::npos)
      << r.err;
  auto missing = run({"--server", "nats://127.0.0.1:1", "--identity", "/nonexistent/ci.identity", "nodes"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/ci.identity"), std::string::npos) << missing.err;
  auto forged = temp_file("forged.identity",
                          R"({"kind":"nox-mesh-operator","version":1,"name":"ci","role":"admin",)"
                          R"("public_key":"00","secret_key":"0000000000000000000000000000000000000000000000000000000000000000"})");
  auto bad = run({"--server", "nats://127.0.0.1:1", "--identity", forged.string(), "nodes"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("public_key: does not belong to the secret key"), std::string::npos) << bad.err;
  EXPECT_EQ(run({"--server", "nats://127.0.0.1:1", "operator", "add", "Bad Name", "--role", "reader"}).code, 2);
  EXPECT_EQ(run({"--server", "nats://127.0.0.1:1", "operator", "add", "ci", "--role", "root"}).code, 2);
  fs::remove(forged);
}

TEST(CliUsageTest, DeclareRefusesControlCharactersInIdsABomAndNamesTheLineOfASyntaxError) {
  const std::vector<std::string> base{"--server", "nats://127.0.0.1:1", "declare", "web-01"};
  auto with = [&](const fs::path& f) {
    auto args = base;
    args.push_back(f.string());
    return run(args);
  };
  auto nul = temp_file("nul.json", R"({"resources": [{"type": "file", "id": "/tmp/a\u0000b", "properties": {}}]})");
  auto r = with(nul);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(nul.string() + ": resources[0].id: '/tmp/a\\x00b' contains a control character (\\x00 at byte 6)"),
            std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("empty"), std::string::npos) << r.err;
  auto nl = temp_file("nl.json", R"({"resources": [{"type": "file", "id": "/tmp/new\nline", "properties": {}}]})");
  r = with(nl);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("'/tmp/new\\nline' contains a control character (\\n at byte 8)"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  auto bom = temp_file("bom.json", "\xef\xbb\xbf{\"resources\": []}");
  r = with(bom);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(bom.string() + ": document starts with a UTF-8 byte order mark (BOM)"), std::string::npos) << r.err;
  auto syntax = temp_file("syntax.json", "{\n  \"resources\": [\n    {\"type\": \"file\",, \"id\": \"/a\"}\n  ]\n}\n");
  r = with(syntax);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(syntax.string() + ": not valid JSON at line 3, column 21"), std::string::npos) << r.err;
  for (const auto& f : {nul, nl, bom, syntax}) fs::remove(f);
}

TEST(CliUsageTest, ADeclarationOverSixtyFourMiBIsRefusedNamingTheLimitAndTheKey) {
  // A sparse file: refused by its size before anything is read or sent.
  auto big = temp_file("big.json", "");
  fs::resize_file(big, (std::uintmax_t{64} << 20) + 1);
  auto r = run({"--server", "nats://127.0.0.1:1", "declare", "web-01", big.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(big.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("over the limit of 67108864 bytes"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("limits.max_assembled"), std::string::npos) << r.err;
  fs::remove(big);
}

TEST(CliUsageTest, DeclarationFileIsCheckedLocallyNamingFileAndPath) {
  // No broker is contacted for these: the file is refused first.
  const std::vector<std::string> base{"--server", "nats://127.0.0.1:1", "declare", "web-01"};
  auto with = [&](const fs::path& f) {
    auto args = base;
    args.push_back(f.string());
    return run(args);
  };
  auto broken = temp_file("broken.json", "{\"resources\": [");
  auto r = with(broken);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(broken.string() + ": "), std::string::npos) << r.err;

  auto typed = temp_file("typed.json", R"({"resources": [{"type": "file", "id": 7, "properties": {}}]})");
  r = with(typed);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(typed.string() + ": resources[0].id: must be a non-empty string"), std::string::npos) << r.err;

  auto rev = temp_file("rev.json", R"({"revision": 9, "resources": []})");
  r = with(rev);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("revision: is assigned by the control plane"), std::string::npos) << r.err;

  auto other = temp_file("other.json", R"({"node": "web-02", "resources": []})");
  r = with(other);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("node: names 'web-02'"), std::string::npos) << r.err;

  // Every problem at once (#12), in text and, with --output json, as diagnostics on stdout.
  auto many = temp_file("many.json", R"({"resources": [{"type": "file", "id": "", "properties": {}},
      {"type": "file", "id": "/a", "properties": [], "requires": ["file:/zz"]},
      {"type": "service", "id": "s.service", "properties": {"restart_on": ["file:/none"]}}]})");
  r = with(many);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(many.string() + ": 3 problems:\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\n  resources[0].id: must be a non-empty string\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\n  resources[1].properties (file:/a): must be an object\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\n  resources[2].properties.restart_on[0] (service:s.service): restarts on 'file:/none', which is not declared\n"),
            std::string::npos) << r.err;
  auto json_args = std::vector<std::string>{"--output", "json"};
  json_args.insert(json_args.end(), base.begin(), base.end());
  json_args.push_back(many.string());
  r = run(json_args);
  EXPECT_EQ(r.code, 2);
  auto answer = common::parse_json(r.out);
  ASSERT_TRUE(answer) << r.out;
  ASSERT_TRUE(answer->find("diagnostics"));
  ASSERT_EQ(answer->find("diagnostics")->as_array().size(), 3u) << r.out;
  EXPECT_EQ(answer->find("diagnostics")->as_array()[1].get_string("resource"), "file:/a");
  EXPECT_EQ(answer->find("diagnostics")->as_array()[1].get_string("path"), "resources[1].properties");
  EXPECT_EQ(answer->find("diagnostics")->as_array()[1].get_string("code"), "invalid_argument");

  r = with("/nonexistent/decl.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/nonexistent/decl.json"), std::string::npos) << r.err;

  // Over what the control plane reassembles (64 MiB; larger than the broker's limit goes in parts).
  auto big = temp_file("big.json", std::string((std::size_t{64} << 20) + 1, ' '));
  r = with(big);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("over the limit of 67108864 bytes"), std::string::npos) << r.err;

  r = run({"--server", "nats://127.0.0.1:1", "declare", "Bad Name", typed.string()});
  EXPECT_EQ(r.code, 2);
  for (const auto& f : {broken, typed, rev, other, big}) fs::remove(f);
}

TEST(CliUsageTest, ConfigFileErrorsNameFileAndLine) {
  auto cfg = temp_file("bad.toml", "[transport]\nplugin = 4\n");
  auto r = run({"--config", cfg.string(), "nodes"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(cfg.string() + ":2: transport.plugin: must be a string"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("transport.plugin"), r.err.rfind("transport.plugin")) << "the path once: " << r.err;
  auto syntax = temp_file("syntax.toml", "[transport\n");
  r = run({"--config", syntax.string(), "nodes"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(syntax.string() + ":1"), std::string::npos) << r.err;
  r = run({"--config", "/nonexistent/x.toml", "nodes"});
  EXPECT_EQ(r.code, 2);
  fs::remove(cfg);
  fs::remove(syntax);
}

TEST(LocateTest, PluginDirOrder) {
  auto none = [](const std::string&) { return false; };
  EXPECT_EQ(resolve_plugin_dir("/flag", "/env", "/cfg", "/usr/bin/mesh", none), "/flag");
  EXPECT_EQ(resolve_plugin_dir("", "/env", "/cfg", "/usr/bin/mesh", none), "/env");
  EXPECT_EQ(resolve_plugin_dir("", "", "/cfg", "/usr/bin/mesh", none), "/cfg");
  EXPECT_EQ(resolve_plugin_dir("", "", "", "/usr/bin/mesh", none), "/usr/lib/nox-mesh/plugins");
  auto dirs = default_plugin_dirs("/opt/nox/bin/mesh");
  ASSERT_FALSE(dirs.empty());
  EXPECT_EQ(dirs.front(), "/opt/nox/lib/nox-mesh/plugins");
  EXPECT_EQ(dirs.back(), "/opt/nox/plugins") << "the build tree layout";
  EXPECT_EQ(std::set<std::string>(dirs.begin(), dirs.end()).size(), dirs.size());
  // The GNU multiarch libdir is found when it is the one that exists.
  std::string multiarch;
  for (const auto& d : dirs)
    if (d.find("-linux-gnu") != std::string::npos) multiarch = d;
  if (!multiarch.empty()) {
    EXPECT_EQ(resolve_plugin_dir("", "", "", "/opt/nox/bin/mesh",
                                 [&](const std::string& d) { return d == multiarch; }),
              multiarch);
  }
  EXPECT_FALSE(self_exe().empty());
}

TEST(LocateTest, ServerListsSplitOnCommas) {
  EXPECT_EQ(split_servers({"nats://a:1, nats://b:2", "nats://c:3", " ", ""}),
            (std::vector<std::string>{"nats://a:1", "nats://b:2", "nats://c:3"}));
  EXPECT_TRUE(split_servers({}).empty());
}

}  // namespace
}  // namespace mesh::cli

namespace mesh::cli {
namespace {

// The fleet commands check what they can before connecting: no server or identity is given here,
// so reaching the network would be another error.
TEST(CliFleetUsageTest, BadInputIsRefusedLocallyWithExit2) {
  const auto bad_module = temp_file("module.json", R"({"module": "Web!", "version": "1", "resources": []})");
  auto push = run({"module", "push", bad_module.string()});
  EXPECT_EQ(push.code, 2);
  EXPECT_NE(push.err.find(bad_module.string()), std::string::npos) << push.err;
  EXPECT_NE(push.err.find("module"), std::string::npos) << push.err;
  fs::remove(bad_module);
  auto missing = run({"module", "push", "/nonexistent/module.json"});
  EXPECT_EQ(missing.code, 2) << missing.err;

  auto selector = run({"assign", "web", "role"});
  EXPECT_EQ(selector.code, 2);
  EXPECT_NE(selector.err.find("selector"), std::string::npos) << selector.err;
  EXPECT_EQ(run({"assign", "Web!", "role=web"}).code, 2);

  auto label = run({"node", "label", "web-01", "novalue"});
  EXPECT_EQ(label.code, 2);
  EXPECT_NE(label.err.find("KEY=VALUE"), std::string::npos) << label.err;
  EXPECT_EQ(run({"node", "label", "web-01"}).code, 2) << "nothing to set or remove";
  // A label's value is never empty (docs/modules.md): refused saying how to remove one instead.
  auto empty = run({"node", "label", "web-01", "env="});
  EXPECT_EQ(empty.code, 2);
  EXPECT_NE(empty.err.find("never empty"), std::string::npos) << empty.err;
  EXPECT_NE(empty.err.find("--remove env"), std::string::npos) << empty.err;

  EXPECT_EQ(run({"deploy"}).code, 2) << "MODULE VERSION or --show";
  EXPECT_EQ(run({"deploy", "web", "1", "--wait", "soon"}).code, 2);
  EXPECT_EQ(run({"deploy", "web", "1", "--min-applied", "1"}).code, 2) << "--min-applied needs --waves";
  EXPECT_EQ(run({"--output", "junit", "module", "list"}).code, 2);
}

}  // namespace
}  // namespace mesh::cli
