// Path safety against real processes (security.md "A local user"): an unprivileged local user
// (a numeric uid with no account, through setpriv) who owns a folder standing in for a home
// directory swaps a directory above a managed file for a symbolic link to a root-owned folder
// (standing in for /etc/cron.daily); neither `mesh-host apply` nor the daemon's drift repair
// writes, chowns or deletes anything there. And the host refuses to manage its own state
// directory and the control plane's. Everything happens inside the test's own temporary folder.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using namespace std::chrono_literals;
using mesh::testing::eventually;
using PathsTest = MeshTest;

constexpr uid_t kUser = 64123;

// Runs `script` with sh as uid/gid kUser, no supplementary groups, in `cwd`.
ProcessResult as_user(const std::string& script) {
  return mesh::testing::run_process({"setpriv", "--reuid=" + std::to_string(kUser), "--regid=" + std::to_string(kUser),
                                     "--clear-groups", "sh", "-c", script});
}

struct Layout {
  fs::path home, sub, cron, victim;
};

// <dir>/home (the user's, 0755), <dir>/home/sub (the user's), <dir>/cron.daily (root's, 0755)
// holding `victim` (root's, 0600). The test folder is opened to 0755 so the user can reach home.
Layout make_layout(const fs::path& dir) {
  Layout l{dir / "home", dir / "home" / "sub", dir / "cron.daily", dir / "cron.daily" / "victim"};
  EXPECT_EQ(::chmod(dir.c_str(), 0755), 0);
  fs::create_directories(l.sub);
  fs::create_directories(l.cron);
  EXPECT_EQ(::chown(l.home.c_str(), kUser, kUser), 0);
  EXPECT_EQ(::chown(l.sub.c_str(), kUser, kUser), 0);
  write_text(l.victim, "root only\n");
  EXPECT_EQ(::chmod(l.victim.c_str(), 0600), 0);
  return l;
}

// A job the user would like root to place in cron.daily, and a file declared absent whose name
// matches the root-only victim's.
std::string attack_declaration(const Layout& l) {
  sdk::Value job = sdk::Value::object();
  job.set("type", "file");
  job.set("id", (l.sub / "job").string());
  sdk::Value jp = sdk::Value::object();
  jp.set("content", "#!/bin/sh\necho pwned\n");
  jp.set("mode", "0755");
  jp.set("owner", std::to_string(kUser));
  job.set("properties", std::move(jp));
  sdk::Value gone = sdk::Value::object();
  gone.set("type", "file");
  gone.set("id", (l.sub / "victim").string());
  sdk::Value gp = sdk::Value::object();
  gp.set("ensure", "absent");
  gp.set("owner", std::to_string(kUser));
  gone.set("properties", std::move(gp));
  sdk::Value d = sdk::Value::object();
  d.set("resources", sdk::Value(sdk::Value::Array{std::move(job), std::move(gone)}));
  return d.to_json();
}

// What cron.daily holds: names, and the victim's content, mode and owner.
std::string cron_fingerprint(const Layout& l) {
  std::string out;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(l.cron)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const auto& n : names) out += n + " ";
  struct stat st {};
  if (::lstat(l.victim.c_str(), &st) == 0)
    out += "victim mode=" + std::to_string(st.st_mode & 07777) + " uid=" + std::to_string(st.st_uid) +
           " content=" + read_text(l.victim);
  else
    out += "victim absent";
  return out;
}

bool swap_for_link(const Layout& l) {
  auto r = as_user("mv '" + l.sub.string() + "' '" + l.sub.string() + ".old' && ln -s '" + l.cron.string() + "' '" +
                   l.sub.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return r.exit_code == 0 && fs::is_symlink(l.sub);
}

ProcessResult host_apply(const fs::path& decl, const fs::path& state) {
  return mesh::testing::run_process({bin("mesh-host"), "apply", decl.string(), "--state-dir", state.string(),
                                     "--plugin-dir", MESH_TEST_PLUGIN_DIR});
}

TEST_F(PathsTest, ApplyDoesNotFollowAnAncestorSwappedForASymlink) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (setpriv to another uid, chown)";
  const Layout l = make_layout(dir());
  const fs::path decl = dir() / "attack.json";
  write_text(decl, attack_declaration(l));
  auto first = host_apply(decl, dir() / "apply-state");
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  ASSERT_TRUE(fs::exists(l.sub / "job"));
  const std::string before = cron_fingerprint(l);
  ASSERT_EQ(before, "victim victim mode=384 uid=0 content=root only\n");

  ASSERT_TRUE(swap_for_link(l));
  auto second = host_apply(decl, dir() / "apply-state");
  EXPECT_NE(second.exit_code, 0) << second.out << second.err;
  EXPECT_NE(second.out.find("failed"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find(l.sub.string() + " is a symbolic link"), std::string::npos) << second.out << second.err;
  EXPECT_EQ(cron_fingerprint(l), before) << "the root-owned folder was written, chowned or emptied";
}

TEST_F(PathsTest, DriftRepairDoesNotFollowAnAncestorSwappedForASymlink) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (setpriv to another uid, chown)";
  const Layout l = make_layout(dir());
  Host& h = add_host("paths-01", "1s", "1s");
  start_host(h);
  auto d = declare("paths-01", attack_declaration(l));
  auto rep = report(d.get_int("delivery", 0), "30s");
  ASSERT_EQ(count(rep, "applied"), 1u) << rep.to_json();
  ASSERT_TRUE(fs::exists(l.sub / "job"));
  const std::string before = cron_fingerprint(l);

  ASSERT_TRUE(swap_for_link(l));
  // Drift scans run every second: wait until one reports the refusal, then a few more.
  const std::string job = "file:" + (l.sub / "job").string();
  sdk::Value show;
  EXPECT_TRUE(eventually([&] {
    auto r = mesh({"node", "show", "paths-01", "--output", "json"});
    if (r.exit_code != 0) return false;
    show = json(r.out);
    const sdk::Value* ld = show.find("last_drift");
    if (!ld || !ld->is_object() || !ld->find("resources")) return false;
    for (const auto& item : ld->find("resources")->as_array())
      if (item.get_string("resource") == job && item.get_string("found").find("symbolic link") != std::string::npos &&
          item.get_string("action").find("repair failed") != std::string::npos)
        return true;
    return false;
  }, 30000)) << show.to_json() << "\n" << cron_fingerprint(l);
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(cron_fingerprint(l), before) << "drift repair wrote, chowned or deleted through the link";
  EXPECT_NE(h.proc->stderr_text().find(l.sub.string() + " is a symbolic link"), std::string::npos);
}

TEST_F(PathsTest, HostRefusesToManageItsOwnStateDirectoryAndTheControlPlanes) {
  Host& h = add_host("paths-02", "1s", "1h");
  // This machine runs the control plane too: name its config, as the README says.
  {
    std::ofstream(h.config, std::ios::app) << "\n[paths]\ncontrol_config = \"" << (dir() / "control.toml").string()
                                           << "\"\n";
  }
  start_host(h);
  const fs::path planted = h.state / "planted";
  const fs::path operators = dir() / "control" / "operators.json";
  const std::string operators_before = read_text(operators);
  ASSERT_FALSE(operators_before.empty());

  auto d1 = declare("paths-02", file_declaration({{planted.string(), "mine\n"}}));
  auto r1 = report(d1.get_int("delivery", 0), "30s");
  ASSERT_EQ(count(r1, "failed"), 1u) << r1.to_json();
  EXPECT_NE(r1.to_json().find("path policy"), std::string::npos) << r1.to_json();
  EXPECT_FALSE(fs::exists(planted));

  auto d2 = declare("paths-02", file_declaration({{operators.string(), "[]\n"}}));
  auto r2 = report(d2.get_int("delivery", 0), "30s");
  ASSERT_EQ(count(r2, "failed"), 1u) << r2.to_json();
  EXPECT_NE(r2.to_json().find("path policy"), std::string::npos) << r2.to_json();
  EXPECT_EQ(read_text(operators), operators_before);

  // `mesh-host apply` refuses its state directory the same way, before anything is written.
  const fs::path state = dir() / "local-state";
  const fs::path decl = dir() / "local.json";
  write_text(decl, file_declaration({{(state / "identity.json").string(), "{}\n"}}));
  auto a = host_apply(decl, state);
  EXPECT_NE(a.exit_code, 0) << a.out << a.err;
  EXPECT_NE((a.out + a.err).find("path policy"), std::string::npos) << a.out << a.err;
  EXPECT_FALSE(fs::exists(state / "identity.json"));
}

TEST_F(PathsTest, ControlConfigProtectsKeysDirAndThePidFilesMeshControlSignals) {
  // newuser finding 4, as found: a control.toml with keys_dir outside state_dir (README "Several
  // control planes") and a list of nats pid files. Its files are dummies in the test's folder; the
  // host reads the config at start and refuses each before anything is written.
  const fs::path probe = dir() / "probe";
  const fs::path keys = probe / "keys";
  const std::vector<fs::path> targets = {keys / "operators.json", keys / "control.key", keys / "signing.json",
                                         probe / "nats" / "n0.pid", probe / "nats" / "n1.pid"};
  for (const auto& t : targets) write_text(t, "old\n");
  write_text(probe / "control.toml",
             "[control]\nstate_dir = \"" + (probe / "state").string() + "\"\nkeys_dir = \"" + keys.string() +
                 "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\n\n[broker]\nauthorization_file = \"" +
                 (probe / "nats" / "auth.conf").string() + "\"\npid_file = [\"" + targets[3].string() + "\", \"" +
                 targets[4].string() + "\"]\n");
  Host& h = add_host("paths-03", "1s", "1h");
  {
    std::ofstream(h.config, std::ios::app) << "\n[paths]\ncontrol_config = \"" << (probe / "control.toml").string()
                                           << "\"\n";
  }
  start_host(h);
  for (const auto& t : targets) {
    auto d = declare("paths-03", file_declaration({{t.string(), "PWNED\n"}}));
    auto r = report(d.get_int("delivery", 0), "30s");
    ASSERT_EQ(count(r, "failed"), 1u) << t << " " << r.to_json();
    EXPECT_NE(r.to_json().find("path policy"), std::string::npos) << r.to_json();
    EXPECT_EQ(read_text(t), "old\n") << t;
  }
  // A path beside them is still managed: the policy denies what the config names, no more.
  const fs::path beside = probe / "www" / "index.html";
  fs::create_directories(beside.parent_path());
  auto d = declare("paths-03", file_declaration({{beside.string(), "hello\n"}}));
  auto r = report(d.get_int("delivery", 0), "30s");
  EXPECT_EQ(count(r, "applied"), 1u) << r.to_json();
  EXPECT_EQ(read_text(beside), "hello\n");
  for (const auto& t : targets) EXPECT_EQ(read_text(t), "old\n") << t;
}

}  // namespace
}  // namespace mesh::itest
