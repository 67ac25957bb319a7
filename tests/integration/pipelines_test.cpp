// Pipelines end to end (decision records 60-62): a real mesh-control with the `build` stage
// plugin loaded runs pipeline files from its [pipelines] dir, asked by the real `mesh`; the build
// stage builds a real .deb with dpkg-deb as an unprivileged user (nobody, when the tests run as
// root); each stage's outcome, log and artifacts are kept and shown; a failed stage fails the run
// and the later stages never start; bad pipeline files are refused naming file, line and key, and
// nothing is written.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mesh_fixture.h"
#include "mesh/common/crypto.h"

namespace mesh::itest {
namespace {

class PipelineTest : public MeshTest {
 protected:
  void SetUp() override {
    nats_ = std::make_unique<NatsServer>();
    // The build user (nobody when we are root) must reach the work root and the sources.
    fs::permissions(dir(), fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    fs::create_directories(dir() / "builds");
    fs::permissions(dir() / "builds", fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    fs::create_directories(dir() / "pipelines");
    fs::permissions(dir() / "pipelines", fs::perms(0755));  // a pipelines dir no one else may write
    make_package_source();
    start_pipeline_control();
  }

  void start_pipeline_control() {
    const fs::path cfg = dir() / "control.toml";
    std::string build_user = ::geteuid() == 0 ? "build_user = \"nobody\"\n" : "";
    write_text(cfg, "[control]\nstate_dir = \"" + (dir() / "control").string() +
                        "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\n\n[store]\nplugin = \"sqlite\"\n\n"
                        "[transport]\nplugin = \"nats\"\nservers = [\"" + nats_->url() + "\"]\n\n"
                        "[stages]\nload = [" + stages_load_ + "]\n\n[stages.build]\nwork_root = \"" +
                        (dir() / "builds").string() + "\"\n\n[pipelines]\ndir = \"" + (dir() / "pipelines").string() +
                        "\"\n" + build_user + extra_config_);
    control_ = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{bin("mesh-control"), "run", "--config", cfg.string(), "--log-level", "debug"});
    ASSERT_TRUE(mesh::testing::eventually([&] { return mesh({"nodes"}).exit_code == 0; }, 15000))
        << control_->stderr_text();
  }

  // A package tree dpkg-deb can build: DEBIAN/control and one file, readable by everyone.
  void make_package_source() {
    const fs::path src = dir() / "src" / "hello";
    write_text(src / "DEBIAN" / "control",
               "Package: nox-mesh-test-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: test <t@example.org>\n"
               "Description: pipeline test package\n");
    write_text(src / "usr" / "share" / "doc" / "nox-mesh-test-hello" / "README", "hello from a pipeline\n");
    for (auto& e : fs::recursive_directory_iterator(dir() / "src"))
      fs::permissions(e.path(), e.is_directory() ? fs::perms(0755) : fs::perms(0644));
    fs::permissions(dir() / "src", fs::perms(0755));
  }

  std::string stages_load_ = "\"build\"";
  std::string extra_config_;

  void pipeline_file(const std::string& name, const std::string& text) {
    write_text(dir() / "pipelines" / (name + ".toml"), text);
    // As mesh-control's user writes one: writable by no one else, whatever the umask.
    fs::permissions(dir() / "pipelines" / (name + ".toml"), fs::perms(0644));
  }

  std::string hello_pipeline() const {
    return "description = \"build the hello package\"\n\n[[stage]]\nplugin = \"build\"\n"
           "command = [\"dpkg-deb\", \"--root-owner-group\", \"--build\", \"" +
           (dir() / "src" / "hello").string() + "\", \"hello_{{version}}_all.deb\"]\nartifacts = [\"*.deb\"]\n"
           "timeout = \"2m\"\n";
  }
};

TEST_F(PipelineTest, ABuildStageBuildsARealPackageAndItsArtifactIsKeptWithItsDigest) {
  pipeline_file("hello", hello_pipeline());
  auto r = mesh({"pipeline", "run", "hello", "--version", "1.0", "--wait", "2m", "--output", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  sdk::Value run = json(r.out);
  EXPECT_EQ(run.get_string("state"), "succeeded") << r.out;
  EXPECT_EQ(run.get_string("pipeline"), "hello");
  EXPECT_EQ(run.get_string("version"), "1.0");
  EXPECT_EQ(run.get_string("operator"), "admin");
  ASSERT_EQ(run.find("stages")->as_array().size(), 1u);
  const sdk::Value& stage = run.find("stages")->as_array()[0];
  EXPECT_EQ(stage.get_string("state"), "succeeded");
  EXPECT_TRUE(stage.find("started_at")->is_string());
  EXPECT_TRUE(stage.find("ended_at")->is_string());
  const sdk::Value* files = stage.find("artifacts")->find("files");
  ASSERT_TRUE(files && files->as_array().size() == 1u) << r.out;
  const sdk::Value& deb = files->as_array()[0];
  EXPECT_EQ(deb.get_string("name"), "hello_1.0_all.deb");
  // The kept file is the one built, with the digest recorded.
  const std::string bytes = read_text(deb.get_string("path"));
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(bytes.rfind("!<arch>\n", 0), 0u);
  EXPECT_EQ(deb.get_string("sha256"), common::sha256_hex(bytes));
  EXPECT_EQ(deb.get_int("size", 0), static_cast<std::int64_t>(bytes.size()));
  // The tool's own output is the stage's log.
  std::string log;
  for (const auto& l : stage.find("log")->as_array()) log += l.as_string() + "\n";
  EXPECT_NE(log.find("building package 'nox-mesh-test-hello'"), std::string::npos) << log;
  // Its work directory is gone.
  EXPECT_TRUE(fs::is_empty(dir() / "builds"));

  auto show = mesh({"pipeline", "show", std::to_string(run.get_int("run", 0))});
  ASSERT_EQ(show.exit_code, 0) << show.out << show.err;
  EXPECT_NE(show.out.find("pipeline hello version 1.0 by admin — succeeded"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("artifact hello_1.0_all.deb sha256 " + deb.get_string("sha256")), std::string::npos)
      << show.out;
}

TEST_F(PipelineTest, AFailedStageFailsTheRunWithItsLastLinesAndLaterStagesNeverStart) {
  pipeline_file("broken", "[[stage]]\nplugin = \"build\"\nname = \"compile\"\n"
                          "command = [\"/bin/sh\", \"-c\", \"echo compiling; echo 'error: it broke' >&2; exit 4\"]\n\n"
                          "[[stage]]\nplugin = \"build\"\nname = \"package\"\n"
                          "command = [\"/usr/bin/touch\", \"never\"]\n");
  auto r = mesh({"pipeline", "run", "broken", "--version", "2", "--wait", "2m", "--output", "json"});
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  sdk::Value run = json(r.out);
  EXPECT_EQ(run.get_string("state"), "failed");
  const auto& stages = run.find("stages")->as_array();
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].get_string("state"), "failed");
  const std::string error = stages[0].get_string("error");
  EXPECT_NE(error.find("exited with status 4"), std::string::npos) << error;
  EXPECT_NE(error.find("error: it broke"), std::string::npos) << error;
  // A one-line summary: the tool's lines joined, never a newline (shown as a literal "\n").
  EXPECT_NE(error.find("last lines: compiling; error: it broke"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_EQ(run.get_string("error").find('\n'), std::string::npos) << r.out;
  // Every line is still in the stage's log, each on its own.
  std::string log;
  for (const auto& l : stages[0].find("log")->as_array()) log += l.as_string() + "\n";
  EXPECT_NE(log.find("compiling\n"), std::string::npos) << log;
  EXPECT_NE(log.find("error: it broke\n"), std::string::npos) << log;
  EXPECT_EQ(stages[1].get_string("state"), "not_started");
  EXPECT_TRUE(stages[1].find("started_at")->is_null());
  EXPECT_NE(run.get_string("error").find("stage compile failed"), std::string::npos) << r.out;

  auto show = mesh({"pipeline", "show", std::to_string(run.get_int("run", 0))});
  EXPECT_EQ(show.exit_code, 1) << show.out << show.err;
  EXPECT_NE(show.out.find("package (build): not started"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("error: it broke"), std::string::npos) << show.out;
  EXPECT_EQ(show.out.find("\\n"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("stage compile failed: build command"), std::string::npos) << show.out;
}

TEST_F(PipelineTest, BadInputIsRefusedNamingFileLineAndKeyAndNothingIsWritten) {
  pipeline_file("typo", "[[stage]]\nplugin = \"build\"\ncomand = [\"make\"]\ncommand = [\"make\"]\n");
  auto typo = mesh({"pipeline", "run", "typo", "--version", "1"});
  EXPECT_EQ(typo.exit_code, 2) << typo.out << typo.err;
  EXPECT_NE(typo.err.find((dir() / "pipelines" / "typo.toml").string() + ":3: stage[0].comand: unknown key 'comand'"),
            std::string::npos)
      << typo.err;
  // The path is printed once: "error: FILE:3: stage[0].comand: ...", not "stage[0].comand: FILE:3: stage[0].comand: ...".
  EXPECT_EQ(typo.err.find("stage[0].comand"), typo.err.rfind("stage[0].comand")) << typo.err;
  EXPECT_EQ(typo.err.rfind("error: " + (dir() / "pipelines" / "typo.toml").string(), 0), 0u) << typo.err;
  pipeline_file("noplugin", "[[stage]]\nplugin = \"publsh\"\n");
  auto noplugin = mesh({"pipeline", "run", "noplugin", "--version", "1"});
  EXPECT_EQ(noplugin.exit_code, 2) << noplugin.err;
  EXPECT_NE(noplugin.err.find("no stage plugin 'publsh'"), std::string::npos) << noplugin.err;
  pipeline_file("nocommand", "[[stage]]\nplugin = \"build\"\ncommand = [\"no-such-build-tool-xyz\"]\n");
  auto missing = mesh({"pipeline", "run", "nope", "--version", "1"});
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_NE(missing.err.find("no pipeline 'nope'"), std::string::npos) << missing.err;
  auto traversal = mesh({"pipeline", "run", "../control", "--version", "1"});
  EXPECT_EQ(traversal.exit_code, 2) << traversal.err;
  // A version is an opaque Debian/semver-like token: it goes into build commands and file names.
  pipeline_file("hello", hello_pipeline());
  for (const char* bad : {"../../x", "1/2", "-rf"}) {
    auto version = mesh({"pipeline", "run", "hello", "--version=" + std::string(bad)});
    EXPECT_EQ(version.exit_code, 2) << bad << ": " << version.out << version.err;
    EXPECT_NE(version.err.find("--version: '" + std::string(bad) + "' is not a version"), std::string::npos)
        << version.err;
  }
  // None of these wrote a run.
  auto none = mesh({"pipeline", "show", "1"});
  EXPECT_EQ(none.exit_code, 2) << none.out << none.err;
  EXPECT_NE(none.err.find("pipeline run 1 does not exist"), std::string::npos) << none.err;

  // A command that does not exist is found by the build stage's check, before the run starts
  // (decision record 72): refused naming the file, the stage and the program; no run is written.
  auto nocommand = mesh({"pipeline", "run", "nocommand", "--version", "1", "--wait", "1m", "--output", "json"});
  EXPECT_EQ(nocommand.exit_code, 2) << nocommand.out << nocommand.err;
  EXPECT_NE(nocommand.err.find((dir() / "pipelines" / "nocommand.toml").string() + ": stage[0] 'build' refuses the run"),
            std::string::npos)
      << nocommand.err;
  EXPECT_NE(nocommand.err.find("no-such-build-tool-xyz"), std::string::npos) << nocommand.err;
  auto still_none = mesh({"pipeline", "show", "1"});
  EXPECT_EQ(still_none.exit_code, 2) << still_none.out << still_none.err;
}

TEST_F(PipelineTest, AReaderMayShowButNotRun) {
  pipeline_file("hello", hello_pipeline());
  auto add = mesh({"operator", "add", "viewer", "--role", "reader"});
  ASSERT_EQ(add.exit_code, 0) << add.err;
  write_text(dir() / "viewer.identity", add.out);
  fs::permissions(dir() / "viewer.identity", fs::perms::owner_read | fs::perms::owner_write);
  auto r = mesh_as((dir() / "viewer.identity").string(), {"pipeline", "run", "hello", "--version", "1.0"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("deployer"), std::string::npos) << r.err;
  auto show = mesh_as((dir() / "viewer.identity").string(), {"pipeline", "show", "1"});
  EXPECT_EQ(show.exit_code, 2) << show.err;  // runs nothing: there is no run 1
  EXPECT_NE(show.err.find("does not exist"), std::string::npos) << show.err;
}

// A pipeline file someone else could have written (group/other-writable, a symbolic link, owned by
// another user) is never run: exit 2 naming the file and why, and no run is recorded.
TEST_F(PipelineTest, APipelineFileOthersCouldHaveWrittenIsRefusedAndNothingIsWritten) {
  const std::string body = "[[stage]]\nplugin = \"build\"\ncommand = [\"/usr/bin/touch\", \"ran\"]\n";
  auto refused = [&](const std::string& name, const std::string& why) {
    auto r = mesh({"pipeline", "run", name, "--version", "1"});
    EXPECT_EQ(r.exit_code, 2) << name << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find(name + ".toml"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  };
  pipeline_file("ww", body);
  fs::permissions(dir() / "pipelines" / "ww.toml", fs::perms(0666));
  refused("ww", "writable by group or others");
  write_text(dir() / "evil.toml", body);
  fs::permissions(dir() / "evil.toml", fs::perms(0644));
  fs::create_symlink(dir() / "evil.toml", dir() / "pipelines" / "ln.toml");
  refused("ln", "symbolic link");
  bool other_owner = false;
  if (::geteuid() == 0) {
    pipeline_file("theirs", body);
    ASSERT_EQ(::chown((dir() / "pipelines" / "theirs.toml").c_str(), 65534, 65534), 0);
    refused("theirs", "owned by uid 65534");
    other_owner = true;
  }
  // The directory itself, writable by others.
  pipeline_file("fine", body);
  fs::permissions(dir() / "pipelines", fs::perms(0777));
  refused("fine", "writable by group or others");
  fs::permissions(dir() / "pipelines", fs::perms(0755));
  // Nothing was run or recorded.
  auto none = mesh({"pipeline", "show", "1"});
  EXPECT_NE(none.err.find("does not exist"), std::string::npos) << none.out << none.err;
  EXPECT_FALSE(fs::exists(dir() / "builds" / "ran"));
  if (!other_owner) GTEST_SKIP() << "another owner (chown to nobody) needs root";
}

TEST_F(PipelineTest, ARunInterruptedByAStopOfTheControlPlaneIsMarkedFailedAtItsNextStart) {
  // Runs while the file exists (so that nothing of it outlives the test).
  const fs::path keep = dir() / "keep-running";
  write_text(keep, "");
  pipeline_file("slow", "[[stage]]\nplugin = \"build\"\ncommand = [\"/bin/sh\", \"-c\", \"while [ -e " +
                            keep.string() + " ]; do sleep 0.2; done\"]\n");
  auto r = mesh({"pipeline", "run", "slow", "--version", "1", "--output", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string id = std::to_string(json(r.out).get_int("run", 0));
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        auto s = mesh({"pipeline", "show", id, "--output", "json"});
        return s.exit_code == 0 && json(s.out).find("stages")->as_array()[0].get_string("state") == "running";
      },
      30000));
  control_->stop(SIGKILL);
  control_.reset();
  start_pipeline_control();
  auto s = mesh({"pipeline", "show", id, "--output", "json"});
  ASSERT_EQ(s.exit_code, 1) << s.out << s.err;
  sdk::Value run = json(s.out);
  EXPECT_EQ(run.get_string("state"), "failed");
  EXPECT_NE(run.get_string("error").find("interrupted"), std::string::npos) << s.out;
  EXPECT_EQ(run.find("stages")->as_array()[0].get_string("state"), "failed");
  fs::remove(keep);
}

// A kill -9 of mesh-control during a build takes the build's whole process tree with it — a
// background grandchild and one that left the group with setsid too (decision record 74) — and
// the work directory it leaves is removed when mesh-control starts again.
TEST_F(PipelineTest, AKilledControlPlaneTakesTheBuildsWholeProcessTreeAndItsWorkDirectoryGoesAtTheNextStart) {
  // The build user writes its grandchildren's pids here.
  const fs::path pids = dir() / "pids";
  fs::create_directories(pids);
  fs::permissions(pids, fs::perms::all);
  pipeline_file("tree", "[[stage]]\nplugin = \"build\"\ncommand = [\"/bin/sh\", \"-c\", \"sleep 300 & echo $! > " +
                            (pids / "background").string() + "; setsid sleep 300 & echo $! > " +
                            (pids / "setsid").string() + "; wait\"]\n");
  auto r = mesh({"pipeline", "run", "tree", "--version", "1", "--output", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto pid_in = [&](const char* name) -> pid_t {
    std::error_code ec;
    if (!fs::exists(pids / name, ec)) return 0;
    try {
      return static_cast<pid_t>(std::stol(read_text(pids / name)));
    } catch (...) {
      return 0;
    }
  };
  ASSERT_TRUE(mesh::testing::eventually([&] { return pid_in("background") > 0 && pid_in("setsid") > 0; }, 30000));
  const pid_t background = pid_in("background"), detached = pid_in("setsid");
  // Alive, and not a zombie, is "running".
  auto running = [](pid_t pid) {
    std::string stat;
    try {
      stat = read_text("/proc/" + std::to_string(pid) + "/stat");
    } catch (...) {
      return false;
    }
    const auto close = stat.rfind(')');
    return !stat.empty() && close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
  };
  ASSERT_TRUE(running(background) && running(detached));
  ASSERT_FALSE(fs::is_empty(dir() / "builds"));  // the build's work directory

  control_->stop(SIGKILL);
  control_.reset();
  EXPECT_TRUE(mesh::testing::eventually([&] { return !running(background); }, 10000))
      << "the build's background sleep " << background << " outlived mesh-control";
  EXPECT_TRUE(mesh::testing::eventually([&] { return !running(detached); }, 10000))
      << "the build's setsid sleep " << detached << " outlived mesh-control";
  // Nothing cleans after a kill -9 but the next start.
  EXPECT_FALSE(fs::is_empty(dir() / "builds"));
  start_pipeline_control();
  EXPECT_TRUE(fs::is_empty(dir() / "builds"));
  EXPECT_NE(control_->stderr_text().find("mesh-build-"), std::string::npos) << control_->stderr_text();
  // Whatever the test itself leaves: never a sleep of 300 s after it.
  if (running(background)) ::kill(background, SIGKILL);
  if (running(detached)) ::kill(detached, SIGKILL);
}

// build → publish: the package the build stage made is put into the mesh's apt repository by the
// publish stage (decision record 58), found among the build's artifacts with its digest.
class BuildAndPublishTest : public PipelineTest {
 protected:
  void SetUp() override {
    stages_load_ = "\"build\", \"publish\", \"deploy\"";
    extra_config_ = "\n[repository]\ndir = \"" + (dir() / "repo").string() + "\"\n";
    PipelineTest::SetUp();
  }
  std::size_t debs_in_repository() const {
    std::size_t n = 0;
    std::error_code ec;
    if (fs::exists(dir() / "repo"))
      for (auto& e : fs::recursive_directory_iterator(dir() / "repo", ec))
        if (e.path().extension() == ".deb") ++n;
    return n;
  }
};

TEST_F(BuildAndPublishTest, TheBuiltPackageIsPublishedWithTheDigestTheBuildRecorded) {
  pipeline_file("release", hello_pipeline() + "\n[[stage]]\nplugin = \"publish\"\n");
  auto r = mesh({"pipeline", "run", "release", "--version", "1.0", "--wait", "5m", "--output", "json"}, 400000);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  sdk::Value run = json(r.out);
  const auto& stages = run.find("stages")->as_array();
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[1].get_string("state"), "succeeded") << r.out;
  const std::string built = stages[0].find("artifacts")->find("files")->as_array()[0].get_string("sha256");
  const sdk::Value* packages = stages[1].find("artifacts")->find("packages");
  ASSERT_TRUE(packages && packages->as_array().size() == 1u) << r.out;
  const sdk::Value& p = packages->as_array()[0];
  EXPECT_EQ(p.get_string("name"), "nox-mesh-test-hello");
  EXPECT_EQ(p.get_string("version"), "1.0");
  EXPECT_EQ(p.get_string("sha256"), built);
  const fs::path in_repo = dir() / "repo" / p.get_string("filename");
  ASSERT_TRUE(fs::is_regular_file(in_repo)) << in_repo;
  EXPECT_EQ(common::sha256_hex(read_text(in_repo)), built);
}

// The built package's Version (DEBIAN/control: 1.0) is not the run's (--version 1.2.4): the
// publish stage fails naming both versions and the file, and nothing is published — a deploy at
// 1.2.4 would find no such version on any node. check_version = false turns the check off.
TEST_F(BuildAndPublishTest, APackageOfAnotherVersionThanTheRunsIsNotPublished) {
  pipeline_file("release", hello_pipeline() + "\n[[stage]]\nplugin = \"publish\"\n");
  auto r = mesh({"pipeline", "run", "release", "--version", "1.2.4", "--wait", "5m", "--output", "json"}, 400000);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  sdk::Value run = json(r.out);
  EXPECT_EQ(run.get_string("state"), "failed") << r.out;
  const auto& stages = run.find("stages")->as_array();
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].get_string("state"), "succeeded") << r.out;
  EXPECT_EQ(stages[1].get_string("state"), "failed") << r.out;
  const std::string error = stages[1].get_string("error");
  EXPECT_NE(error.find("Version is 1.0"), std::string::npos) << error;
  EXPECT_NE(error.find("run's version 1.2.4"), std::string::npos) << error;
  EXPECT_NE(error.find("hello_1.2.4_all.deb"), std::string::npos) << error;
  EXPECT_EQ(debs_in_repository(), 0u) << "nothing may be published at another version than the run's";

  pipeline_file("unchecked", hello_pipeline() + "\n[[stage]]\nplugin = \"publish\"\ncheck_version = false\n");
  auto u = mesh({"pipeline", "run", "unchecked", "--version", "1.2.4", "--wait", "5m", "--output", "json"}, 400000);
  ASSERT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_EQ(debs_in_repository(), 1u);
}

// build → publish → deploy with a deploy stage the control plane would refuse (an unknown module;
// waves that do not parse): refused before the build runs, so nothing is published and no run is
// written (decision record 72).
TEST_F(BuildAndPublishTest, ADeployStageTheControlPlaneWouldRefuseStopsTheRunBeforeTheBuildAndNothingIsPublished) {
  pipeline_file("release", hello_pipeline() + "\n[[stage]]\nplugin = \"publish\"\n\n[[stage]]\nplugin = \"deploy\"\n"
                                               "module = \"nosuchmod\"\n");
  auto r = mesh({"pipeline", "run", "release", "--version", "1.0", "--wait", "5m"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find((dir() / "pipelines" / "release.toml").string() +
                       ": stage[2] 'deploy' refuses the run before any stage started"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("nosuchmod"), std::string::npos) << r.err;

  pipeline_file("waves", hello_pipeline() + "\n[[stage]]\nplugin = \"publish\"\n\n[[stage]]\nplugin = \"deploy\"\n"
                                             "module = \"nosuchmod\"\nwaves = \"abc\"\n");
  auto w = mesh({"pipeline", "run", "waves", "--version", "1.0", "--wait", "5m"});
  EXPECT_EQ(w.exit_code, 2) << w.out << w.err;
  EXPECT_NE(w.err.find("stage[2] 'deploy' refuses the run"), std::string::npos) << w.err;
  EXPECT_NE(w.err.find("waves"), std::string::npos) << w.err;

  EXPECT_EQ(debs_in_repository(), 0u) << "nothing may be published on bad input";
  auto none = mesh({"pipeline", "show", "1"});
  EXPECT_EQ(none.exit_code, 2) << none.out << none.err;
  EXPECT_NE(none.err.find("pipeline run 1 does not exist"), std::string::npos) << none.err;
}

// build → deploy with real hosts: the deploy stage deploys the module at the run's version through
// the control plane's deploy (one write), waits for the nodes, and keeps the deploy report and its
// JUnit rendering. Needs the fleet operations (module push, assign, deploy): skipped in a tree
// without them.
TEST_F(PipelineTest, TheDeployStageDeploysTheModuleAtTheRunsVersionAndKeepsItsJUnitReport) {
  if (auto probe = mesh({"module", "list"}); probe.exit_code != 0)
    GTEST_SKIP() << "this tree has no fleet operations (mesh module list: " << probe.err << ")";
  for (const char* name : {"web-01", "web-02"}) {
    add_host(name);
    fs::create_directories(dir() / "files" / name);
    auto l = mesh({"node", "label", name, "role=web", "dir=" + (dir() / "files" / name).string()});
    ASSERT_EQ(l.exit_code, 0) << l.out << l.err;
    start_host(hosts_[name]);
  }
  const fs::path module = dir() / "module-motd.json";
  write_text(module, "{\"module\": \"motd\", \"version\": \"2.0\", \"resources\": [{\"type\": \"file\", \"id\": "
                     "\"{{labels.dir}}/motd\", \"properties\": {\"content\": \"{{node.name}} runs 2.0\\n\"}}]}");
  auto pushed = mesh({"module", "push", module.string()});
  ASSERT_EQ(pushed.exit_code, 0) << pushed.out << pushed.err;
  auto assigned = mesh({"assign", "motd", "role=web"});
  ASSERT_EQ(assigned.exit_code, 0) << assigned.out << assigned.err;
  stages_load_ = "\"build\", \"deploy\"";
  control_->stop();
  start_pipeline_control();
  pipeline_file("ship", "[[stage]]\nplugin = \"build\"\ncommand = [\"/usr/bin/touch\", \"built-{{version}}\"]\n"
                        "artifacts = [\"built-*\"]\n\n[[stage]]\nplugin = \"deploy\"\nmodule = \"motd\"\nwait = \"60s\"\n"
                        "fail_on_outstanding = true\n");
  auto r = mesh({"pipeline", "run", "ship", "--version", "2.0", "--wait", "3m", "--output", "json"}, 240000);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << control_->stderr_text().substr(0, 20000);
  sdk::Value run = json(r.out);
  const sdk::Value& deploy = run.find("stages")->as_array()[1];
  EXPECT_EQ(deploy.get_string("state"), "succeeded") << r.out;
  const sdk::Value* report = deploy.find("artifacts")->find("deploy");
  ASSERT_TRUE(report) << r.out;
  EXPECT_EQ(report->get_string("version"), "2.0");
  EXPECT_EQ(report->find("applied")->as_array().size(), 2u) << r.out;
  const std::string junit = deploy.find("artifacts")->get_string("junit");
  EXPECT_NE(junit.find("<testsuite"), std::string::npos) << r.out;
  EXPECT_NE(junit.find("web-02"), std::string::npos) << junit;
  EXPECT_EQ(read_text(dir() / "files" / "web-01" / "motd"), "web-01 runs 2.0\n");
  EXPECT_EQ(read_text(dir() / "files" / "web-02" / "motd"), "web-02 runs 2.0\n");
}

// mesh-control killed while a deploy stage waits for a node that never applies (its host is
// stopped): after the restart the run's record names the deploy that went out — the stage's
// artifact `deploy` {deploy, delivery, module, version}, written before the wait — and the error
// says "interrupted after deploy N was written (see mesh deploy --show N)".
TEST_F(PipelineTest, ARunInterruptedDuringItsDeployStagesWaitNamesTheDeployThatWasWritten) {
  if (auto probe = mesh({"module", "list"}); probe.exit_code != 0)
    GTEST_SKIP() << "this tree has no fleet operations (mesh module list: " << probe.err << ")";
  add_host("web-01");
  fs::create_directories(dir() / "files" / "web-01");
  auto l = mesh({"node", "label", "web-01", "role=web", "dir=" + (dir() / "files" / "web-01").string()});
  ASSERT_EQ(l.exit_code, 0) << l.out << l.err;
  start_host(hosts_["web-01"]);
  const fs::path module = dir() / "module-motd.json";
  write_text(module, "{\"module\": \"motd\", \"version\": \"3.0\", \"resources\": [{\"type\": \"file\", \"id\": "
                     "\"{{labels.dir}}/motd\", \"properties\": {\"content\": \"{{node.name}} runs 3.0\\n\"}}]}");
  auto pushed = mesh({"module", "push", module.string()});
  ASSERT_EQ(pushed.exit_code, 0) << pushed.out << pushed.err;
  auto assigned = mesh({"assign", "motd", "role=web"});
  ASSERT_EQ(assigned.exit_code, 0) << assigned.out << assigned.err;
  // The host is stopped: the deploy stays outstanding, the stage waits.
  hosts_["web-01"].proc->stop();
  hosts_["web-01"].proc.reset();
  stages_load_ = "\"build\", \"deploy\"";
  control_->stop();
  start_pipeline_control();
  pipeline_file("ship", "[[stage]]\nplugin = \"deploy\"\nmodule = \"motd\"\nwait = \"60s\"\n");
  auto r = mesh({"pipeline", "run", "ship", "--version", "3.0", "--output", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string id = std::to_string(json(r.out).get_int("run", 0));
  std::int64_t deploy_id = 0;
  std::string last;
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        auto s = mesh({"pipeline", "show", id, "--output", "json"});
        last = s.out + s.err;
        if (s.exit_code != 0) return false;
        const sdk::Value shown = json(s.out);
        const sdk::Value& st = shown.find("stages")->as_array()[0];
        const sdk::Value* a = st.find("artifacts");
        const sdk::Value* d = a ? a->find("deploy") : nullptr;
        if (st.get_string("state") != "running" || !d) return false;
        deploy_id = d->get_int("deploy", 0);
        return true;
      },
      30000))
      << last << "\n" << control_->stderr_text().substr(0, 20000);
  ASSERT_GT(deploy_id, 0);
  control_->stop(SIGKILL);
  control_.reset();
  start_pipeline_control();
  auto s = mesh({"pipeline", "show", id, "--output", "json"});
  ASSERT_EQ(s.exit_code, 1) << s.out << s.err;
  sdk::Value run = json(s.out);
  EXPECT_EQ(run.get_string("state"), "failed");
  const std::string n = std::to_string(deploy_id);
  const std::string says = "interrupted after deploy " + n + " was written (see mesh deploy --show " + n + ")";
  EXPECT_NE(run.get_string("error").find(says), std::string::npos) << s.out;
  const sdk::Value& stage = run.find("stages")->as_array()[0];
  EXPECT_EQ(stage.get_string("state"), "failed");
  EXPECT_NE(stage.get_string("error").find(says), std::string::npos) << s.out;
  const sdk::Value* d = stage.find("artifacts")->find("deploy");
  ASSERT_TRUE(d) << s.out;
  EXPECT_EQ(d->get_int("deploy", 0), deploy_id);
  EXPECT_GT(d->get_int("delivery", 0), 0) << s.out;
  EXPECT_EQ(d->get_string("module"), "motd");
  EXPECT_EQ(d->get_string("version"), "3.0");
  // The deploy it names is the one the control plane has.
  auto shown = mesh({"deploy", "--show", n, "--output", "json"});
  EXPECT_NE(shown.exit_code, 2) << shown.out << shown.err;
  EXPECT_EQ(json(shown.out).get_int("deploy", 0), deploy_id) << shown.out;
}

}  // namespace
}  // namespace mesh::itest
