// Shared helpers of the container provider's system tests: a provider configured for the shared
// podman sandbox, a logger that keeps lines for failure output, and one engine round.
#pragma once

#include <gtest/gtest.h>

#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "container_provider.h"
#include "podman_sandbox.h"

namespace mesh::plugins::container::test {

/// Keeps every line; printed by the fixtures when a test fails.
class LinesLogger final : public sdk::Logger {
 public:
  void log(sdk::LogLevel, std::string_view message) noexcept override {
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      lines_.emplace_back(message);
    } catch (...) {
    }
  }
  bool enabled(sdk::LogLevel) const noexcept override { return true; }
  void dump() const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& l : lines_) std::cerr << "  provider log: " << l << "\n";
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

/// A ContainerProvider configured for `box` (settle as given); nullptr after an ADD_FAILURE.
inline std::unique_ptr<ContainerProvider> make_sandbox_provider(
    const sdk::HostContext& host, const mesh::testing::PodmanSandbox& box,
    const std::string& settle = "500ms") {
  auto provider = std::make_unique<ContainerProvider>(host);
  sdk::Value config = box.provider_config(settle);
  auto checked = sdk::validate_against(provider->config_schema(), config, "");
  if (!checked) {
    ADD_FAILURE() << "config: " << checked.error().describe();
    return nullptr;
  }
  auto ok = provider->configure(sdk::apply_defaults(provider->config_schema(), config));
  if (!ok) {
    ADD_FAILURE() << "configure: " << ok.error().describe();
    return nullptr;
  }
  return provider;
}

/// `podman container inspect --format FORMAT name`, trimmed; "absent" when there is none.
inline std::string podman_inspect(const mesh::testing::PodmanSandbox& box, const std::string& name,
                                  const std::string& format) {
  auto r = box.run({"container", "inspect", "--format", format, name});
  if (!r.ok()) return "absent";
  std::string out = r.out;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace mesh::plugins::container::test
