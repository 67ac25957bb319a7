// The whole path of a package through the mesh (label system: root, the real apt and dpkg): a
// .deb built with dpkg-deb is published by `mesh publish` into the control plane's repository,
// then a real mesh-host gets a declaration with `file` resources (the repository's public key from
// `mesh repository key`, and a sources list naming it in `signed-by`) and a `package` resource,
// and installs it with apt over HTTP from the repository mesh-control serves — then the next
// version, then the first again (every version stays installable). apt runs with a private
// configuration (no system sources; lists and archives in the test's folder); the dpkg database
// is the machine's own, so the package is named nox-mesh-test-* and purged at the end.
#include <gtest/gtest.h>

#include <unistd.h>

#include "publish_mesh_fixture.h"

namespace mesh::stages::publish::test {
namespace {

using sdk::Value;

constexpr const char* kPackage = "nox-mesh-test-meshrepo";

std::string installed_version(const std::string& name) {
  auto r = mesh::testing::run_process({"/usr/bin/dpkg-query", "-W", "-f", "${db:Status-Abbrev}|${Version}", name});
  if (r.exit_code != 0 || r.out.rfind("ii", 0) != 0) return "";
  return r.out.substr(r.out.find('|') + 1);
}

class PublishSystemTest : public PublishMeshTest {
 public:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (installs a package with apt and dpkg)";
    for (const char* tool : {"/usr/bin/apt-get", "/usr/bin/dpkg-deb", "/usr/bin/apt-ftparchive", "/usr/bin/gpg"})
      if (::access(tool, X_OK) != 0) GTEST_SKIP() << tool << " is not installed";
    PublishMeshTest::SetUp();
    // apt's download user (_apt) reads the key and writes lists/partial in the test's folder.
    fs::permissions(dir(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
    const fs::path apt = dir() / "apt";
    for (const char* sub : {"sources.list.d", "lists/partial", "archives/partial"}) fs::create_directories(apt / sub);
    spit(apt / "sources.list", "");
    spit(apt / "apt.conf",
         "Dir::Etc::sourcelist \"" + (apt / "sources.list").string() + "\";\n"
         "Dir::Etc::sourceparts \"" + (apt / "sources.list.d").string() + "\";\n"
         "Dir::State::lists \"" + (apt / "lists").string() + "\";\n"
         "Dir::Cache::archives \"" + (apt / "archives").string() + "\";\n"
         "Dir::Cache::pkgcache \"\";\nDir::Cache::srcpkgcache \"\";\nAcquire::Retries \"0\";\n");
    for (const auto& e : fs::recursive_directory_iterator(apt))
      if (e.is_directory()) fs::permissions(e.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                                          fs::perms::others_read | fs::perms::others_exec);
    fs::permissions(apt, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                             fs::perms::others_exec);
    fs::create_directories(dir() / "keys");
    fs::create_directories(dir() / "sources");
    for (const char* d : {"keys", "sources"})
      fs::permissions(dir() / d, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                     fs::perms::others_read | fs::perms::others_exec);
    cleanup_ = true;
  }
  void TearDown() override {
    PublishMeshTest::TearDown();
    if (cleanup_) mesh::testing::run_process({"/usr/bin/dpkg", "--purge", kPackage});
  }

  /// The declaration: key file, sources list (signed-by the key), the package at `version`.
  std::string declaration(const std::string& key, const std::string& version) {
    const std::string key_file = (dir() / "keys" / "mesh-repository.asc").string();
    const std::string list = (dir() / "sources" / "mesh.list").string();
    const std::string line =
        "deb [signed-by=" + key_file + "] http://127.0.0.1:" + std::to_string(port()) + "/ mesh main\n";
    Value resources = Value::array();
    auto file = [&](const std::string& path, const std::string& content) {
      Value r = Value::object();
      r.set("type", "file");
      r.set("id", path);
      Value p = Value::object();
      p.set("content", content);
      p.set("mode", "0644");
      r.set("properties", p);
      return r;
    };
    resources.as_array().push_back(file(key_file, key));
    Value l = file(list, line);
    l.set("requires", Value(Value::Array{Value("file:" + key_file)}));
    resources.as_array().push_back(l);
    Value pkg = Value::object();
    pkg.set("type", "package");
    pkg.set("id", kPackage);
    Value pp = Value::object();
    pp.set("version", version);
    pp.set("source", list);
    pkg.set("properties", pp);
    pkg.set("requires", Value(Value::Array{Value("file:" + list)}));
    resources.as_array().push_back(pkg);
    Value d = Value::object();
    d.set("resources", resources);
    return d.to_json();
  }

  bool cleanup_ = false;
};

TEST_F(PublishSystemTest, AHostInstallsPublishedVersionsWithAptOverHttp) {
  ASSERT_EQ(installed_version(kPackage), "") << kPackage << " is installed before the test";
  for (const char* v : {"1.0", "2.0"}) {
    auto r = mesh({"publish", build_deb(dir() / "debs", kPackage, v).string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  auto key = mesh({"repository", "key"});
  ASSERT_EQ(key.exit_code, 0) << key.err;

  itest::Host& h = hosts_[std::string("web-01")];
  h.name = "web-01";
  h.state = dir() / "host-web-01";
  h.config = dir() / "web-01.toml";
  itest::write_text(h.config, "[node]\nname = \"web-01\"\nstate_dir = \"" + h.state.string() +
                                  "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\nload = [\"file\", \"package\"]\n\n"
                                  "[transport]\nplugin = \"nats\"\nservers = [\"" + nats_->url() +
                                  "\"]\n\n[timers]\nheartbeat = \"1s\"\ndrift = \"1h\"\n");
  enrol(h, false);
  start_host(h, {"APT_CONFIG=" + (dir() / "apt" / "apt.conf").string()});

  for (const char* version : {"1.0", "2.0", "1.0"}) {
    SCOPED_TRACE(std::string("version ") + version);
    const Value declared = declare("web-01", declaration(key.out, version));
    const Value rep = report(declared.get_int("delivery", 0), "3m");
    ASSERT_EQ(count(rep, "applied"), 1u) << rep.to_json() << "\n" << h.proc->stderr_text().substr(0, 20000);
    EXPECT_EQ(installed_version(kPackage), version);
    EXPECT_EQ(slurp(fs::path("/usr/share") / kPackage / "version"), std::string(version) + "\n");
  }
}

}  // namespace
}  // namespace mesh::stages::publish::test
