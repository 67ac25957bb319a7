// `mesh-host` run as a process: its command line and the order of its start-up checks.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "mesh/sdk/abi.h"
#include "mesh/testing/process.h"
#include "mesh/testing/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using mesh::testing::run_process;
using mesh::testing::TempDir;

const std::string kHost = std::string(MESH_TEST_BIN_DIR) + "/mesh-host";

/// A host config in `dir` for a node that was never enrolled (its state dir is empty), plus `extra`.
fs::path write_config(const TempDir& dir, const std::string& load, const std::string& extra) {
  const fs::path p = dir.path() / "host.toml";
  std::ofstream(p) << "[node]\nname = \"cli-01\"\nstate_dir = \"" << (dir.path() / "state").string()
                   << "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\nload = " << load
                   << "\n\n[transport]\nplugin = \"nats\"\nservers = [\"nats://127.0.0.1:1\"]\n" << extra;
  return p;
}

TEST(HostCliTest, AnUnknownFlagIsNamedRatherThanAMissingRequiredOption) {
  auto r = run_process({kHost, "run", "--unknown-flag"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--unknown-flag"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--config is required"), std::string::npos) << r.err;
  // A misspelt required option: the misspelling is what gets named.
  auto typo = run_process({kHost, "run", "--confg", "/etc/host.toml"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("--confg"), std::string::npos) << typo.err;
  auto enrol = run_process({kHost, "enrol", "--config", "/etc/host.toml", "--tokn", "x"});
  EXPECT_EQ(enrol.exit_code, 2);
  EXPECT_NE(enrol.err.find("--tokn"), std::string::npos) << enrol.err;
  // Nothing unknown: the missing option is still named.
  auto missing = run_process({kHost, "run"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--config is required"), std::string::npos) << missing.err;
  auto also = run_process({kHost, "run", "--config", "/etc/host.toml", "--unknown-flag"});
  EXPECT_EQ(also.exit_code, 2);
  EXPECT_NE(also.err.find("--unknown-flag"), std::string::npos) << also.err;
}

TEST(HostCliTest, AProviderTableErrorIsReportedBeforeTheEnrolmentCheck) {
  TempDir dir;
  const auto cfg = write_config(dir, "[\"file\"]", "\n[provider.file]\nallowed_rots = [\"/srv\"]\n");
  auto r = run_process({kHost, "run", "--config", cfg.string()}, {}, 20000);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(cfg.string() + ":"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("allowed_rots"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not enrolled"), std::string::npos) << "the config error comes first: " << r.err;
}

TEST(HostCliTest, ATransportTableErrorIsReportedBeforeTheEnrolmentCheck) {
  TempDir dir;
  const auto cfg = write_config(dir, "[\"file\"]", "nkey_sed = \"/x\"\n");  // inside [transport]
  auto r = run_process({kHost, "run", "--config", cfg.string()}, {}, 20000);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nkey_sed"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not enrolled"), std::string::npos) << "the config error comes first: " << r.err;
}

TEST(HostCliTest, AMissingProviderInPluginsLoadNamesTheKeyAndTheConfigFile) {
  TempDir dir;
  const auto cfg = write_config(dir, "[\"file\", \"fiel\"]", "");
  // `run` stops with exit 2 (before its enrolment check: the node is not enrolled); `self-test`
  // prints a failed line on stdout and exits 1.
  for (auto [sub, code] : {std::pair<const char*, int>{"run", 2}, {"self-test", 1}}) {
    auto r = run_process({kHost, sub, "--config", cfg.string()}, {}, 20000);
    const std::string text = r.out + r.err;
    EXPECT_EQ(r.exit_code, code) << sub << ": " << text;
    EXPECT_NE(text.find(cfg.string() + ":7: plugins.load"), std::string::npos) << sub << ": " << text;
    EXPECT_NE(text.find("'fiel'"), std::string::npos) << sub << ": " << text;
    if (code == 2) {
      EXPECT_EQ(text.find("not enrolled"), std::string::npos) << text;
    }
    EXPECT_EQ(text.find("plugins.load: " + cfg.string()), std::string::npos) << "said once: " << text;
  }
}

// Decision 76: the version is the owning package's, else the build's (this build is not
// installed from a package); the self-test a running host runs on a new program names it first.
TEST(HostCliTest, VersionIsTheBuildsWhenNoPackageOwnsTheProgram) {
  auto r = run_process({kHost, "--version"}, {}, 20000);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("mesh-host 0.1.0 (protocol ", 0), 0u) << r.out;
  const std::string abi = std::to_string(MESH_SDK_ABI_MAJOR) + "." + std::to_string(MESH_SDK_ABI_MINOR);
  EXPECT_NE(r.out.find(", SDK ABI " + abi + ", not installed from a package)"), std::string::npos) << r.out;
  TempDir dir;
  const auto cfg = write_config(dir, "[\"file\"]", "");
  auto t = run_process({kHost, "self-test", "--config", cfg.string()}, {}, 20000);
  EXPECT_EQ(t.exit_code, 0) << t.out << t.err;
  EXPECT_EQ(t.out.rfind("info  mesh-host 0.1.0 (not installed from a package)\n", 0), 0u) << t.out;
  EXPECT_NE(t.out.find("self-test passed"), std::string::npos) << t.out;
}

TEST(HostCliTest, AGoodConfigOfANodeNeverEnrolledSaysSo) {
  TempDir dir;
  const auto cfg = write_config(dir, "[\"file\"]", "");
  auto r = run_process({kHost, "run", "--config", cfg.string()}, {}, 20000);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not enrolled"), std::string::npos) << r.err;
}

}  // namespace

namespace {

TEST(HostCliTest, PluginsDescribePrintsAProvidersSchemaAsTextJsonAndMarkdown) {
  auto text = run_process({kHost, "plugins", "describe", "file", "--plugin-dir", MESH_TEST_PLUGIN_DIR}, {}, 20000);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("file (id format: absolute_path)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("  ensure  string, optional, default present, one of: present, absent"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("at most one of: content, content_base64"), std::string::npos) << text.out;

  auto json = run_process({kHost, "plugins", "describe", "file", "--output", "json", "--plugin-dir",
                           MESH_TEST_PLUGIN_DIR}, {}, 20000);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(json.out.rfind("{\"name\":\"file\",", 0), 0u) << json.out;
  EXPECT_NE(json.out.find("\"id_format\":\"absolute_path\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("{\"name\":\"mode\",\"type\":\"string\",\"required\":false,"), std::string::npos) << json.out;

  auto md = run_process({kHost, "plugins", "describe", "file", "--output", "markdown", "--plugin-dir",
                         MESH_TEST_PLUGIN_DIR}, {}, 20000);
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("| Property | Type | Required | Default | Description |"), std::string::npos) << md.out;

  auto unknown = run_process({kHost, "plugins", "describe", "fiel", "--plugin-dir", MESH_TEST_PLUGIN_DIR}, {}, 20000);
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("fiel"), std::string::npos) << unknown.err;
}

}  // namespace
