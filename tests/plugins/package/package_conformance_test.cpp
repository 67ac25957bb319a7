// The SDK's provider conformance suite on the `package` provider with the real apt and dpkg
// (label `system`). One repository serves every test of this binary; it is started by the first
// test that needs it and purged at exit. When this machine cannot run it (not root, no apt), a
// global environment skips every test with the reason.
#include <gtest/gtest.h>

#include <iostream>
#include <memory>
#include <string>

#include "apt_repo_fixture.h"
#include "mesh/sdk/testing/conformance.h"
#include "package_provider.h"

namespace mesh::plugins::package::test {
namespace {

namespace mt = mesh::sdk::testing;
using mesh::testing::AptRepo;
using sdk::Value;

constexpr const char* kCreate = "nox-mesh-test-conf-create";
constexpr const char* kUpdate = "nox-mesh-test-conf-update";
constexpr const char* kAbsent = "nox-mesh-test-conf-absent";

// Created at test registration (a temporary folder, nothing else: no root needed there), served
// when the first provider is made, purged and deleted at exit.
AptRepo& shared_repo() {
  static AptRepo repo;
  return repo;
}

void start_repo_once() {
  static bool started = false;
  if (started) return;
  AptRepo& repo = shared_repo();
  repo.add_package({kCreate, "1.0"});
  repo.add_package({kUpdate, "1.0"});
  repo.add_package({kUpdate, "2.0"});
  repo.add_package({kAbsent, "1.0"});
  repo.index();
  repo.start();
  started = true;
}

mt::ProviderConformance package_conformance() {
  const std::string source = shared_repo().sources_file();
  mt::ProviderConformance c;
  c.make_provider = [](const sdk::HostContext& host) -> std::unique_ptr<sdk::Provider> {
    // Only the per-sample checks install anything; the bad-input and schema checks (each its own
    // process under ctest) need no repository.
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string suite = test ? test->test_suite_name() : "";
    const bool needs_repo = suite.size() >= 15 && suite.substr(suite.size() - 15) == "ConformanceTest";
    try {
      if (needs_repo) start_repo_once();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "test repository: " << e.what();
      return nullptr;
    }
    auto provider = std::make_unique<PackageProvider>(host);
    Value config = Value::object();
    config.set("lock_timeout", "30s");
    config.set("command_timeout", "2m");
    if (auto ok = provider->configure(config); !ok) {
      ADD_FAILURE() << "configure: " << ok.error().describe();
      return nullptr;
    }
    return provider;
  };
  auto pkg = [&source](const char* name,
                       std::initializer_list<std::pair<std::string, Value>> props) {
    auto r = mt::make_resource("package", name, props);
    r.properties.set("source", source);
    return r;
  };
  c.samples = {
      {"create_exact_version", pkg(kCreate, {{"version", "1.0"}})},
      {"update_version_and_hold", pkg(kUpdate, {{"version", "2.0"}, {"hold", true}}),
       pkg(kUpdate, {{"version", "1.0"}})},
      {"ensure_absent_of_nothing", pkg(kAbsent, {{"ensure", "absent"}})},
  };
  c.bad_resources = {
      {"upper_case_name", mt::make_resource("package", "Nox-Mesh-Test", {}), "id"},
      {"one_letter_name", mt::make_resource("package", "x", {}), "id"},
      {"architecture_qualifier", mt::make_resource("package", "nox-mesh-test-x:amd64", {}), "id"},
      {"shell_in_name", mt::make_resource("package", "x;reboot", {}), "id"},
      {"version_not_debian", mt::make_resource("package", kCreate, {{"version", "v1.0"}}),
       "properties.version"},
      {"version_empty_revision", mt::make_resource("package", kCreate, {{"version", "1.0-"}}),
       "properties.version"},
      {"version_as_number", mt::make_resource("package", kCreate, {{"version", 1}}),
       "properties.version"},
      {"bad_ensure", mt::make_resource("package", kCreate, {{"ensure", "installed"}}),
       "properties.ensure"},
      {"hold_not_bool", mt::make_resource("package", kCreate, {{"hold", "yes"}}), "properties.hold"},
      {"relative_source", mt::make_resource("package", kCreate, {{"source", "x.list"}}),
       "properties.source"},
      {"source_not_a_list", mt::make_resource("package", kCreate, {{"source", "/etc/apt/x.conf"}}),
       "properties.source"},
      {"unknown_property", mt::make_resource("package", kCreate, {{"colour", "red"}}),
       "properties.colour"},
  };
  c.observe = [](const sdk::ResourceId& rid) { return AptRepo::dpkg_fingerprint(rid.id); };
  return c;
}

class SkipWhenNoApt : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string why = mesh::testing::apt_repo_skip_reason();
    if (why.empty()) return;
    // gtest 1.12 skips every test but prints no per-test "[  SKIPPED ]" line, which is what
    // ctest (gtest_discover_tests' SKIP_REGULAR_EXPRESSION) looks for.
    std::cout << "[  SKIPPED ] " << why << std::endl;
    GTEST_SKIP() << why;
  }
};

const auto* const kSkipEnvironment = ::testing::AddGlobalTestEnvironment(new SkipWhenNoApt);

}  // namespace

MESH_INSTANTIATE_PROVIDER_CONFORMANCE(PackageProvider, package_conformance);

}  // namespace mesh::plugins::package::test
