// Logging through spdlog to stderr, and the sdk::Logger handed to plugins.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "mesh/sdk/logger.h"
#include "mesh/sdk/result.h"

namespace spdlog { class logger; }

namespace mesh::common {

/// Sets up the process logger: stderr, `program` as the logger name, `level` one of trace, debug,
/// info, warn, error, off. Errors: InvalidArgument for an unknown level.
sdk::Result<void> init_logging(const std::string& program, const std::string& level);

/// The process logger (after init_logging; a default stderr logger before).
std::shared_ptr<spdlog::logger> logger();

/// An sdk::Logger that writes through the process logger with `plugin=<name>` prepended.
class PluginLogger final : public sdk::Logger {
 public:
  explicit PluginLogger(std::string plugin_name);
  void log(sdk::LogLevel level, std::string_view message) noexcept override;
  bool enabled(sdk::LogLevel level) const noexcept override;

 private:
  std::string prefix_;
};

}  // namespace mesh::common
