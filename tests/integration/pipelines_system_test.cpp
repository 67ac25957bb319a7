// A package's whole way through a pipeline (label system: root, the real apt and dpkg): a pipeline
// run by the real mesh-control builds a .deb with dpkg-deb as `nobody` (build stage) and puts it
// into the mesh's apt repository (publish stage); a real mesh-host then installs that version with
// apt over HTTP from the repository mesh-control serves — then the next run's version. apt runs
// with a private configuration (no system sources; lists and archives in the test's folder); the
// dpkg database is the machine's own, so the package is named nox-mesh-test-* and purged at the end.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mesh_fixture.h"
#include "mesh/testing/process.h"

namespace mesh::itest {
namespace {

constexpr const char* kPackage = "nox-mesh-test-pipeline";

std::string installed_version(const std::string& name) {
  auto r = mesh::testing::run_process({"/usr/bin/dpkg-query", "-W", "-f", "${db:Status-Abbrev}|${Version}", name});
  if (r.exit_code != 0 || r.out.rfind("ii", 0) != 0) return "";
  return r.out.substr(r.out.find('|') + 1);
}

void open_dir(const fs::path& p) { fs::permissions(p, fs::perms(0755)); }

class PipelineSystemTest : public MeshTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (builds as nobody, installs a package with apt and dpkg)";
    for (const char* tool : {"/usr/bin/apt-get", "/usr/bin/dpkg-deb", "/usr/bin/apt-ftparchive", "/usr/bin/gpg"})
      if (::access(tool, X_OK) != 0) GTEST_SKIP() << tool << " is not installed";
    nats_ = std::make_unique<NatsServer>();
    port_ = mesh::testing::free_tcp_port();
    open_dir(dir());
    for (const char* d : {"builds", "pipelines", "keys", "sources", "src"}) {
      fs::create_directories(dir() / d);
      open_dir(dir() / d);
    }
    // The build: a script run by /bin/sh (the program named; no shell around a string) making the
    // package at the run's version.
    write_text(dir() / "src" / "build.sh",
               "set -e\nmkdir -p pkg/DEBIAN pkg/usr/share/" + std::string(kPackage) +
                   "\nprintf 'Package: " + kPackage +
                   "\\nVersion: %s\\nArchitecture: all\\nMaintainer: t <t@example.org>\\nDescription: pipeline "
                   "test\\n' \"$1\" > pkg/DEBIAN/control\necho \"$1\" > pkg/usr/share/" + kPackage +
                   "/version\ndpkg-deb --root-owner-group --build pkg " + kPackage + "_$1_all.deb\n");
    fs::permissions(dir() / "src" / "build.sh", fs::perms(0644));
    write_text(dir() / "pipelines" / "release.toml",
               "[[stage]]\nplugin = \"build\"\ncommand = [\"/bin/sh\", \"" + (dir() / "src" / "build.sh").string() +
                   "\", \"{{version}}\"]\nartifacts = [\"*.deb\"]\n\n[[stage]]\nplugin = \"publish\"\n");
    fs::permissions(dir() / "pipelines" / "release.toml", fs::perms(0644));  // writable by no one else
    const fs::path cfg = dir() / "control.toml";
    write_text(cfg, "[control]\nstate_dir = \"" + (dir() / "control").string() +
                        "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\n\n[store]\nplugin = \"sqlite\"\n\n"
                        "[transport]\nplugin = \"nats\"\nservers = [\"" + nats_->url() +
                        "\"]\n\n[stages]\nload = [\"build\", \"publish\"]\n\n[stages.build]\nwork_root = \"" +
                        (dir() / "builds").string() + "\"\n\n[stages.publish]\narchitectures = [\"amd64\"]\n\n"
                        "[repository]\ndir = \"" + (dir() / "repo").string() + "\"\nlisten = \"127.0.0.1:" +
                        std::to_string(port_) + "\"\n\n[pipelines]\ndir = \"" + (dir() / "pipelines").string() +
                        "\"\nbuild_user = \"nobody\"\n");
    control_ = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{bin("mesh-control"), "run", "--config", cfg.string(), "--log-level", "debug"});
    ASSERT_TRUE(mesh::testing::eventually([&] { return mesh({"nodes"}).exit_code == 0; }, 30000))
        << control_->stderr_text();
    // apt's private configuration, readable by its download user.
    const fs::path apt = dir() / "apt";
    for (const char* sub : {"sources.list.d", "lists/partial", "archives/partial"}) fs::create_directories(apt / sub);
    write_text(apt / "sources.list", "");
    write_text(apt / "apt.conf",
               "Dir::Etc::sourcelist \"" + (apt / "sources.list").string() + "\";\n"
               "Dir::Etc::sourceparts \"" + (apt / "sources.list.d").string() + "\";\n"
               "Dir::State::lists \"" + (apt / "lists").string() + "\";\n"
               "Dir::Cache::archives \"" + (apt / "archives").string() + "\";\n"
               "Dir::Cache::pkgcache \"\";\nDir::Cache::srcpkgcache \"\";\nAcquire::Retries \"0\";\n");
    open_dir(apt);
    for (const auto& e : fs::recursive_directory_iterator(apt))
      if (e.is_directory()) open_dir(e.path());
    cleanup_ = true;
  }
  void TearDown() override {
    MeshTest::TearDown();
    if (cleanup_) mesh::testing::run_process({"/usr/bin/dpkg", "--purge", kPackage});
  }

  std::string declaration(const std::string& key, const std::string& version) {
    const std::string key_file = (dir() / "keys" / "mesh-repository.asc").string();
    const std::string list = (dir() / "sources" / "mesh.list").string();
    const std::string line = "deb [signed-by=" + key_file + "] http://127.0.0.1:" + std::to_string(port_) + "/ mesh main\n";
    auto file = [&](const std::string& path, const std::string& content) {
      sdk::Value r = sdk::Value::object();
      r.set("type", "file");
      r.set("id", path);
      sdk::Value p = sdk::Value::object();
      p.set("content", content);
      p.set("mode", "0644");
      r.set("properties", p);
      return r;
    };
    sdk::Value resources = sdk::Value::array();
    resources.as_array().push_back(file(key_file, key));
    sdk::Value l = file(list, line);
    l.set("requires", sdk::Value(sdk::Value::Array{sdk::Value("file:" + key_file)}));
    resources.as_array().push_back(l);
    sdk::Value pkg = sdk::Value::object();
    pkg.set("type", "package");
    pkg.set("id", kPackage);
    sdk::Value pp = sdk::Value::object();
    pp.set("version", version);
    pp.set("source", list);
    pkg.set("properties", pp);
    pkg.set("requires", sdk::Value(sdk::Value::Array{sdk::Value("file:" + list)}));
    resources.as_array().push_back(pkg);
    sdk::Value d = sdk::Value::object();
    d.set("resources", resources);
    return d.to_json();
  }

  int port_ = 0;
  bool cleanup_ = false;
};

TEST_F(PipelineSystemTest, AHostInstallsWhatAPipelineBuiltAndPublished) {
  ASSERT_EQ(installed_version(kPackage), "") << kPackage << " is installed before the test";
  Host& h = hosts_[std::string("web-01")];
  h.name = "web-01";
  h.state = dir() / "host-web-01";
  h.config = dir() / "web-01.toml";
  write_text(h.config, "[node]\nname = \"web-01\"\nstate_dir = \"" + h.state.string() +
                           "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\nload = [\"file\", \"package\"]\n\n"
                           "[transport]\nplugin = \"nats\"\nservers = [\"" + nats_->url() +
                           "\"]\n\n[timers]\nheartbeat = \"1s\"\ndrift = \"1h\"\n");
  enrol(h, false);
  start_host(h, {"APT_CONFIG=" + (dir() / "apt" / "apt.conf").string()});

  for (const char* version : {"1.0", "1.1"}) {
    SCOPED_TRACE(std::string("version ") + version);
    auto run = mesh({"pipeline", "run", "release", "--version", version, "--wait", "5m", "--output", "json"}, 400000);
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err << control_->stderr_text().substr(0, 20000);
    const sdk::Value record = json(run.out);
    const auto& stages = record.find("stages")->as_array();
    ASSERT_EQ(stages.size(), 2u);
    const std::string built = stages[0].find("artifacts")->find("files")->as_array()[0].get_string("sha256");
    EXPECT_EQ(stages[1].find("artifacts")->find("packages")->as_array()[0].get_string("sha256"), built);
    auto key = mesh({"repository", "key"});
    ASSERT_EQ(key.exit_code, 0) << key.err;
    const sdk::Value declared = declare("web-01", declaration(key.out, version));
    const sdk::Value rep = report(declared.get_int("delivery", 0), "3m");
    ASSERT_EQ(count(rep, "applied"), 1u) << rep.to_json() << "\n" << h.proc->stderr_text().substr(0, 20000);
    EXPECT_EQ(installed_version(kPackage), version);
    EXPECT_EQ(read_text(fs::path("/usr/share") / kPackage / "version"), std::string(version) + "\n");
  }
}

}  // namespace
}  // namespace mesh::itest
