// The fixture both `package` provider system suites start from (package_provider_system_test,
// package_repair_system_test): a recording logger, the provider as the host would make it, a
// throw-away apt repository on 127.0.0.1 (apt_repo_fixture.h), and resources declared the way the
// engine hands them over. Skips when the machine cannot serve that repository
// (mt::apt_repo_skip_reason); the provider log is printed when a test fails.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include "apt_repo_fixture.h"
#include "mesh/sdk/sdk.h"
#include "mesh/sdk/testing/conformance.h"
#include "package_provider.h"

namespace mesh::plugins::package::test {

class PackageProviderFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = mesh::testing::apt_repo_skip_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    host_.logger = &logger_;
    host_.role = "tool";
  }

  void TearDown() override {
    provider_.reset();
    repo_.reset();
    if (HasFailure())
      for (const auto& line : logger_.lines()) std::cerr << "  provider log: " << line << "\n";
  }

  /// The provider, made again and configured with the given apt lock and command timeouts
  /// (durations as the provider's config takes them, e.g. "30s", "2m").
  PackageProvider& provider(const char* lock_timeout = "30s", const char* command_timeout = "2m") {
    provider_ = std::make_unique<PackageProvider>(host_);
    sdk::Value config = sdk::Value::object();
    config.set("lock_timeout", lock_timeout);
    config.set("command_timeout", command_timeout);
    auto ok = provider_->configure(config);
    EXPECT_TRUE(ok) << ok.error().describe();
    return *provider_;
  }

  /// A declaration as the engine hands it over: from the served repository (repo_ must be set),
  /// schema-checked, defaults in.
  sdk::Resource declare(const std::string& name,
                        std::initializer_list<std::pair<std::string, sdk::Value>> props) {
    sdk::Resource r;
    r.rid = {"package", name};
    r.properties.set("source", repo_->sources_file());
    for (const auto& [k, v] : props) r.properties.set(k, v);
    auto checked = sdk::validate_against(provider_->schema(), r.properties, "properties");
    EXPECT_TRUE(checked) << checked.error().describe();
    r.properties = sdk::apply_defaults(provider_->schema(), r.properties);
    return r;
  }

  /// Whether one line of the provider's log holds both `a` and `b`.
  bool logged(const std::string& a, const std::string& b) const {
    for (const auto& line : logger_.lines())
      if (line.find(a) != std::string::npos && line.find(b) != std::string::npos) return true;
    return false;
  }

  sdk::testing::RecordingLogger logger_;
  sdk::HostContext host_;
  std::unique_ptr<mesh::testing::AptRepo> repo_;
  std::unique_ptr<PackageProvider> provider_;
};

}  // namespace mesh::plugins::package::test
