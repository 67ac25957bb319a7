// The build stage's runner: a command run without a shell in its work directory, as an
// unprivileged user, with a time limit, its output captured and its artifacts hashed.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "build_runner.h"
#include "build_stage.h"
#include "mesh/sdk/sdk.h"
#include "mesh/testing/process.h"
#include "mesh/testing/temp_dir.h"

namespace fs = std::filesystem;
using namespace mesh::stages::build;
using mesh::sdk::ErrorCode;

namespace {

// The user the tests build as: `nobody` when we are root (so the drop is exercised), else us.
BuildUser test_user() {
  auto u = resolve_build_user(::geteuid() == 0 ? "nobody" : "");
  EXPECT_TRUE(u) << (u ? "" : u.error().describe());
  return u ? *u : BuildUser{};
}

struct Fixture : ::testing::Test {
  mesh::testing::TempDir tmp;
  fs::path work;
  void SetUp() override {
    // nobody must be able to reach the work directory.
    fs::permissions(tmp.path(), fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    work = tmp.path() / "work";
    fs::create_directory(work);
  }
  BuildSpec spec(std::vector<std::string> command) {
    BuildSpec s;
    s.command = std::move(command);
    s.work_dir = work.string();
    s.user = test_user();
    s.environment = build_environment(s.user, s.work_dir, {"MESH_VERSION=1.2.3"});
    s.timeout = std::chrono::seconds(60);
    return s;
  }
};

TEST_F(Fixture, RunsTheCommandInItsWorkDirWithItsEnvironmentAndCapturesBothStreams) {
  std::vector<std::string> lines;
  mesh::sdk::CancelToken cancel;
  auto r = run_build(spec({"/bin/sh", "-c",
                           "pwd; echo version=$MESH_VERSION; echo oops >&2; id -u; echo x > out.txt; "
                           "printf 'no newline'"}),
                     [&](std::string_view l) { lines.emplace_back(l); }, cancel);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_TRUE(r->ok());
  EXPECT_EQ(r->exit_code, 0);
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[0], work.string());
  EXPECT_EQ(lines[1], "version=1.2.3");
  EXPECT_EQ(lines[2], "oops");
  EXPECT_EQ(lines[3], std::to_string(test_user().uid));
  EXPECT_EQ(lines.back(), "no newline");
  EXPECT_TRUE(fs::exists(work / "out.txt"));
}

TEST_F(Fixture, TheControlPlanesEnvironmentIsNotPassed) {
  ::setenv("MESH_TEST_SECRET", "hunter2", 1);
  std::vector<std::string> lines;
  mesh::sdk::CancelToken cancel;
  auto r = run_build(spec({"/usr/bin/env"}), [&](std::string_view l) { lines.emplace_back(l); }, cancel);
  ASSERT_TRUE(r) << r.error().describe();
  for (const auto& l : lines) EXPECT_EQ(l.find("hunter2"), std::string::npos) << l;
  EXPECT_NE(std::find(lines.begin(), lines.end(), std::string("PATH=") + kBuildPath), lines.end());
}

TEST_F(Fixture, NoDescriptorOfTheControlPlaneReachesTheBuild) {
  // A socket and a file opened without close-on-exec, as a broker connection may be.
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const fs::path secret = tmp.path() / "control-only";
  { std::ofstream(secret) << "x"; }
  const int file = ::open(secret.c_str(), O_RDONLY);
  ASSERT_GE(file, 0);
  std::vector<std::string> lines;
  mesh::sdk::CancelToken cancel;
  // What each of the build's open descriptors is (the shell's own: $$).
  auto r = run_build(spec({"/bin/sh", "-c", "for f in /proc/$$/fd/*; do echo \"${f##*/} $(readlink $f)\"; done"}),
                     [&](std::string_view l) { lines.emplace_back(l); }, cancel);
  ::close(sv[0]);
  ::close(sv[1]);
  ::close(file);
  ASSERT_TRUE(r) << r.error().describe();
  ASSERT_TRUE(r->ok());
  ASSERT_FALSE(lines.empty());
  for (const auto& l : lines) {
    EXPECT_EQ(l.find("socket:"), std::string::npos) << "the build inherited a socket of the control plane: " << l;
    EXPECT_EQ(l.find("control-only"), std::string::npos) << "the build inherited a file of the control plane: " << l;
  }
}

TEST_F(Fixture, ANonZeroExitKeepsTheLastLines) {
  mesh::sdk::CancelToken cancel;
  auto s = spec({"/bin/sh", "-c", "for i in $(seq 1 50); do echo line $i; done; exit 3"});
  s.tail_lines = 5;
  auto r = run_build(s, nullptr, cancel);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->lines, 50u);
  ASSERT_EQ(r->tail.size(), 5u);
  EXPECT_EQ(r->tail.front(), "line 46");
  EXPECT_EQ(r->tail.back(), "line 50");
}

TEST_F(Fixture, ATimeLimitKillsTheCommandAndWhatItStarted) {
  mesh::sdk::CancelToken cancel;
  auto s = spec({"/bin/sh", "-c", "sleep 300 & echo started; wait"});
  s.timeout = std::chrono::milliseconds(300);
  auto r = run_build(s, nullptr, cancel);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_TRUE(r->timed_out);
  EXPECT_FALSE(r->ok());
  ASSERT_FALSE(r->tail.empty());
  EXPECT_EQ(r->tail.front(), "started");
}

TEST_F(Fixture, ACancelStopsTheCommand) {
  mesh::sdk::CancelToken cancel;
  cancel.cancel();
  auto r = run_build(spec({"/bin/sleep", "300"}), nullptr, cancel);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_TRUE(r->cancelled);
}

TEST_F(Fixture, AMissingProgramIsBadInputNamingIt) {
  mesh::sdk::CancelToken cancel;
  auto r = run_build(spec({"no-such-build-tool-xyz", "--version"}), nullptr, cancel);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(r.error().message.find("no-such-build-tool-xyz"), std::string::npos) << r.error().message;
  auto rel = find_program("bin/sh");
  ASSERT_FALSE(rel);
  EXPECT_EQ(rel.error().code, ErrorCode::InvalidArgument);
  auto found = find_program("sh");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->front(), '/');
}

TEST(BuildUser, RootIsRefused) {
  auto r = resolve_build_user("root");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(r.error().path, "build_user");
  EXPECT_NE(r.error().message.find("root"), std::string::npos);
}

TEST(BuildUser, AnUnknownUserIsRefusedByName) {
  auto r = resolve_build_user("no-such-user-xyz");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(r.error().message.find("no-such-user-xyz"), std::string::npos);
}

TEST(BuildUser, NoUserAsRootIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  auto r = resolve_build_user("");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "build_user");
}

TEST_F(Fixture, ArtifactsAreMatchedByPatternAndHashed) {
  {
    std::ofstream(work / "hello_1.0_all.deb") << "abc";
    fs::create_directories(work / "out");
    std::ofstream(work / "out" / "x.tar.gz") << "";
    std::ofstream(work / "README") << "no";
  }
  auto a = collect_artifacts(work.string(), {"*.deb", "out/*.tar.gz"});
  ASSERT_TRUE(a) << a.error().describe();
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[0].name, "hello_1.0_all.deb");
  EXPECT_EQ((*a)[0].sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ((*a)[0].size, 3u);
  EXPECT_EQ((*a)[1].name, "out/x.tar.gz");
  EXPECT_EQ((*a)[1].sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  // `*` does not cross a '/'.
  auto none = collect_artifacts(work.string(), {"*.tar.gz"});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::FailedPrecondition);
  EXPECT_NE(none.error().message.find("*.tar.gz"), std::string::npos);
}

TEST_F(Fixture, ASymbolicLinkIsNeverAnArtifact) {
  std::ofstream(tmp.path() / "secret.deb") << "secret";
  fs::create_symlink(tmp.path() / "secret.deb", work / "secret.deb");
  auto a = collect_artifacts(work.string(), {"*.deb"});
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code, ErrorCode::FailedPrecondition);
}

TEST_F(Fixture, PatternsOutsideTheWorkDirAreRefused) {
  for (std::string p : {"/etc/passwd", "../x", "a/../../x"}) {
    auto a = collect_artifacts(work.string(), {p});
    ASSERT_FALSE(a) << p;
    EXPECT_EQ(a.error().code, ErrorCode::InvalidArgument) << p;
  }
}

TEST_F(Fixture, TheBuildRunsAsTheUnprivilegedUserAndOwnsItsWorkDir) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to drop privileges";
  mesh::sdk::CancelToken cancel;
  std::vector<std::string> lines;
  auto r = run_build(spec({"/bin/sh", "-c", "id -u; id -G; touch mine"}),
                     [&](std::string_view l) { lines.emplace_back(l); }, cancel);
  ASSERT_TRUE(r) << r.error().describe();
  ASSERT_TRUE(r->ok());
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[0], "65534");
  EXPECT_EQ(lines[1].find(" 0"), std::string::npos) << lines[1];
  struct stat st {};
  ASSERT_EQ(::stat((work / "mine").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
}


// Alive and not a zombie.
bool running(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// Decision record 74: whatever the command started is killed when it ends, a process that left
// its group (setsid) too: the supervisor is a subreaper and kills its descendants.
TEST_F(Fixture, NothingTheBuildStartedOutlivesItNotEvenASetsidProcess) {
  mesh::sdk::CancelToken cancel;
  std::vector<std::string> lines;
  auto r = run_build(spec({"/bin/sh", "-c", "setsid sleep 300 & echo $!; sleep 300 & echo $!; exit 3"}),
                     [&](std::string_view l) { lines.emplace_back(l); }, cancel);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->exit_code, 3);  // the command's status, through its supervisor
  ASSERT_EQ(lines.size(), 2u);
  for (const auto& l : lines) {
    const pid_t pid = static_cast<pid_t>(std::stol(l));
    EXPECT_TRUE(mesh::testing::eventually([&] { return !running(pid); }, 5000)) << "pid " << pid << " survived";
    if (running(pid)) ::kill(pid, SIGKILL);
  }
}

TEST_F(Fixture, AKilledCommandsSignalIsItsOutcome) {
  mesh::sdk::CancelToken cancel;
  auto r = run_build(spec({"/bin/sh", "-c", "kill -9 $$"}), nullptr, cancel);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->exit_code, -9);
}

TEST_F(Fixture, AnArtifactOverTheLimitIsRefusedNamingItAndTheLimit) {
  std::ofstream(work / "small.deb") << "abc";
  std::ofstream(work / "big.deb") << "";
  fs::resize_file(work / "big.deb", 3u << 20);  // sparse: 3 MiB
  auto a = collect_artifacts(work.string(), {"*.deb"}, 1u << 20);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code, ErrorCode::Failed);
  EXPECT_EQ(a.error().path, "max_artifact_size");
  EXPECT_NE(a.error().message.find("big.deb"), std::string::npos) << a.error().message;
  EXPECT_NE(a.error().message.find("1048576"), std::string::npos) << a.error().message;
  EXPECT_TRUE(collect_artifacts(work.string(), {"small.deb"}, 3));

  // The copy is bounded by itself (the file may grow after it was measured): nothing is left.
  const fs::path to = tmp.path() / "kept.deb";
  auto c = copy_bounded((work / "big.deb").string(), to.string(), 1u << 20, "big.deb");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().path, "max_artifact_size");
  EXPECT_FALSE(fs::exists(to));
  auto ok = copy_bounded((work / "small.deb").string(), to.string(), 3, "small.deb");
  ASSERT_TRUE(ok) << ok.error().describe();
  EXPECT_EQ(ok->first, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(ok->second, 3u);
}

// The stage itself: settings, the message, nothing kept; leftovers of a killed mesh-control.
class Context final : public mesh::sdk::StageContext {
 public:
  explicit Context(std::string work) : work_(std::move(work)) {}
  std::uint64_t run_id() const noexcept override { return 7; }
  std::string operator_name() const override { return "tester"; }
  std::string work_dir() const override { return work_; }
  const mesh::sdk::Value& artifacts() const override { return artifacts_; }
  void log(std::string_view line) override { lines.emplace_back(line); }
  mesh::sdk::Result<mesh::sdk::Value> deploy(const std::string&, const std::string&,
                                             const mesh::sdk::Value&) override {
    return mesh::sdk::fail(ErrorCode::Unsupported, "no deploy here");
  }
  mesh::sdk::Value artifacts_ = mesh::sdk::Value::object();
  std::vector<std::string> lines;

 private:
  std::string work_;
};

struct StageFixture : Fixture {
  mesh::sdk::NullLogger logger;
  mesh::sdk::HostContext host;
  std::unique_ptr<BuildStage> stage;
  void SetUp() override {
    Fixture::SetUp();
    host.logger = &logger;
    host.role = "tool";
    host.state_dir = (tmp.path() / "state").string();
    fs::create_directories(host.state_dir);
    stage = std::make_unique<BuildStage>(host);
    mesh::sdk::Value config = mesh::sdk::Value::object();
    config.set("work_root", work.string());
    auto ok = stage->configure(mesh::sdk::apply_defaults(stage->config_schema(), config));
    ASSERT_TRUE(ok) << ok.error().describe();
  }
  mesh::sdk::Result<mesh::sdk::StageOutput> run(const std::string& script, mesh::sdk::Value extra) {
    mesh::sdk::StageInput in;
    in.pipeline = "p";
    in.params = std::move(extra);
    mesh::sdk::Value::Array command{mesh::sdk::Value("/bin/sh"), mesh::sdk::Value("-c"), mesh::sdk::Value(script)};
    in.params.set("command", mesh::sdk::Value(std::move(command)));
    in.params.set("artifacts", mesh::sdk::Value(mesh::sdk::Value::Array{mesh::sdk::Value("*.deb")}));
    in.params.set("version", "1.0");
    in.params.set("build_user", ::geteuid() == 0 ? "nobody" : "");
    Context ctx((tmp.path() / "ctx").string());
    mesh::sdk::CancelToken cancel;
    return stage->run(in, ctx, cancel);
  }
  fs::path kept() const { return tmp.path() / "state" / "artifacts" / "000000000007"; }
};

TEST_F(StageFixture, AnArtifactOverMaxArtifactSizeFailsTheStageAndNothingIsKept) {
  mesh::sdk::Value settings = mesh::sdk::Value::object();
  settings.set("max_artifact_size", "1MiB");
  auto r = run("echo x > small.deb; truncate -s 2M big.deb", settings);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Failed);
  const std::string& m = r.error().message;
  EXPECT_NE(m.find("big.deb"), std::string::npos) << m;
  EXPECT_NE(m.find("1048576 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("max_artifact_size = \"1MiB\""), std::string::npos) << m;
  std::error_code ec;
  EXPECT_TRUE(!fs::exists(kept(), ec) || fs::is_empty(kept(), ec));
  // The default is 1 GiB: the same build passes, and keeps both files.
  auto ok = run("echo x > small.deb; truncate -s 2M big.deb", mesh::sdk::Value::object());
  ASSERT_TRUE(ok) << ok.error().describe();
  EXPECT_EQ(fs::file_size(kept() / "big.deb"), 2u << 20);
}

TEST_F(StageFixture, ArtifactsOverMaxArtifactsTotalFailTheStageAndNothingIsKept) {
  mesh::sdk::Value settings = mesh::sdk::Value::object();
  settings.set("max_artifacts_total", "1MiB");
  auto r = run("truncate -s 600K a.deb; truncate -s 600K b.deb", settings);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Failed);
  EXPECT_NE(r.error().message.find("max_artifacts_total"), std::string::npos) << r.error().message;
  std::error_code ec;
  EXPECT_TRUE(!fs::exists(kept(), ec) || fs::is_empty(kept(), ec));
  mesh::sdk::Value bad = mesh::sdk::Value::object();
  bad.set("max_artifact_size", "lots");
  auto refused = run("true", bad);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().path, "max_artifact_size");
}

TEST_F(StageFixture, TheLeftoverWorkDirectoriesOfAKilledControlPlaneAreRemovedAtConfigure) {
  fs::create_directories(work / "mesh-build-AbC123" / "deep");
  std::ofstream(work / "mesh-build-AbC123" / "deep" / "f") << "x";
  fs::create_directories(work / "someone-elses");
  std::ofstream(work / "mesh-build-not-a-dir") << "";
  mesh::sdk::Value config = mesh::sdk::Value::object();
  config.set("work_root", work.string());
  BuildStage again(host);
  ASSERT_TRUE(again.configure(mesh::sdk::apply_defaults(again.config_schema(), config)));
  EXPECT_FALSE(fs::exists(work / "mesh-build-AbC123"));
  EXPECT_TRUE(fs::exists(work / "someone-elses"));
  EXPECT_TRUE(fs::exists(work / "mesh-build-not-a-dir"));
}


}  // namespace
