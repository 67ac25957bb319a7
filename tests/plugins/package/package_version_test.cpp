// Unit tests (no root, no apt needed): Debian version ordering and syntax, package-name rules,
// the provider's pure plan() and its configuration and validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "apt_repo_fixture.h"
#include "debian_version.h"
#include "mesh/sdk/sdk.h"
#include "package_provider.h"

namespace mesh::plugins::package::test {
namespace {

using sdk::PlanAction;
using sdk::State;
using sdk::Value;

// --- version ordering -------------------------------------------------------------------------

struct Ordered {
  const char* older;
  const char* newer;
};

TEST(PackageVersionTest, OrdersLikeDebianPolicy) {
  const std::vector<Ordered> cases = {
      {"2.0", "1:1.0"},                      // the epoch wins over everything
      {"9:9.9", "10:0.1"},                   // epochs compare as numbers
      {"1.0~rc1", "1.0"},                    // ~ sorts before the end of the string
      {"1.0~~", "1.0~"},                     // ... and before another ~
      {"1.0~rc1", "1.0~rc2"},
      {"1.0", "1.0a"},                       // the end of the string before a letter
      {"7.6", "7.6a"},
      {"1.0a", "1.0+"},                      // letters before other characters
      {"1.0a", "1.0."},
      {"1.9", "1.10"},                       // digit runs compare numerically, not as text
      {"1.2.9", "1.2.10"},
      {"1.0", "1.0.0"},
      {"1.22.1-9", "1.22.1-9+deb12u1"},      // a stable update is newer
      {"1.22.1-9", "1.22.1-10"},
      {"1.0-1~bpo12+1", "1.0-1"},            // a backport is older than the release it ports
      {"1.0-1", "1.0-1+b1"},                 // a binNMU is newer
      {"1.99-1", "2.0-1"},
      {"2.30-1", "2.30.1-1"},
      {"0.9", "1.0"},
      {"1.0-0", "1.0-1"},
      {"1.0+dfsg-1", "1.0.1-1"},             // '+' sorts after the end of the string, '.' too
  };
  for (const auto& c : cases) {
    EXPECT_LT(compare_versions(c.older, c.newer), 0) << c.older << " < " << c.newer;
    EXPECT_GT(compare_versions(c.newer, c.older), 0) << c.newer << " > " << c.older;
  }
}

TEST(PackageVersionTest, EqualVersionsCompareEqual) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"1.0-1", "1.0-1"},
      {"1.0", "0:1.0"},      // epoch 0 is the same as none
      {"1.0", "1.0-0"},      // revision 0 is the same as none
      {"1.01", "1.1"},       // leading zeros of a digit run do not count
      {"1.0", "1.00"},
      {"1:2.0-3", "01:2.0-3"},
  };
  for (const auto& [a, b] : cases) {
    EXPECT_EQ(compare_versions(a, b), 0) << a << " == " << b;
    EXPECT_TRUE(same_version(a, b));
  }
}

TEST(PackageVersionTest, NeverComparesPrefixes) {
  // A string-prefix or lexical comparison gets every one of these wrong.
  EXPECT_FALSE(same_version("1.0", "1.0.1"));
  EXPECT_FALSE(same_version("1", "10"));
  EXPECT_GT(compare_versions("10", "9"), 0);
  EXPECT_LT(compare_versions("1.0~beta", "1.0"), 0);
  EXPECT_GT(compare_versions("1:0.1", "99.0"), 0);
}

TEST(PackageVersionTest, AgreesWithDpkg) {
  // The reference implementation, when this machine has it.
  const auto probe = mesh::testing::run_program({"dpkg", "--version"});
  if (probe.exit_code != 0) GTEST_SKIP() << "dpkg not installed";
  const std::vector<std::string> versions = {
      "1.0",   "1.0-1",  "1:1.0",   "1.0~rc1", "1.0a",     "1.0+b1", "1.0.0", "1.10",
      "1.9",   "2.0~",  "0:2.0",   "2.0-1~bpo", "7.6",   "7.6a",  "7.6-a",
      "1.0-1+deb12u1", "1.0-10", "1.0-9"};
  for (std::size_t i = 0; i < versions.size(); ++i) {
    for (std::size_t j = i; j < versions.size(); ++j) {
      const std::string& a = versions[i];
      const std::string& b = versions[j];
      const int mine = compare_versions(a, b);
      const char* op = mine < 0 ? "lt" : mine == 0 ? "eq" : "gt";
      const auto r = mesh::testing::run_program({"dpkg", "--compare-versions", a, op, b});
      EXPECT_EQ(r.exit_code, 0) << "dpkg disagrees: " << a << " " << op << " " << b;
    }
  }
}

TEST(PackageVersionTest, AcceptsValidVersions) {
  for (const char* v : {"1", "1.0", "1.0-1", "1:1.0-1", "1.22.1-9+deb12u1", "2.0~rc1", "1.0+dfsg",
                        "1:2.3:4-5", "1.0-1-2", "0.1~git20240101.abc-1"})
    EXPECT_EQ(version_problem(v), std::nullopt) << v;
}

TEST(PackageVersionTest, RefusesInvalidVersions) {
  for (const char* v : {"", "a1.0", "1.0-", ":1.0", "x:1.0", "1.0_1", "1.0 1", "1.0-1_2", "1:",
                        "-1", "1.0/2", "latest-1", "1:2.0-a_b"})
    EXPECT_NE(version_problem(v), std::nullopt) << "'" << v << "'";
}

TEST(PackageVersionTest, PackageNames) {
  for (const char* n : {"nginx", "g++", "libc6", "0ad", "python3.11", "lib32stdc++-12-dev"})
    EXPECT_EQ(package_name_problem(n), std::nullopt) << n;
  for (const char* n : {"", "a", "Nginx", "-nginx", "+x", ".x", "nginx:amd64", "ngi nx", "ngi_nx",
                        "../etc", "x/y", "nginx=1.0"})
    EXPECT_NE(package_name_problem(n), std::nullopt) << "'" << n << "'";
}

// --- plan -------------------------------------------------------------------------------------

class PackageProviderPlanTest : public ::testing::Test {
 protected:
  sdk::Resource want(std::initializer_list<std::pair<std::string, Value>> props,
                     std::string name = "nox-mesh-test-plan") {
    sdk::Resource r;
    r.rid = {"package", std::move(name)};
    for (const auto& [k, v] : props) r.properties.set(k, v);
    r.properties = sdk::apply_defaults(provider_.schema(), r.properties);
    return r;
  }

  static State installed(const std::string& version, bool hold = false,
                         std::optional<std::string> candidate = std::nullopt,
                         std::string ensure = "present") {
    State s;
    s.properties.set("ensure", ensure);
    s.properties.set("version", version);
    s.properties.set("hold", hold);
    s.properties.set("candidate", candidate ? Value(*candidate) : Value());
    return s;
  }

  sdk::Plan plan(const sdk::Resource& w, const std::optional<State>& observed) {
    auto p = provider_.plan(w, observed);
    EXPECT_TRUE(p) << p.error().describe();
    return p ? *p : sdk::Plan{};
  }

  static bool changes(const sdk::Plan& p, const std::string& path) {
    return std::any_of(p.changes.begin(), p.changes.end(),
                       [&](const sdk::Change& c) { return c.path == path; });
  }

  sdk::NullLogger logger_;
  // The logger is set before provider_ is made (its constructor may log): members are
  // initialised in declaration order.
  sdk::HostContext host_ = [this] {
    sdk::HostContext h;
    h.logger = &logger_;
    return h;
  }();
  PackageProvider provider_{host_};
};

TEST_F(PackageProviderPlanTest, CreatesWhenNothingIsInstalled) {
  auto p = plan(want({{"version", "1.0"}}), std::nullopt);
  EXPECT_EQ(p.action, PlanAction::Create);
  EXPECT_TRUE(changes(p, "properties.ensure"));
  EXPECT_TRUE(changes(p, "properties.version"));
  EXPECT_EQ(p.desired.rid.str(), "package:nox-mesh-test-plan");
  // apply() reports "purged" for nothing at all; plan treats it like nullopt.
  State purged;
  purged.properties.set("ensure", "purged");
  EXPECT_EQ(plan(want({}), purged).action, PlanAction::Create);
}

TEST_F(PackageProviderPlanTest, ExactVersionComparesByDebianRules) {
  EXPECT_TRUE(plan(want({{"version", "1.0"}}), installed("1.0")).empty());
  EXPECT_TRUE(plan(want({{"version", "0:1.0"}}), installed("1.0")).empty());
  EXPECT_TRUE(plan(want({{"version", "1.0-0"}}), installed("1.0")).empty());
  auto up = plan(want({{"version", "1.0.1"}}), installed("1.0"));
  EXPECT_EQ(up.action, PlanAction::Update);
  ASSERT_EQ(up.changes.size(), 1u);
  EXPECT_EQ(up.changes[0].path, "properties.version");
  EXPECT_EQ(up.changes[0].observed, Value("1.0"));
  EXPECT_EQ(up.changes[0].declared, Value("1.0.1"));
  EXPECT_EQ(plan(want({{"version", "1.0"}}), installed("1:1.0")).action, PlanAction::Update);
}

TEST_F(PackageProviderPlanTest, PresentIsSatisfiedByAnyVersion) {
  EXPECT_TRUE(plan(want({}), installed("0.1", false, "9.9")).empty());
  EXPECT_TRUE(plan(want({{"version", "present"}}), installed("1:5")).empty());
}

TEST_F(PackageProviderPlanTest, LatestComparesWithTheCandidate) {
  EXPECT_EQ(plan(want({{"version", "latest"}}), installed("1.0", false, "2.0")).action,
            PlanAction::Update);
  EXPECT_TRUE(plan(want({{"version", "latest"}}), installed("2.0", false, "2.0")).empty());
  // Installed newer than the index (a local build): latest does not mean downgrade.
  EXPECT_TRUE(plan(want({{"version", "latest"}}), installed("3.0", false, "2.0")).empty());
  // No candidate at all: nothing newer is known.
  EXPECT_TRUE(plan(want({{"version", "latest"}}), installed("1.0")).empty());
  EXPECT_TRUE(plan(want({{"version", "latest"}}), installed("1.0", false, "1.0~rc1")).empty());
}

TEST_F(PackageProviderPlanTest, Hold) {
  auto p = plan(want({{"hold", true}}), installed("1.0"));
  EXPECT_EQ(p.action, PlanAction::Update);
  EXPECT_TRUE(changes(p, "properties.hold"));
  EXPECT_TRUE(plan(want({{"hold", true}}), installed("1.0", true)).empty());
  // hold defaults to false: a hold nobody declared is released.
  EXPECT_EQ(plan(want({}), installed("1.0", true)).action, PlanAction::Update);
}

TEST_F(PackageProviderPlanTest, AbsentAndPurged) {
  EXPECT_TRUE(plan(want({{"ensure", "absent"}}), std::nullopt).empty());
  EXPECT_TRUE(plan(want({{"ensure", "purged"}}), std::nullopt).empty());
  EXPECT_EQ(plan(want({{"ensure", "absent"}}), installed("1.0")).action, PlanAction::Remove);
  EXPECT_EQ(plan(want({{"ensure", "purged"}}), installed("1.0")).action, PlanAction::Remove);
  const State config_files = installed("1.0", false, std::nullopt, "absent");
  EXPECT_TRUE(plan(want({{"ensure", "absent"}}), config_files).empty());
  EXPECT_EQ(plan(want({{"ensure", "purged"}}), config_files).action, PlanAction::Remove);
  // Only configuration files left and the package declared present: install it again.
  auto again = plan(want({}), config_files);
  EXPECT_EQ(again.action, PlanAction::Update);
  EXPECT_TRUE(changes(again, "properties.ensure"));
}

TEST_F(PackageProviderPlanTest, BrokenInstallIsNotPresent) {
  auto p = plan(want({}), installed("1.0", false, std::nullopt, "half-configured"));
  EXPECT_EQ(p.action, PlanAction::Update);
  EXPECT_TRUE(changes(p, "properties.ensure"));
}

TEST_F(PackageProviderPlanTest, RefusesBadInput) {
  auto bad_name = provider_.plan(want({}, "Bad_Name"), std::nullopt);
  ASSERT_FALSE(bad_name);
  EXPECT_EQ(bad_name.error().code, sdk::ErrorCode::InvalidArgument);
  EXPECT_EQ(bad_name.error().path, "id");
  auto bad_version = provider_.plan(want({{"version", "newest"}}), std::nullopt);
  ASSERT_FALSE(bad_version);
  EXPECT_EQ(bad_version.error().path, "properties.version");
}

TEST_F(PackageProviderPlanTest, Validate) {
  EXPECT_TRUE(provider_.validate(want({{"version", "1:2.0-1"}, {"source", "/etc/apt/x.list"}})));
  auto expect_path = [&](const sdk::Resource& r, const char* path) {
    auto v = provider_.validate(r);
    ASSERT_FALSE(v) << r.properties.to_json();
    EXPECT_EQ(v.error().code, sdk::ErrorCode::InvalidArgument);
    EXPECT_EQ(v.error().path, path) << v.error().describe();
  };
  expect_path(want({}, "nginx:amd64"), "id");
  expect_path(want({{"version", "v1"}}), "properties.version");
  EXPECT_TRUE(provider_.validate(want({{"hold", true}, {"ensure", "absent"}})))
      << "hold is ignored, not refused, when the package is to be removed";
  expect_path(want({{"source", "relative.list"}}), "properties.source");
  expect_path(want({{"source", "/etc/apt/sources.txt"}}), "properties.source");
}

TEST_F(PackageProviderPlanTest, StateFromRecord) {
  PackageRecord r;
  EXPECT_FALSE(state_from_record(r));  // dpkg knows nothing
  r.status = InstallStatus::NotInstalled;
  EXPECT_FALSE(state_from_record(r));
  r.status = InstallStatus::ConfigFiles;
  r.version = "1.0";
  EXPECT_EQ(state_from_record(r)->properties.get_string("ensure"), "absent");
  r.status = InstallStatus::TriggersPending;
  r.candidate = "2.0";
  r.hold = true;
  auto s = state_from_record(r);
  EXPECT_EQ(s->properties.get_string("ensure"), "present");
  EXPECT_EQ(s->properties.get_string("candidate"), "2.0");
  EXPECT_TRUE(s->properties.get_bool("hold", false));
  r.reinstall_required = true;
  EXPECT_EQ(state_from_record(r)->properties.get_string("ensure"), "reinstall-required");
}

// Decision 76: the provider may replace the running host (nox-mesh-host), and what its read()
// returns is a declaration, which is how the engine reverts after a failed self-test: the
// declared properties with each schema attribute the read state carries.
TEST_F(PackageProviderPlanTest, MayReplaceTheHostAndWhatItReadsIsADeclaration) {
  auto caps = provider_.capabilities();
  ASSERT_TRUE(caps);
  EXPECT_TRUE(caps->may_replace_host);

  const State before = installed("0.1.0-1", false, std::string("0.2.0-1"));
  sdk::Resource revert = want({{"version", "0.2.0-1"}, {"source", "/etc/apt/sources.list.d/nox-mesh.list"}},
                              "nox-mesh-host");
  for (const auto& a : provider_.schema().attributes)
    if (const Value* v = before.properties.find(a.name); v && !v->is_null()) revert.properties.set(a.name, *v);
  EXPECT_EQ(revert.properties.get_string("version"), "0.1.0-1");
  EXPECT_EQ(revert.properties.get_string("source"), "/etc/apt/sources.list.d/nox-mesh.list") << "kept as declared";
  EXPECT_TRUE(provider_.validate(revert));
  EXPECT_TRUE(plan(revert, before).empty()) << "the state read back after the revert matches it";
  auto down = plan(revert, installed("0.2.0-1"));
  EXPECT_EQ(down.action, PlanAction::Update);
  ASSERT_EQ(down.changes.size(), 1u);
  EXPECT_EQ(down.changes[0].path, "properties.version");
  EXPECT_EQ(down.changes[0].declared, Value("0.1.0-1"));
}

// --- configuration ----------------------------------------------------------------------------

TEST(PackageProviderConfigTest, ConfigureChecksTimeouts) {
  sdk::NullLogger logger;
  sdk::HostContext host;
  host.logger = &logger;
  PackageProvider provider(host);
  auto config = [&](const char* lock, const char* command) {
    Value c = Value::object();
    c.set("lock_timeout", lock);
    c.set("command_timeout", command);
    return c;
  };
  EXPECT_TRUE(provider.configure(sdk::apply_defaults(provider.config_schema(), Value::object())));
  EXPECT_TRUE(provider.configure(config("2s", "1m")));
  auto bad_lock = provider.configure(config("2 seconds", "1m"));
  ASSERT_FALSE(bad_lock);
  EXPECT_EQ(bad_lock.error().path, "lock_timeout");
  auto too_short = provider.configure(config("60s", "30s"));
  ASSERT_FALSE(too_short);
  EXPECT_EQ(too_short.error().path, "command_timeout");
  auto zero = provider.configure(config("0s", "0s"));
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().path, "command_timeout");
}

}  // namespace
}  // namespace mesh::plugins::package::test
