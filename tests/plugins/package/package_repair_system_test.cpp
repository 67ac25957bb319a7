// The `package` provider after a dpkg that was killed mid-run (label `system`: root, apt, dpkg).
// The binary runs under tests/upgrade/overlay-exec.sh (ctest's emulator): /usr, /etc and /var
// are overlays in a private mount namespace, so the killed dpkg and every install touch only the
// test's own directory, never the machine's package database.
//
// The interruption is real: a test package's postinst SIGKILLs the dpkg that runs it (once),
// which leaves the package half-configured and dpkg's journal unfinished — what a power cut or a
// `kill -9` during an upgrade leaves. apt then refuses every install ("dpkg was interrupted, you
// must manually run 'dpkg --configure -a'"); the provider must repair first and go on.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "package_provider_fixture.h"

namespace mesh::plugins::package::test {
namespace {

namespace fs = std::filesystem;
namespace mt = mesh::testing;
using sdk::ErrorCode;
using sdk::Value;

constexpr const char* kTrap = "nox-mesh-test-pkg-trap";
constexpr const char* kA = "nox-mesh-test-pkg-a";

class PackageRepairSystemTest : public PackageProviderFixture {
 protected:
  void SetUp() override {
    if (getenv("NOX_MESH_TEST_OVERLAY") == nullptr) {
      const char* why = getenv("NOX_MESH_TEST_OVERLAY_SKIP");
      GTEST_SKIP() << "not in an overlay of /usr, /etc, /var (run through tests/upgrade/overlay-exec.sh): "
                   << (why ? why : "not started by it");
    }
    PackageProviderFixture::SetUp();
    if (IsSkipped()) return;
    trigger_ = std::string(getenv("NOX_MESH_TEST_OVERLAY")) + "/kill-dpkg-once";
  }

  sdk::Resource declare(const std::string& name, const std::string& version) {
    return PackageProviderFixture::declare(name, {{"version", version}});
  }

  // validate, read, plan, apply: the apply's result.
  sdk::Result<sdk::State> apply(const sdk::Resource& want) {
    auto valid = provider_->validate(want);
    if (!valid) return sdk::fail(valid.error());
    auto observed = provider_->read(want.rid);
    if (!observed) return sdk::fail(observed.error());
    auto plan = provider_->plan(want, *observed);
    if (!plan) return sdk::fail(plan.error());
    sdk::CancelToken none;
    return provider_->apply(*plan, none);
  }

  std::string trigger_;
};

TEST_F(PackageRepairSystemTest, AnApplyAfterAKilledDpkgRunsConfigureAllFirstAndGoesOn) {
  repo_ = std::make_unique<mt::AptRepo>();
  // postinst: SIGKILL the dpkg running it, once (the trigger file is removed first).
  repo_->add_package({kTrap, "1.0", "", false,
                      "if [ -e '" + trigger_ + "' ]; then rm -f '" + trigger_ +
                          "'; kill -9 \"$PPID\"; fi"});
  repo_->add_package({kA, "1.0"});
  repo_->index();
  repo_->start();
  provider();

  { std::ofstream(trigger_) << "once\n"; }
  auto killed = apply(declare(kTrap, "1.0"));
  ASSERT_FALSE(killed) << "the postinst was to kill dpkg";
  std::cout << "[ observed ] install killed mid-configure: " << killed.error().describe() << std::endl;
  ASSERT_FALSE(fs::exists(trigger_)) << "the postinst did not run";

  // The interruption is what a real one leaves: dpkg --audit reports it, apt refuses.
  auto audit = mt::run_program({"dpkg", "--audit"});
  ASSERT_FALSE(audit.out.empty()) << "dpkg --audit reports nothing after the kill";
  EXPECT_NE(audit.out.find(kTrap), std::string::npos) << audit.out;
  EXPECT_NE(mt::AptRepo::dpkg_fingerprint(kTrap).rfind("i", 0), std::string::npos);
  EXPECT_NE(mt::AptRepo::dpkg_fingerprint(kTrap).substr(0, 3), "ii ")
      << "the killed package reads as installed";
  auto refused = mt::run_program({"apt-get", "-y", "-q", "-o",
                                  "Dir::Etc::sourcelist=" + repo_->sources_file(), "install", kA});
  EXPECT_NE(refused.out.find("dpkg was interrupted"), std::string::npos) << refused.out;
  ASSERT_EQ(mt::AptRepo::installed_version(kA), "") << "apt installed despite the interruption";

  // The next apply of anything repairs first, logs it, and installs.
  auto r = apply(declare(kA, "1.0"));
  ASSERT_TRUE(r) << to_string(r.error().code) << ": " << r.error().describe();
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "1.0");
  EXPECT_TRUE(logged("step=repair", "dpkg --configure -a")) << "the repair was not logged";
  EXPECT_TRUE(logged("step=repair", kTrap)) << "the log does not say what dpkg --audit reported";
  EXPECT_TRUE(logged("outcome=repaired", "dpkg --audit is clean"));
  auto after = mt::run_program({"dpkg", "--audit"});
  EXPECT_EQ(after.out, "") << "dpkg --audit after the repair: " << after.out;
  EXPECT_EQ(mt::AptRepo::dpkg_fingerprint(kTrap).rfind("ii |1.0", 0), 0u)
      << mt::AptRepo::dpkg_fingerprint(kTrap);

  // A consistent database is not "repaired" again.
  const auto before = logger_.lines().size();
  auto again = apply(declare(kA, "1.0"));
  ASSERT_TRUE(again) << again.error().describe();
  for (std::size_t i = before; i < logger_.lines().size(); ++i)
    EXPECT_EQ(logger_.lines()[i].find("step=repair"), std::string::npos) << logger_.lines()[i];
}

TEST_F(PackageRepairSystemTest, ARemovalAfterAKilledDpkgRepairsFirst) {
  repo_ = std::make_unique<mt::AptRepo>();
  repo_->add_package({kTrap, "1.0", "", false,
                      "if [ -e '" + trigger_ + "' ]; then rm -f '" + trigger_ +
                          "'; kill -9 \"$PPID\"; fi"});
  repo_->add_package({kA, "1.0"});
  repo_->index();
  repo_->start();
  provider();
  ASSERT_TRUE(apply(declare(kA, "1.0")));
  { std::ofstream(trigger_) << "once\n"; }
  ASSERT_FALSE(apply(declare(kTrap, "1.0")));
  ASSERT_FALSE(mt::run_program({"dpkg", "--audit"}).out.empty());

  sdk::CancelToken none;
  auto removed = provider_->remove(sdk::ResourceId{"package", kA}, none);
  ASSERT_TRUE(removed) << removed.error().describe();
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "");
  EXPECT_TRUE(logged("step=repair", "dpkg --configure -a"));
  EXPECT_EQ(mt::run_program({"dpkg", "--audit"}).out, "");
}

}  // namespace
}  // namespace mesh::plugins::package::test
