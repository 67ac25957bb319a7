// System tests of the `package` provider against the real apt and dpkg (label `system`: needs
// root). Every package comes from a throw-away repository served on 127.0.0.1 (AptRepo) and is
// named nox-mesh-test-*; each test purges what it installed. Failure cases check the error code,
// that apt's own error line is quoted, and that the installed version did not change.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "package_provider_fixture.h"

namespace mesh::plugins::package::test {
namespace {

namespace fs = std::filesystem;
namespace mt = mesh::testing;
using sdk::ErrorCode;
using sdk::PlanAction;
using sdk::Value;

// Prints a failure message so a run's log shows exactly what operators would read.
void show(const char* what, const sdk::Error& e) {
  std::cout << "[ observed ] " << what << ": " << to_string(e.code) << ": " << e.describe()
            << std::endl;
}

class PackageProviderTest : public PackageProviderFixture {
 protected:
  // A served repository with the given packages; `isolate` as in AptRepoOptions.
  mt::AptRepo& serve(std::initializer_list<mt::AptTestPackage> packages, bool isolate = true) {
    repo_ = std::make_unique<mt::AptRepo>(mt::AptRepoOptions{isolate});
    for (const auto& p : packages) repo_->add_package(p);
    repo_->index();
    repo_->start();
    return *repo_;
  }

  // One engine round: validate, read, plan, apply (when the plan is not empty), read back, plan.
  struct Round {
    sdk::Plan plan;
    std::optional<sdk::Result<sdk::State>> applied;
    std::optional<sdk::State> read_back;
    sdk::Plan after;
    bool ok() const { return !applied || applied->has_value(); }
    const sdk::Error& error() const { return applied->error(); }
  };
  Round round(const sdk::Resource& want, const sdk::CancelToken* cancel = nullptr) {
    Round r;
    auto valid = provider_->validate(want);
    EXPECT_TRUE(valid) << valid.error().describe();
    auto observed = provider_->read(want.rid);
    EXPECT_TRUE(observed) << observed.error().describe();
    if (!observed) return r;
    auto plan = provider_->plan(want, *observed);
    EXPECT_TRUE(plan) << plan.error().describe();
    if (!plan) return r;
    r.plan = *plan;
    if (!plan->empty()) {
      sdk::CancelToken none;
      r.applied = provider_->apply(*plan, cancel ? *cancel : none);
    }
    auto back = provider_->read(want.rid);
    EXPECT_TRUE(back) << back.error().describe();
    if (back) r.read_back = *back;
    auto after = provider_->plan(want, r.read_back);
    EXPECT_TRUE(after) << after.error().describe();
    if (after) r.after = *after;
    return r;
  }

  // A round that must succeed and converge.
  void converge(const sdk::Resource& want) {
    Round r = round(want);
    ASSERT_TRUE(r.ok()) << to_string(r.error().code) << ": " << r.error().describe();
    ASSERT_TRUE(r.after.empty()) << "read-back plan not empty for " << want.properties.to_json()
                                 << "; read back "
                                 << (r.read_back ? r.read_back->properties.to_json() : "nullopt");
  }

  // An apply after a required sources file changed (the engine passes it as notified_by), so the
  // provider runs `apt-get update` first, whatever the plan.
  sdk::Result<void> apply_notified(const sdk::Resource& want, sdk::ApplyResponse& applied,
                                   const sdk::CancelToken* cancel = nullptr) {
    auto observed = provider_->read(want.rid);
    EXPECT_TRUE(observed) << observed.error().describe();
    if (!observed) return sdk::fail(observed.error());
    sdk::PlanRequest plan_req;
    plan_req.desired = want;
    plan_req.observed = *observed;
    plan_req.notified_by = {sdk::ResourceId{"file", repo_->sources_file()}};
    sdk::PlanResponse notified;
    auto planned = provider_->plan(plan_req, notified);
    EXPECT_TRUE(planned) << planned.error().describe();
    if (!planned) return planned;
    sdk::CancelToken none;
    sdk::ApplyRequest apply_req;
    apply_req.plan = notified.plan;
    apply_req.cancel = cancel ? cancel : &none;
    apply_req.notified_by = plan_req.notified_by;
    return provider_->apply(apply_req, applied);
  }

};

constexpr const char* kA = "nox-mesh-test-pkg-a";

TEST_F(PackageProviderTest, InstallsExactVersion) {
  serve({{kA, "1.0"}, {kA, "2.0"}});
  provider();
  auto before = provider_->read({"package", kA});
  ASSERT_TRUE(before);
  EXPECT_FALSE(before->has_value());
  Round r = round(declare(kA, {{"version", "1.0"}}));
  EXPECT_EQ(r.plan.action, PlanAction::Create);
  ASSERT_TRUE(r.ok()) << r.error().describe();
  EXPECT_EQ((*r.applied)->properties.get_string("version"), "1.0");
  EXPECT_TRUE(r.after.empty());
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "1.0");
  ASSERT_TRUE(r.read_back);
  EXPECT_EQ(r.read_back->properties.get_string("ensure"), "present");
  EXPECT_EQ(r.read_back->properties.get_string("candidate"), "2.0");
  EXPECT_FALSE(r.read_back->properties.get_bool("hold", true));
  // A second round is empty and changes nothing.
  Round again = round(declare(kA, {{"version", "1.0"}}));
  EXPECT_TRUE(again.plan.empty());
  EXPECT_FALSE(again.applied.has_value());
}

TEST_F(PackageProviderTest, UpgradesAndDowngrades) {
  serve({{kA, "1.0"}, {kA, "2.0"}});
  provider();
  ASSERT_NO_FATAL_FAILURE(converge(declare(kA, {{"version", "1.0"}})));
  Round up = round(declare(kA, {{"version", "2.0"}}));
  EXPECT_EQ(up.plan.action, PlanAction::Update);
  ASSERT_TRUE(up.ok()) << up.error().describe();
  EXPECT_TRUE(up.after.empty());
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "2.0");
  Round down = round(declare(kA, {{"version", "1.0"}}));
  EXPECT_EQ(down.plan.action, PlanAction::Update);
  ASSERT_TRUE(down.ok()) << down.error().describe();
  EXPECT_TRUE(down.after.empty());
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "1.0");
}

TEST_F(PackageProviderTest, PresentIsSatisfiedByAnyVersion) {
  constexpr const char* kB = "nox-mesh-test-pkg-b";
  serve({{kA, "1.0"}, {kA, "2.0"}, {kB, "1.0"}, {kB, "1.5"}});
  provider();
  ASSERT_NO_FATAL_FAILURE(converge(declare(kA, {{"version", "1.0"}})));
  Round present = round(declare(kA, {{"version", "present"}}));
  EXPECT_TRUE(present.plan.empty()) << "2.0 is available, yet 1.0 satisfies `present`";
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "1.0");
  // From nothing, `present` installs the candidate.
  Round fresh = round(declare(kB, {}));
  EXPECT_EQ(fresh.plan.action, PlanAction::Create);
  ASSERT_TRUE(fresh.ok()) << fresh.error().describe();
  EXPECT_TRUE(fresh.after.empty());
  EXPECT_EQ(mt::AptRepo::installed_version(kB), "1.5");
}

TEST_F(PackageProviderTest, LatestInstallsTheCandidateAndRefreshesOnRequest) {
  serve({{kA, "1.0"}, {kA, "2.0"}});
  provider();
  ASSERT_NO_FATAL_FAILURE(converge(declare(kA, {{"version", "1.0"}})));
  Round latest = round(declare(kA, {{"version", "latest"}}));
  EXPECT_EQ(latest.plan.action, PlanAction::Update);
  ASSERT_TRUE(latest.ok()) << latest.error().describe();
  EXPECT_TRUE(latest.after.empty());
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "2.0");

  // 3.0 appears in the repository; apt's index does not know yet, so the plan is empty...
  repo_->add_package({kA, "3.0"});
  repo_->index();
  const auto want = declare(kA, {{"version", "latest"}});
  auto observed = provider_->read(want.rid);
  ASSERT_TRUE(observed && *observed);
  EXPECT_EQ((*observed)->properties.get_string("candidate"), "2.0");
  auto plan = provider_->plan(want, *observed);
  ASSERT_TRUE(plan);
  EXPECT_TRUE(plan->empty());
  // ... until a required sources file changed (the engine passes it as notified_by): then the
  // plan is the provider's refresh_index change, and apply refreshes that source, installs what
  // the fresh index offers and says what that changed.
  sdk::PlanRequest plan_req;
  plan_req.desired = want;
  plan_req.observed = *observed;
  plan_req.notified_by = {sdk::ResourceId{"file", "/etc/apt/sources.list.d/test.list"}};
  sdk::PlanResponse notified;
  ASSERT_TRUE(provider_->plan(plan_req, notified));
  ASSERT_EQ(notified.plan.changes.size(), 1u);
  EXPECT_EQ(notified.plan.changes[0].path, kRefreshIndexKey);
  EXPECT_EQ(notified.plan.action, sdk::PlanAction::Update);
  sdk::CancelToken cancel;
  sdk::ApplyRequest apply_req;
  apply_req.plan = notified.plan;
  apply_req.cancel = &cancel;
  apply_req.notified_by = plan_req.notified_by;
  sdk::ApplyResponse applied;
  auto ok = provider_->apply(apply_req, applied);
  ASSERT_TRUE(ok) << ok.error().describe();
  EXPECT_EQ(applied.state.properties.get_string("version"), "3.0");
  ASSERT_TRUE(applied.changed.has_value());
  ASSERT_EQ(applied.changed->size(), 2u);
  EXPECT_EQ((*applied.changed)[0].path, "properties.version");
  EXPECT_EQ((*applied.changed)[1].path, kRefreshIndexKey);
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "3.0");
  auto back = provider_->read(want.rid);
  ASSERT_TRUE(back);
  auto after = provider_->plan(want, *back);
  ASSERT_TRUE(after);
  EXPECT_TRUE(after->empty());
}

TEST_F(PackageProviderTest, RemoveKeepsConfigurationAndPurgeDeletesIt) {
  constexpr const char* kConf = "nox-mesh-test-pkg-conf";
  const std::string conf = std::string("/etc/nox-mesh-test/") + kConf + ".conf";
  serve({{kConf, "1.0", "", /*conffile=*/true}});
  provider();
  ASSERT_NO_FATAL_FAILURE(converge(declare(kConf, {{"version", "1.0"}})));
  ASSERT_TRUE(fs::exists(conf));

  Round removed = round(declare(kConf, {{"ensure", "absent"}}));
  EXPECT_EQ(removed.plan.action, PlanAction::Remove);
  ASSERT_TRUE(removed.ok()) << removed.error().describe();
  EXPECT_TRUE(removed.after.empty());
  ASSERT_TRUE(removed.read_back) << "configuration files remain, so dpkg still knows it";
  EXPECT_EQ(removed.read_back->properties.get_string("ensure"), "absent");
  EXPECT_EQ(mt::AptRepo::installed_version(kConf), "");
  EXPECT_TRUE(fs::exists(conf)) << "remove must keep configuration files";

  Round purged = round(declare(kConf, {{"ensure", "purged"}}));
  EXPECT_EQ(purged.plan.action, PlanAction::Remove);
  ASSERT_TRUE(purged.ok()) << purged.error().describe();
  EXPECT_EQ((*purged.applied)->properties.get_string("ensure"), "purged");
  EXPECT_FALSE(purged.read_back.has_value());
  EXPECT_TRUE(purged.after.empty());
  EXPECT_FALSE(fs::exists(conf));
  EXPECT_EQ(mt::AptRepo::dpkg_fingerprint(kConf), "unknown");

  // remove() is idempotent.
  ASSERT_NO_FATAL_FAILURE(converge(declare(kConf, {{"version", "1.0"}})));
  sdk::CancelToken cancel;
  auto first = provider_->remove({"package", kConf}, cancel);
  ASSERT_TRUE(first) << first.error().describe();
  auto second = provider_->remove({"package", kConf}, cancel);
  ASSERT_TRUE(second) << second.error().describe();
  EXPECT_EQ(mt::AptRepo::installed_version(kConf), "");
}

TEST_F(PackageProviderTest, HoldsAndReleases) {
  serve({{kA, "1.0"}, {kA, "2.0"}});
  provider();
  Round held = round(declare(kA, {{"version", "1.0"}, {"hold", true}}));
  ASSERT_TRUE(held.ok()) << held.error().describe();
  EXPECT_TRUE(held.after.empty());
  ASSERT_TRUE(held.read_back);
  EXPECT_TRUE(held.read_back->properties.get_bool("hold", false));
  EXPECT_EQ(mt::AptRepo::dpkg_fingerprint(kA).substr(0, 3), "hi ");
  auto showhold = mt::run_program({"apt-mark", "showhold"});
  EXPECT_NE(showhold.out.find(kA), std::string::npos) << showhold.out;

  // A held package still moves to a version the declaration names, and stays held.
  Round moved = round(declare(kA, {{"version", "2.0"}, {"hold", true}}));
  ASSERT_TRUE(moved.ok()) << moved.error().describe();
  EXPECT_TRUE(moved.after.empty());
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "2.0");
  EXPECT_EQ(mt::AptRepo::dpkg_fingerprint(kA).substr(0, 3), "hi ");

  Round released = round(declare(kA, {{"version", "2.0"}}));
  EXPECT_EQ(released.plan.action, PlanAction::Update);
  ASSERT_TRUE(released.ok()) << released.error().describe();
  EXPECT_TRUE(released.after.empty());
  EXPECT_EQ(mt::AptRepo::dpkg_fingerprint(kA).substr(0, 3), "ii ");
}

TEST_F(PackageProviderTest, MissingDebFailsAndKeepsTheInstalledVersion) {
  serve({{kA, "1.0"}, {kA, "2.0"}});
  provider();
  ASSERT_NO_FATAL_FAILURE(converge(declare(kA, {{"version", "1.0"}})));
  repo_->remove_deb(kA, "2.0");  // still in the index: the download 404s
  Round r = round(declare(kA, {{"version", "2.0"}}));
  ASSERT_TRUE(r.applied.has_value());
  ASSERT_FALSE(r.ok()) << "a 404 reported as success";
  show("404", r.error());
  EXPECT_EQ(r.error().code, ErrorCode::Failed);
  EXPECT_NE(r.error().message.find("E: Failed to fetch http://127.0.0.1:"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("404"), std::string::npos) << r.error().message;
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "1.0");
  EXPECT_FALSE(r.after.empty()) << "the engine must see the resource as not applied";
}

TEST_F(PackageProviderTest, DeadMirrorFailsAndKeepsTheInstalledVersion) {
  serve({{kA, "1.0"}, {kA, "2.0"}});
  provider();
  ASSERT_NO_FATAL_FAILURE(converge(declare(kA, {{"version", "1.0"}})));
  repo_->stop();

  // `latest` refreshes the index first: apt-get update must fail, not warn (--error-on=any).
  Round latest = round(declare(kA, {{"version", "latest"}}));
  ASSERT_TRUE(latest.applied.has_value());
  ASSERT_FALSE(latest.ok()) << "a dead mirror reported as success";
  show("dead mirror, refresh", latest.error());
  EXPECT_EQ(latest.error().code, ErrorCode::Failed);
  EXPECT_NE(latest.error().message.find("apt-get update"), std::string::npos);
  EXPECT_NE(latest.error().message.find("E: Failed to fetch http://127.0.0.1:"), std::string::npos)
      << latest.error().message;
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "1.0");

  // A version already in the index: the download itself fails.
  Round exact = round(declare(kA, {{"version", "2.0"}}));
  ASSERT_TRUE(exact.applied.has_value());
  ASSERT_FALSE(exact.ok());
  show("dead mirror, download", exact.error());
  EXPECT_EQ(exact.error().code, ErrorCode::Failed);
  EXPECT_NE(exact.error().message.find("Could not connect"), std::string::npos)
      << exact.error().message;
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "1.0");
}

TEST_F(PackageProviderTest, BusyDpkgLockTimesOut) {
  serve({{kA, "1.0"}, {kA, "2.0"}});
  provider("2s", "1m");
  ASSERT_NO_FATAL_FAILURE(converge(declare(kA, {{"version", "1.0"}})));
  mt::DpkgLockHolder lock;
  const auto started = std::chrono::steady_clock::now();
  Round r = round(declare(kA, {{"version", "2.0"}}));
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(r.applied.has_value());
  ASSERT_FALSE(r.ok());
  show("dpkg lock", r.error());
  EXPECT_EQ(r.error().code, ErrorCode::Timeout);
  EXPECT_NE(r.error().message.find("Could not get lock /var/lib/dpkg/lock-frontend"),
            std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("lock_timeout"), std::string::npos);
  EXPECT_GE(took, std::chrono::seconds(2));
  EXPECT_LT(took, std::chrono::seconds(30));
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "1.0");
}

TEST_F(PackageProviderTest, CancelStopsAWaitingApt) {
  serve({{kA, "1.0"}, {kA, "2.0"}});
  provider("60s", "2m");
  ASSERT_NO_FATAL_FAILURE(converge(declare(kA, {{"version", "1.0"}})));
  mt::DpkgLockHolder lock;
  const auto started = std::chrono::steady_clock::now();
  sdk::CancelToken cancel(started + std::chrono::milliseconds(1500));
  Round r = round(declare(kA, {{"version", "2.0"}}), &cancel);
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(r.applied.has_value());
  ASSERT_FALSE(r.ok());
  show("cancelled", r.error());
  EXPECT_EQ(r.error().code, ErrorCode::Cancelled);
  EXPECT_LT(took, std::chrono::seconds(20)) << "apt was not stopped";
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "1.0");
}

// `apt-get update` takes apt's lists lock without waiting (DPkg::Lock::Timeout covers only the
// dpkg locks): the provider retries it while the lock is busy, up to lock_timeout. The lock held
// here is the test's own (the isolated Dir::State::lists), never the host's.
TEST_F(PackageProviderTest, BusyListsLockIsWaitedFor) {
  serve({{kA, "1.0"}, {kA, "2.0"}});
  provider("30s", "1m");
  ASSERT_NO_FATAL_FAILURE(converge(declare(kA, {{"version", "1.0"}})));
  repo_->add_package({kA, "3.0"});
  repo_->index();
  const std::string lock = repo_->lists_dir() + "/lock";
  mt::FileLockHolder held(lock, std::chrono::seconds(3));
  sdk::ApplyResponse applied;
  auto ok = apply_notified(declare(kA, {{"version", "latest"}}), applied);
  ASSERT_TRUE(ok) << to_string(ok.error().code) << ": " << ok.error().describe();
  EXPECT_EQ(applied.state.properties.get_string("version"), "3.0");
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "3.0");
  EXPECT_TRUE(logged("waiting for lock=" + lock, "step=refresh_index"))
      << "the provider did not say it waited for the lists lock";
  EXPECT_TRUE(logged("lock=" + lock + " waited=", "released"));
}

TEST_F(PackageProviderTest, BusyListsLockTimesOut) {
  serve({{kA, "1.0"}, {kA, "2.0"}});
  provider("2s", "1m");
  ASSERT_NO_FATAL_FAILURE(converge(declare(kA, {{"version", "1.0"}})));
  const std::string lock = repo_->lists_dir() + "/lock";
  mt::FileLockHolder held(lock);
  const auto started = std::chrono::steady_clock::now();
  sdk::ApplyResponse applied;
  auto r = apply_notified(declare(kA, {{"version", "latest"}}), applied);
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(r) << "a busy lists lock reported as success";
  show("lists lock", r.error());
  EXPECT_EQ(r.error().code, ErrorCode::Timeout);
  EXPECT_NE(r.error().message.find("apt-get update"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("the lock " + lock + " stayed busy for "), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("(lock_timeout 2s)"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("dpkg lock"), std::string::npos) << r.error().message;
  EXPECT_GE(took, std::chrono::seconds(2)) << "it did not wait for lock_timeout";
  EXPECT_LT(took, std::chrono::seconds(30));
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "1.0");
}

TEST_F(PackageProviderTest, CancelStopsTheWaitForTheListsLock) {
  serve({{kA, "1.0"}});
  provider("60s", "2m");
  ASSERT_NO_FATAL_FAILURE(converge(declare(kA, {{"version", "1.0"}})));
  mt::FileLockHolder held(repo_->lists_dir() + "/lock");
  const auto started = std::chrono::steady_clock::now();
  sdk::CancelToken cancel(started + std::chrono::milliseconds(1500));
  sdk::ApplyResponse applied;
  auto r = apply_notified(declare(kA, {{"version", "latest"}}), applied, &cancel);
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(r);
  show("cancelled while waiting for the lists lock", r.error());
  EXPECT_EQ(r.error().code, ErrorCode::Cancelled) << r.error().message;
  EXPECT_LT(took, std::chrono::seconds(20)) << "the wait was not stopped";
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "1.0");
}

// A version that is not in the repository is apt's error, not a lock timeout, even when apt
// first waited for a lock: the lists lock (`apt-get update` retried), then the dpkg frontend lock
// (apt-get waits by itself and says so: "Waiting for cache lock: Could not get lock ...").
TEST_F(PackageProviderTest, UnknownVersionAfterALockWaitFails) {
  serve({{kA, "1.0"}});
  provider("30s", "1m");
  ASSERT_NO_FATAL_FAILURE(converge(declare(kA, {{"version", "1.0"}})));
  {
    mt::FileLockHolder held(repo_->lists_dir() + "/lock", std::chrono::seconds(2));
    sdk::ApplyResponse applied;
    auto r = apply_notified(declare(kA, {{"version", "9.9"}}), applied);
    ASSERT_FALSE(r);
    show("unknown version after the lists lock", r.error());
    EXPECT_EQ(r.error().code, ErrorCode::Failed) << r.error().message;
    EXPECT_NE(
        r.error().message.find(std::string("E: Version '9.9' for '") + kA + "' was not found"),
        std::string::npos)
        << r.error().message;
    EXPECT_EQ(r.error().message.find("stayed busy"), std::string::npos) << r.error().message;
  }
  {
    mt::DpkgLockHolder held(std::chrono::seconds(2));
    Round r = round(declare(kA, {{"version", "9.9"}}));
    ASSERT_TRUE(r.applied.has_value());
    ASSERT_FALSE(r.ok());
    show("unknown version after the dpkg lock", r.error());
    EXPECT_EQ(r.error().code, ErrorCode::Failed) << r.error().message;
    EXPECT_NE(
        r.error().message.find(std::string("E: Version '9.9' for '") + kA + "' was not found"),
        std::string::npos)
        << r.error().message;
    EXPECT_EQ(r.error().message.find("stayed busy"), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.find("Could not get lock"), std::string::npos)
        << r.error().message;
  }
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "1.0");
}

TEST_F(PackageProviderTest, BrokenDependencyFails) {
  constexpr const char* kBroken = "nox-mesh-test-pkg-broken";
  serve({{kBroken, "1.0", "nox-mesh-test-does-not-exist"}});
  provider();
  Round r = round(declare(kBroken, {}));
  ASSERT_TRUE(r.applied.has_value());
  ASSERT_FALSE(r.ok());
  show("broken dependency", r.error());
  EXPECT_EQ(r.error().code, ErrorCode::Failed);
  EXPECT_NE(r.error().message.find(
                "Depends: nox-mesh-test-does-not-exist but it is not installable"),
            std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("E: "), std::string::npos);
  EXPECT_EQ(mt::AptRepo::dpkg_fingerprint(kBroken), "unknown");
}

TEST_F(PackageProviderTest, UnknownVersionFails) {
  serve({{kA, "1.0"}});
  provider();
  ASSERT_NO_FATAL_FAILURE(converge(declare(kA, {{"version", "1.0"}})));
  Round r = round(declare(kA, {{"version", "9.9"}}));
  ASSERT_TRUE(r.applied.has_value());
  ASSERT_FALSE(r.ok());
  show("unknown version", r.error());
  EXPECT_EQ(r.error().code, ErrorCode::Failed);
  EXPECT_NE(r.error().message.find(std::string("E: Version '9.9' for '") + kA + "' was not found"),
            std::string::npos)
      << r.error().message;
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "1.0");
}

TEST_F(PackageProviderTest, RefusesToRemoveDependents) {
  constexpr const char* kLib = "nox-mesh-test-pkg-lib";
  constexpr const char* kApp = "nox-mesh-test-pkg-app";
  serve({{kLib, "1.0"}, {kApp, "1.0", kLib}});
  provider();
  ASSERT_NO_FATAL_FAILURE(converge(declare(kApp, {})));
  ASSERT_EQ(mt::AptRepo::installed_version(kLib), "1.0");
  Round r = round(declare(kLib, {{"ensure", "absent"}}));
  ASSERT_TRUE(r.applied.has_value());
  ASSERT_FALSE(r.ok());
  show("dependents", r.error());
  EXPECT_EQ(r.error().code, ErrorCode::FailedPrecondition);
  EXPECT_NE(r.error().message.find(kApp), std::string::npos) << r.error().message;
  EXPECT_EQ(mt::AptRepo::installed_version(kLib), "1.0");
  EXPECT_EQ(mt::AptRepo::installed_version(kApp), "1.0");
}

TEST_F(PackageProviderTest, MissingSourcesFileFails) {
  serve({{kA, "1.0"}});
  provider();
  sdk::Resource want = declare(kA, {{"version", "1.0"}});
  want.properties.set("source", repo_->dir() + "/no-such.list");
  Round r = round(want);
  ASSERT_TRUE(r.applied.has_value());
  ASSERT_FALSE(r.ok());
  show("missing sources file", r.error());
  EXPECT_EQ(r.error().code, ErrorCode::FailedPrecondition);
  EXPECT_EQ(r.error().path, "properties.source");
  EXPECT_EQ(mt::AptRepo::dpkg_fingerprint(kA), "unknown");
}

TEST_F(PackageProviderTest, WorksWithTheHostAptConfiguration) {
  // No isolation: the host's sources (Debian's mirrors) plus the test source, joined by the
  // provider for each command; the index refresh touches only the test source.
  // (Every apt-cache run reads the whole Debian index here, about 1.5 s: one install only.)
  serve({{kA, "1.0"}, {kA, "2.0"}}, /*isolate=*/false);
  provider();
  ASSERT_NO_FATAL_FAILURE(converge(declare(kA, {{"version", "1.0"}})));
  EXPECT_EQ(mt::AptRepo::installed_version(kA), "1.0");
  auto policy = mt::run_program({"apt-cache", "policy", kA});
  EXPECT_EQ(policy.out.find("127.0.0.1"), std::string::npos)
      << "the test source leaked into the host's apt configuration: " << policy.out;
}

}  // namespace
}  // namespace mesh::plugins::package::test
