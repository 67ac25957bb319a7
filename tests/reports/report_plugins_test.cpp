// The report plugins as `mesh` uses them: loaded from a plugin folder through the loader,
// `--output NAME` choosing among the installed ones (an unknown name is bad usage, refused before
// anything is sent), and the strings a plugin is given (printable unless it asks for them raw).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "mesh/cli/app.h"
#include "mesh/cli/report_output.h"
#include "mesh/common/json.h"
#include "mesh/loader/loader.h"
#include "mesh/testing/temp_dir.h"

namespace mesh::reports {
namespace {

namespace fs = std::filesystem;

/// A plugin folder holding only the three built-in report plugins (links to the build's).
struct ReportDir {
  testing::TempDir dir;
  ReportDir() {
    for (const char* name : {"text", "json", "junit"}) {
      const std::string file = loader::plugin_file_name("report", name);
      fs::create_symlink(fs::path(MESH_TEST_PLUGIN_DIR) / file, dir.path() / file);
    }
  }
  std::string path() const { return dir.path().string(); }
};

struct Run {
  int code;
  std::string out, err;
};

Run run(std::vector<std::string> args) {
  args.insert(args.begin(), "mesh");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  int code = cli::run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

TEST(ReportPluginsTest, EachBuiltInLoadsAsAReportPlugin) {
  for (const char* name : {"text", "json", "junit"}) {
    auto p = loader::load_plugin(std::string(MESH_TEST_PLUGIN_DIR), "report", name);
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_EQ(p->kind, "report");
    EXPECT_EQ(p->name, name);
    EXPECT_TRUE(p->as<sdk::ReportRenderer>()) << name;
  }
}

TEST(ReportPluginsTest, UnknownOutputListsTheInstalledOnes) {
  ReportDir d;
  auto r = cli::ReportOutput::load({d.path()}, "markdown");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, sdk::ErrorCode::InvalidArgument);
  EXPECT_NE(r.error().message.find("no report plugin 'markdown'"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("(installed: json, junit, text)"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(d.path()), std::string::npos) << r.error().message;
}

TEST(ReportPluginsTest, MeshRefusesAnUnknownOutputBeforeConnecting) {
  ReportDir d;
  // The broker address is unreachable: were anything sent, the exit code would be 3.
  auto r = run({"--server", "nats://127.0.0.1:1", "--plugin-dir", d.path(), "report", "--output", "yaml"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--output yaml: no report plugin 'yaml'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(installed: json, junit, text)"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  // A listing is text or json only, whatever report plugins are installed.
  auto n = run({"--server", "nats://127.0.0.1:1", "--plugin-dir", d.path(), "nodes", "--output", "junit"});
  EXPECT_EQ(n.code, 2);
  EXPECT_NE(n.err.find("--output junit is only for mesh report"), std::string::npos) << n.err;
  // A known report plugin loads, and the command goes on to its next check (the identity).
  auto ok = run({"--server", "nats://127.0.0.1:1", "--plugin-dir", d.path(), "--identity",
                 "/nonexistent/identity", "report", "--output", "junit"});
  EXPECT_EQ(ok.code, 2);
  EXPECT_EQ(ok.err.find("--output"), std::string::npos) << ok.err;
  EXPECT_NE(ok.err.find("/nonexistent/identity"), std::string::npos) << ok.err;
}

TEST(ReportPluginsTest, TextAndJunitGetPrintableStringsJsonTheReplyAsItCame) {
  ReportDir d;
  auto report = common::parse_json(R"({"delivery": 3, "declared": 1, "applied": [], "outstanding": [],
    "superseded": [], "failed": [{"node": "n", "revision": 1, "outcome": "failed", "resource": "file:/x",
    "reason": "bad\u001b[2J\nfailed       9 — everything", "code": null}]})");
  ASSERT_TRUE(report);
  auto text = cli::ReportOutput::load({d.path()}, "text");
  ASSERT_TRUE(text) << text.error().message;
  auto t = text->render(*report, 0);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->find('\x1b'), std::string::npos) << *t;
  EXPECT_NE(t->find("bad\\x1b[2J\\nfailed       9 — everything\n"), std::string::npos) << *t;
  EXPECT_EQ(std::count(t->begin(), t->end(), '\n'), 4) << "no forged line:\n" << *t;

  auto junit = cli::ReportOutput::load({d.path()}, "junit");
  ASSERT_TRUE(junit);
  auto x = junit->render(*report, 0);
  ASSERT_TRUE(x);
  EXPECT_EQ(x->find('\x1b'), std::string::npos) << *x;

  auto json = cli::ReportOutput::load({d.path()}, "json");
  ASSERT_TRUE(json);
  auto j = json->render(*report, 0);
  ASSERT_TRUE(j);
  EXPECT_EQ(*j, report->to_json() + "\n");
  auto back = common::parse_json(*j);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->find("failed")->as_array()[0].get_string("reason"), "bad\x1b[2J\nfailed       9 — everything");
}

TEST(ReportPluginsTest, PluginFolderFollowsTheFlagThenTheConfig) {
  ::unsetenv("NOX_MESH_PLUGIN_DIR");
  testing::TempDir t;
  const auto config = t.path() / "operator.toml";
  {
    std::ofstream f(config);
    f << "[plugins]\ndir = [\"/a\", \"/b\"]\n";
  }
  auto flag = cli::report_plugin_dirs("/x", config.string());
  ASSERT_TRUE(flag);
  EXPECT_EQ(*flag, loader::PluginDirs{"/x"});
  auto from_config = cli::report_plugin_dirs("", config.string());
  ASSERT_TRUE(from_config) << from_config.error().message;
  EXPECT_EQ(*from_config, (loader::PluginDirs{"/a", "/b"}));
  auto missing = cli::report_plugin_dirs("", (t.path() / "none.toml").string());
  EXPECT_FALSE(missing);
}

}  // namespace
}  // namespace mesh::reports
