// The host's path policy (path_policy.h): which paths are denied by default, what [paths] adds,
// and that the loaded file provider refuses them before anything is written.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "mesh/host/host_config.h"
#include "mesh/host/path_policy.h"
#include "mesh/host/runtime.h"
#include "mesh/sdk/logger.h"
#include "mesh/testing/temp_dir.h"

namespace mesh::host {
namespace {

std::string config_text(const std::string& extra) {
  return "[node]\nname = \"cfg-01\"\nstate_dir = \"/var/lib/nox-mesh\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR
         "\"\nload = [\"file\"]\n\n[transport]\nplugin = \"nats\"\nservers = [\"nats://127.0.0.1:1\"]\n" + extra;
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

TEST(PathPolicyTest, DefaultsAreTheStateDirTheConfigAndTheControlPlanesStateDir) {
  auto cfg = parse_host_config(config_text(""), "/etc/nox-mesh/host.toml");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  auto d = denied_paths(&*cfg, cfg->state_dir);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(*d, (std::vector<std::string>{"/var/lib/nox-mesh", "/etc/nox-mesh/host.toml", "/var/lib/nox-mesh-control"}));
  // `mesh-host apply` without a config: its state directory and the control plane's.
  auto bare = denied_paths(nullptr, "/srv/state/");
  ASSERT_TRUE(bare);
  EXPECT_EQ(*bare, (std::vector<std::string>{"/srv/state", "/var/lib/nox-mesh-control"}));
}

TEST(PathPolicyTest, AConfigGivenByARelativePathIsDeniedByItsAbsolutePath) {
  // Found by an attacker: `mesh-host run --config host.toml` left host.toml declarable.
  auto cfg = parse_host_config(config_text(""), "host.toml");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  auto d = denied_paths(&*cfg, "state");
  ASSERT_TRUE(d) << d.error().describe();
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_TRUE(has(*d, cwd + "/host.toml")) << cwd;
  EXPECT_TRUE(has(*d, cwd + "/state")) << cwd;
}

TEST(PathPolicyTest, DenyAndControlConfigAddTheirPaths) {
  mesh::testing::TempDir tmp;
  const auto control = tmp.path() / "control.toml";
  std::ofstream(control) << "[control]\nstate_dir = \"/srv/mesh-control\"\n\n[store]\nplugin = \"sqlite\"\npath = "
                            "\"/srv/db/mesh.db\"\n\n[broker]\nauthorization_file = \"/etc/nats/mesh-auth.conf\"\n";
  auto cfg = parse_host_config(config_text("\n[paths]\ndeny = [\"/etc/ssh\"]\ncontrol_config = \"" + control.string() + "\"\n"),
                               "/etc/nox-mesh/host.toml");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  auto d = denied_paths(&*cfg, cfg->state_dir);
  ASSERT_TRUE(d) << d.error().describe();
  for (const char* p : {"/etc/ssh", "/srv/mesh-control", "/srv/db/mesh.db", "/etc/nats/mesh-auth.conf"})
    EXPECT_TRUE(has(*d, p)) << p;
  EXPECT_TRUE(has(*d, control.string()));
}

TEST(PathPolicyTest, ControlConfigDeniesKeysDirPidFilesAndWhatRunsOrServesFromDisk) {
  // newuser finding 4: with keys_dir outside state_dir (the README's "Several control planes"),
  // a deployer overwrote operators.json, control.key and a nats pid_file on a machine that runs
  // both a host and the control plane.
  mesh::testing::TempDir tmp;
  const auto control = tmp.path() / "control.toml";
  std::ofstream(control) << R"([control]
state_dir = "/srv/cp1"
keys_dir = "/srv/nox-mesh/keys"

[plugins]
dir = ["/usr/lib/nox-mesh/plugins", "/opt/mesh/plugins/"]

[store]
plugin = "jetstream-kv"
local_path = "/srv/cache/js.db"
import_sqlite = "/srv/backups/mesh.db"
nkey_seed = "/srv/store.nk"

[transport]
plugin = "nats"
password_file = "/etc/nox-mesh/control.pw"
tls_ca = "/etc/nox-mesh/ca.pem"

[broker]
authorization_file = "/etc/nats/mesh-auth.conf"
pid_file = ["/run/nats/n0.pid", "/run/nats/n1.pid"]
enrol_password_file = "/etc/nox-mesh/enrol.pw"
operator_password_file = "/etc/nox-mesh/operator.pw"

[stages]
load = ["publish"]

[stages.publish]
repository = "/srv/apt-publish"

[repository]
dir = "/srv/nox-mesh/apt"

[content]
dir = "/srv/nox-mesh/content"

[pipelines]
dir = "/etc/nox-mesh/pipelines"
)";
  auto cfg = parse_host_config(config_text("\n[paths]\ncontrol_config = \"" + control.string() + "\"\n"),
                               "/etc/nox-mesh/host.toml");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  auto d = denied_paths(&*cfg, cfg->state_dir);
  ASSERT_TRUE(d) << d.error().describe();
  for (const char* p :
       {"/srv/cp1", "/srv/nox-mesh/keys", "/usr/lib/nox-mesh/plugins", "/opt/mesh/plugins", "/srv/cache/js.db",
        "/srv/cache/js.db-wal", "/srv/cache/js.db-shm", "/srv/cache/js.db-journal", "/srv/cache/js.db.lock",
        "/srv/backups/mesh.db", "/srv/store.nk", "/etc/nox-mesh/control.pw", "/etc/nox-mesh/ca.pem",
        "/etc/nats/mesh-auth.conf", "/etc/nats/authorization.lock", "/run/nats/n0.pid", "/run/nats/n1.pid",
        "/etc/nox-mesh/enrol.pw", "/etc/nox-mesh/operator.pw", "/srv/apt-publish", "/srv/nox-mesh/apt",
        "/srv/nox-mesh/content", "/etc/nox-mesh/pipelines"})
    EXPECT_TRUE(has(*d, p)) << p;
  // What the finding overwrote is refused by path, and a sibling directory is not.
  for (const char* p : {"/srv/nox-mesh/keys/operators.json", "/srv/nox-mesh/keys/control.key",
                        "/srv/nox-mesh/keys/signing.json", "/run/nats/n0.pid", "/usr/lib/nox-mesh/plugins/x.so"})
    EXPECT_NE(denied_by(p, *d), nullptr) << p;
  for (const char* p : {"/srv/nox-mesh/keys2/x", "/run/nats/n2.pid", "/srv/cache/js.db2", "/srv/nox-mesh/www"})
    EXPECT_EQ(denied_by(p, *d), nullptr) << p;
}

TEST(PathPolicyTest, ASqliteStoreFileIsDeniedWithItsWalAndShm) {
  mesh::testing::TempDir tmp;
  const auto control = tmp.path() / "control.toml";
  std::ofstream(control) << "[control]\nstate_dir = \"/srv/cp\"\n\n[store]\nplugin = \"sqlite\"\npath = \"/srv/db/mesh.db\"\n";
  auto cfg = parse_host_config(config_text("\n[paths]\ncontrol_config = \"" + control.string() + "\"\n"),
                               "/etc/nox-mesh/host.toml");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  auto d = denied_paths(&*cfg, cfg->state_dir);
  ASSERT_TRUE(d) << d.error().describe();
  for (const char* p : {"/srv/db/mesh.db", "/srv/db/mesh.db-wal", "/srv/db/mesh.db-shm", "/srv/db/mesh.db.lock"})
    EXPECT_NE(denied_by(p, *d), nullptr) << p;
  EXPECT_EQ(denied_by("/srv/db/other.db", *d), nullptr);
}

TEST(PathPolicyTest, BadPathsEntriesAreConfigErrors) {
  auto rel = parse_host_config(config_text("\n[paths]\ndeny = [\"etc\"]\n"), "/etc/nox-mesh/host.toml");
  ASSERT_FALSE(rel);
  EXPECT_NE(rel.error().message.find("paths.deny"), std::string::npos) << rel.error().message;
  auto unknown = parse_host_config(config_text("\n[paths]\nallow = [\"/etc\"]\n"), "/etc/nox-mesh/host.toml");
  ASSERT_FALSE(unknown);
  auto missing = parse_host_config(config_text("\n[paths]\ncontrol_config = \"/nonexistent/control.toml\"\n"),
                                   "/etc/nox-mesh/host.toml");
  ASSERT_TRUE(missing);
  auto d = denied_paths(&*missing, missing->state_dir);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("paths.control_config"), std::string::npos) << d.error().message;
}

TEST(PathPolicyTest, TheLoadedFileProviderRefusesTheStateDirAtValidate) {
  auto cfg = parse_host_config(config_text(""), "/etc/nox-mesh/host.toml");
  ASSERT_TRUE(cfg);
  auto p = load_providers(cfg->plugin_dirs, cfg->load, &*cfg, cfg->state_dir);
  ASSERT_TRUE(p) << p.error().describe();
  sdk::Provider* file = p->registry.find("file");
  ASSERT_NE(file, nullptr);
  for (const char* path : {"/var/lib/nox-mesh/node.key", "/var/lib/nox-mesh-control/operators.json",
                           "/etc/nox-mesh/host.toml"}) {
    sdk::Resource r;
    r.rid = sdk::ResourceId{"file", path};
    r.properties.set("content", "x");
    auto v = file->validate(r);
    ASSERT_FALSE(v) << path;
    EXPECT_EQ(v.error().code, sdk::ErrorCode::PermissionDenied) << path;
    EXPECT_NE(v.error().message.find("path policy"), std::string::npos) << v.error().message;
  }
}

// A provider that takes no policy of its own and counts the calls that reach it.
class CountingProvider final : public sdk::Provider {
 public:
  explicit CountingProvider(const sdk::HostContext& h) : sdk::Provider(h) {}
  const sdk::Schema& schema() const noexcept override {
    static const sdk::Schema s{"thing", "test", {}};
    return s;
  }
  int calls = 0;

 protected:
  sdk::Result<void> do_validate(const sdk::ValidateRequest&, sdk::ValidateResponse&) override { ++calls; return {}; }
  sdk::Result<void> do_read(const sdk::ReadRequest&, sdk::ReadResponse&) override { ++calls; return {}; }
  sdk::Result<void> do_plan(const sdk::PlanRequest& req, sdk::PlanResponse& resp) override {
    resp.plan = sdk::Plan{req.desired.rid, sdk::PlanAction::Create, {}, req.desired};
    return {};
  }
  sdk::Result<void> do_apply(const sdk::ApplyRequest&, sdk::ApplyResponse&) override { ++calls; return {}; }
  sdk::Result<void> do_remove(const sdk::RemoveRequest&, sdk::RemoveResponse&) override { ++calls; return {}; }
};

TEST(PathPolicyTest, EveryProviderIsGuardedBeforeItIsCalled) {
  sdk::NullLogger logger;
  sdk::HostContext ctx;
  ctx.logger = &logger;
  auto inner = std::make_shared<CountingProvider>(ctx);
  auto guarded = guard_paths(inner, {"/var/lib/nox-mesh", "/var/lib/nox-mesh-control"});
  EXPECT_EQ(&guarded->schema(), &inner->schema());
  sdk::CancelToken cancel;
  for (const char* id : {"/var/lib/nox-mesh/node.key", "/var/lib/nox-mesh-control/operators.json",
                         "/var/lib//nox-mesh/x", "/srv/../var/lib/nox-mesh/./identity.json", "/var/lib/nox-mesh"}) {
    sdk::Resource r;
    r.rid = sdk::ResourceId{"thing", id};
    auto v = guarded->validate(r);
    ASSERT_FALSE(v) << id;
    EXPECT_EQ(v.error().code, sdk::ErrorCode::PermissionDenied);
    EXPECT_EQ(v.error().path, "id");
    EXPECT_NE(v.error().message.find("path policy"), std::string::npos) << v.error().message;
    EXPECT_FALSE(guarded->read(r.rid));
    EXPECT_FALSE(guarded->apply(sdk::Plan{r.rid, sdk::PlanAction::Create, {}, r}, cancel));
    EXPECT_FALSE(guarded->remove(r.rid, cancel));
  }
  EXPECT_EQ(inner->calls, 0) << "a denied resource reached the provider";
  sdk::Resource fine;
  fine.rid = sdk::ResourceId{"thing", "/var/lib/nox-mesh-other/x"};
  EXPECT_TRUE(guarded->validate(fine));
  sdk::Resource named;
  named.rid = sdk::ResourceId{"thing", "nginx"};
  EXPECT_TRUE(guarded->validate(named));
  EXPECT_EQ(inner->calls, 2);
}

}  // namespace
}  // namespace mesh::host
