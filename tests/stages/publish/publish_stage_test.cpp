// The publish stage against the real tools (dpkg-deb, apt-ftparchive, gpg, gpgv): every version
// stays in the index, the index is signed by the key made at the first start, and a refused
// publish (wrong digest, not a .deb, a cut .deb, a changed version, another architecture)
// changes nothing in the repository. Label integration: no root, no network.
#include <gtest/gtest.h>

#include <optional>

#include "apt_repository.h"
#include "mesh/sdk/sdk.h"
#include "mesh/testing/temp_dir.h"
#include "publish_stage.h"
#include "publish_test_util.h"

namespace mesh::stages::publish::test {
namespace {

using sdk::ErrorCode;
using sdk::Value;

// The parts of a StageContext the publish stage uses.
class Context final : public sdk::StageContext {
 public:
  explicit Context(std::string work) : work_(std::move(work)) {}
  std::uint64_t run_id() const noexcept override { return 0; }
  std::string operator_name() const override { return "tester"; }
  std::string work_dir() const override { return work_; }
  const Value& artifacts() const override { return artifacts_; }
  void log(std::string_view line) override { lines.emplace_back(line); }
  sdk::Result<Value> deploy(const std::string&, const std::string&, const Value&) override {
    return sdk::fail(ErrorCode::Unsupported, "no deploy here");
  }
  Value artifacts_ = Value::object();
  std::vector<std::string> lines;

 private:
  std::string work_;
};

class PublishStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.logger = &logger_;
    host_.role = "tool";
    host_.state_dir = (dir() / "state").string();
    fs::create_directories(host_.state_dir);
    fs::create_directories(dir() / "work");
  }
  fs::path dir() const { return tmp_.path(); }
  fs::path repo() const { return dir() / "repo"; }

  std::unique_ptr<PublishStage> stage() {
    auto s = std::make_unique<PublishStage>(host_);
    Value config = Value::object();
    config.set("repository", repo().string());
    auto checked = sdk::validate_against(s->config_schema(), config, "stages.publish");
    EXPECT_TRUE(checked) << checked.error().describe();
    auto ok = s->configure(sdk::apply_defaults(s->config_schema(), config));
    EXPECT_TRUE(ok) << ok.error().describe();
    return s;
  }

  sdk::Result<sdk::StageOutput> publish(PublishStage& s, const fs::path& deb, const std::string& sha256 = "") {
    Context ctx((dir() / "work").string());
    sdk::StageInput in;
    in.params.set("package", deb.string());
    if (!sha256.empty()) in.params.set("sha256", sha256);
    sdk::CancelToken cancel;
    return s.run(in, ctx, cancel);
  }

  std::string packages(const std::string& arch = "amd64") {
    return slurp(repo() / "dists" / "mesh" / "main" / ("binary-" + arch) / "Packages");
  }

  mesh::testing::TempDir tmp_;
  sdk::NullLogger logger_;
  sdk::HostContext host_;
};

TEST_F(PublishStageTest, EveryVersionStaysInTheSignedIndex) {
  auto s = stage();
  ASSERT_TRUE(s->repository());
  const std::string fpr = s->repository()->fingerprint();
  EXPECT_EQ(fpr.size(), 40u);
  // The first start wrote a signed empty index and the public key.
  EXPECT_TRUE(fs::exists(repo() / "dists" / "mesh" / "InRelease"));
  EXPECT_NE(slurp(repo() / "mesh-repository.asc").find("BEGIN PGP PUBLIC KEY BLOCK"), std::string::npos);
  EXPECT_EQ(fs::status(dir() / "state" / "gnupg").permissions() & fs::perms::all, fs::perms::owner_all);

  const auto v1 = build_deb(dir(), "nox-mesh-test-pub", "1.0");
  const auto v2 = build_deb(dir(), "nox-mesh-test-pub", "2.0");
  const auto arch = build_deb(dir(), "nox-mesh-test-arch", "1:3.1-2", "amd64");
  auto d1 = file_sha256(v1.string());
  ASSERT_TRUE(d1);
  auto r1 = publish(*s, v1, *d1);
  ASSERT_TRUE(r1) << r1.error().describe();
  const Value& p1 = r1->artifacts.find("packages")->as_array().at(0);
  EXPECT_EQ(p1.get_string("name"), "nox-mesh-test-pub");
  EXPECT_EQ(p1.get_string("version"), "1.0");
  EXPECT_EQ(p1.get_string("architecture"), "all");
  EXPECT_EQ(p1.get_string("sha256"), *d1);
  EXPECT_EQ(p1.get_string("filename"), "pool/main/nox-mesh-test-pub/nox-mesh-test-pub_1.0_all.deb");
  EXPECT_FALSE(p1.get_bool("already", true));
  EXPECT_EQ(r1->artifacts.find("repository")->get_string("fingerprint"), fpr);
  auto r2 = publish(*s, v2);
  ASSERT_TRUE(r2) << r2.error().describe();
  auto r3 = publish(*s, arch);
  ASSERT_TRUE(r3) << r3.error().describe();
  EXPECT_EQ(r3->artifacts.find("packages")->as_array().at(0).get_string("filename"),
            "pool/main/nox-mesh-test-arch/nox-mesh-test-arch_3.1-2_amd64.deb");

  // Both versions of the `all` package in every architecture, the amd64 one in amd64 only.
  for (const std::string a : {"amd64", "arm64"}) {
    const std::string idx = packages(a);
    EXPECT_NE(idx.find("Package: nox-mesh-test-pub\n"), std::string::npos) << a << "\n" << idx;
    EXPECT_NE(idx.find("Version: 1.0\n"), std::string::npos) << a << "\n" << idx;
    EXPECT_NE(idx.find("Version: 2.0\n"), std::string::npos) << a << "\n" << idx;
    EXPECT_NE(idx.find("SHA256: " + *d1), std::string::npos) << a << "\n" << idx;
    EXPECT_EQ(idx.find("Version: 1:3.1-2\n") != std::string::npos, a == "amd64") << a << "\n" << idx;
  }
  const std::string release = slurp(repo() / "dists" / "mesh" / "Release");
  EXPECT_NE(release.find("Codename: mesh"), std::string::npos) << release;
  EXPECT_NE(release.find("Components: main"), std::string::npos) << release;
  EXPECT_NE(release.find("main/binary-amd64/Packages.gz"), std::string::npos) << release;

  // InRelease and Release.gpg verify with the exported key (gpgv, as apt does).
  auto dearmored = mesh::testing::run_process({"/usr/bin/gpg", "--batch", "--homedir", (dir() / "state" / "gnupg").string(),
                                               "--output", (dir() / "key.gpg").string(), "--dearmor",
                                               (repo() / "mesh-repository.asc").string()});
  ASSERT_EQ(dearmored.exit_code, 0) << dearmored.err;
  auto clear = mesh::testing::run_process({"/usr/bin/gpgv", "--keyring", (dir() / "key.gpg").string(),
                                           (repo() / "dists" / "mesh" / "InRelease").string()});
  EXPECT_EQ(clear.exit_code, 0) << clear.out << clear.err;
  auto detached = mesh::testing::run_process({"/usr/bin/gpgv", "--keyring", (dir() / "key.gpg").string(),
                                              (repo() / "dists" / "mesh" / "Release.gpg").string(),
                                              (repo() / "dists" / "mesh" / "Release").string()});
  EXPECT_EQ(detached.exit_code, 0) << detached.out << detached.err;
  // No half-built index, no incoming file is left.
  for (const auto& e : fs::recursive_directory_iterator(repo())) {
    const std::string n = e.path().filename().string();
    EXPECT_TRUE(n == ".lock" || n == ".signed-by" || n[0] != '.') << e.path();
  }

  // apt-ftparchive's cache of the pool files is kept beside the key, outside the repository.
  EXPECT_TRUE(fs::exists(dir() / "state" / "packages.db"));

  // A restart keeps the key and writes nothing.
  const auto before = snapshot(repo());
  s.reset();
  auto again = stage();
  EXPECT_EQ(again->repository()->fingerprint(), fpr);
  EXPECT_EQ(snapshot(repo()), before);
}

TEST_F(PublishStageTest, RefusedPublishesChangeNothing) {
  auto s = stage();
  const auto good = build_deb(dir(), "nox-mesh-test-pub", "1.0");
  ASSERT_TRUE(publish(*s, good));
  const auto before = snapshot(repo());

  auto expect_refused = [&](const fs::path& deb, const std::string& sha, ErrorCode code, const std::string& says) {
    auto r = publish(*s, deb, sha);
    ASSERT_FALSE(r) << deb;
    EXPECT_EQ(r.error().code, code) << r.error().describe();
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().describe();
    std::cout << "[ observed ] " << r.error().describe() << "\n";
    EXPECT_EQ(snapshot(repo()), before) << "the repository changed after: " << r.error().describe();
  };
  const auto other = build_deb(dir() / "x", "nox-mesh-test-other", "1.0");
  expect_refused(other, std::string(64, '0'), ErrorCode::InvalidArgument, "not " + std::string(64, '0') + " as announced");

  spit(dir() / "garbage.deb", "this is not a package\n");
  expect_refused(dir() / "garbage.deb", "", ErrorCode::InvalidArgument, "not a Debian binary package");

  // A .deb cut short, announced with the digest of what is left.
  const std::string whole = slurp(other);
  spit(dir() / "cut.deb", whole.substr(0, whole.size() / 2));
  auto cut_digest = file_sha256((dir() / "cut.deb").string());
  ASSERT_TRUE(cut_digest);
  expect_refused(dir() / "cut.deb", *cut_digest, ErrorCode::InvalidArgument, "not a valid .deb");

  // The same version again with other content: a published version never changes.
  const auto changed = build_deb(dir() / "y", "nox-mesh-test-pub", "1.0", "all", " (changed)");
  expect_refused(changed, "", ErrorCode::AlreadyExists, "already published with other content");
  // ... saying how to make a rebuild of the same version byte-identical.
  expect_refused(changed, "", ErrorCode::AlreadyExists, "SOURCE_DATE_EPOCH");

  const auto armhf = build_deb(dir() / "z", "nox-mesh-test-arm", "1.0", "armhf");
  expect_refused(armhf, "", ErrorCode::InvalidArgument, "architecture armhf is not one of this repository's");

  // The same file again: already published, nothing written.
  auto same = publish(*s, good);
  ASSERT_TRUE(same) << same.error().describe();
  EXPECT_TRUE(same->artifacts.find("packages")->as_array().at(0).get_bool("already", false));
  EXPECT_EQ(snapshot(repo()), before);
}

// In a pipeline run the .deb must be the run's version (or it with a Debian revision or an
// epoch): another version fails the stage naming both and the file, and the repository is
// unchanged; check_version = false turns it off; without a pipeline (mesh publish) no check.
TEST_F(PublishStageTest, InAPipelineRunAPackageOfAnotherVersionThanTheRunsIsRefused) {
  auto s = stage();
  auto run = [&](const fs::path& deb, const std::string& version, std::optional<bool> check = std::nullopt,
                 const std::string& pipeline = "hello") {
    Context ctx((dir() / "work").string());
    sdk::StageInput in;
    in.pipeline = pipeline;
    in.params.set("package", deb.string());
    in.params.set("version", version);
    in.params.set("build_user", "");
    if (check) in.params.set("check_version", *check);
    sdk::CancelToken cancel;
    return s->run(in, ctx, cancel);
  };
  const auto v123 = build_deb(dir(), "nox-mesh-test-ver", "1.2.3");
  const auto before = snapshot(repo());
  auto wrong = run(v123, "1.2.4");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, ErrorCode::InvalidArgument);
  const std::string m = wrong.error().message;
  EXPECT_NE(m.find(v123.string()), std::string::npos) << m;
  EXPECT_NE(m.find("Version is 1.2.3"), std::string::npos) << m;
  EXPECT_NE(m.find("run's version 1.2.4"), std::string::npos) << m;
  EXPECT_EQ(snapshot(repo()), before) << m;
  // The whole version is compared: a prefix or a longer version is another version.
  EXPECT_FALSE(run(v123, "1.2"));
  EXPECT_FALSE(run(build_deb(dir() / "b", "nox-mesh-test-ver", "1.2.30"), "1.2.3"));
  EXPECT_FALSE(run(build_deb(dir() / "c", "nox-mesh-test-ver", "1.2.3-rc1-1"), "1.2.3"));
  EXPECT_EQ(snapshot(repo()), before);

  // The run's version, with a revision, with an epoch: published.
  auto same = run(v123, "1.2.3");
  ASSERT_TRUE(same) << same.error().describe();
  auto rev = run(build_deb(dir() / "d", "nox-mesh-test-ver", "1.2.5-1"), "1.2.5");
  ASSERT_TRUE(rev) << rev.error().describe();
  auto epoch = run(build_deb(dir() / "e", "nox-mesh-test-epoch", "2:1.2.6"), "1.2.6");
  ASSERT_TRUE(epoch) << epoch.error().describe();
  auto both = run(build_deb(dir() / "f", "nox-mesh-test-epoch", "2:1.2.7-3"), "1.2.7");
  ASSERT_TRUE(both) << both.error().describe();

  // Turned off by the pipeline file; not checked outside a pipeline (mesh publish FILE).
  const auto v200 = build_deb(dir() / "g", "nox-mesh-test-off", "2.0.0");
  auto off = run(v200, "2.0.1", false);
  ASSERT_TRUE(off) << off.error().describe();
  auto plain = run(build_deb(dir() / "h", "nox-mesh-test-plain", "3.0"), "3.1", std::nullopt, "");
  ASSERT_TRUE(plain) << plain.error().describe();
}

TEST(PublishVersion, TheRunsVersionWithARevisionOrAnEpoch) {
  EXPECT_TRUE(version_is_the_runs("1.2.3", "1.2.3"));
  EXPECT_TRUE(version_is_the_runs("1.2.3-1", "1.2.3"));
  EXPECT_TRUE(version_is_the_runs("2:1.2.3", "1.2.3"));
  EXPECT_TRUE(version_is_the_runs("2:1.2.3-0ubuntu1", "1.2.3"));
  EXPECT_TRUE(version_is_the_runs("1.2-3", "1.2-3"));
  EXPECT_FALSE(version_is_the_runs("1.2.3", "1.2.4"));
  EXPECT_FALSE(version_is_the_runs("1.2.30", "1.2.3"));
  EXPECT_FALSE(version_is_the_runs("1.2.3", "1.2"));
  EXPECT_FALSE(version_is_the_runs("1.2.3-", "1.2.3"));
  EXPECT_FALSE(version_is_the_runs("1.2.3-rc1-1", "1.2.3"));
  EXPECT_FALSE(version_is_the_runs("x:1.2.3", "1.2.3"));
  EXPECT_FALSE(version_is_the_runs("1.2.3", ""));
}

TEST_F(PublishStageTest, PublishesTheDebArtifactsOfEarlierStages) {
  auto s = stage();
  const auto deb = build_deb(dir(), "nox-mesh-test-built", "0.1");
  auto digest = file_sha256(deb.string());
  ASSERT_TRUE(digest);
  Context ctx((dir() / "work").string());
  Value file = Value::object();
  file.set("path", deb.string());
  file.set("sha256", *digest);
  Value build = Value::object();
  build.set("files", Value(Value::Array{file}));
  ctx.artifacts_.set("build", build);
  sdk::StageInput in;
  sdk::CancelToken cancel;
  auto r = s->run(in, ctx, cancel);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->artifacts.find("packages")->as_array().at(0).get_string("name"), "nox-mesh-test-built");
  ASSERT_FALSE(ctx.lines.empty());
  EXPECT_NE(ctx.lines.back().find("published: nox-mesh-test-built 0.1 (all)"), std::string::npos) << ctx.lines.back();

  // Nothing to publish is bad input naming the param.
  Context empty((dir() / "work").string());
  auto none = s->run(in, empty, cancel);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(none.error().path, "package");
}

TEST_F(PublishStageTest, BadConfigIsRefusedNamingTheKey) {
  PublishStage s(host_);
  Value config = Value::object();
  config.set("repository", "relative/dir");
  auto r = s.configure(sdk::apply_defaults(s.config_schema(), config));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "repository");
  config.set("repository", repo().string());
  config.set("architectures", Value(Value::Array{Value("all")}));
  r = s.configure(sdk::apply_defaults(s.config_schema(), config));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "architectures");
  EXPECT_FALSE(fs::exists(repo())) << "a refused config writes nothing";
}

}  // namespace
}  // namespace mesh::stages::publish::test
