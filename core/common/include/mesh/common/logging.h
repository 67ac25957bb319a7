// Logging through spdlog to stderr, and the sdk::Logger handed to plugins.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
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

/// A budget for log lines that anyone on the broker can cause at will (refused messages): at most
/// `per_second` lines in each one-second window; the others are counted, and the next line let
/// through reports how many were hidden. Thread-safe.
class LogBudget {
 public:
  /// `per_second`: lines allowed per one-second window (>= 1).
  explicit LogBudget(std::uint32_t per_second) : per_second_(per_second ? per_second : 1) {}
  /// True when a line may be written at `now`; then `*hidden` is the number of lines suppressed
  /// since the last one let through (usually 0). False: do not write it (it is counted).
  bool take(std::uint64_t* hidden, std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) noexcept {
    std::lock_guard lock(mu_);
    if (now - window_start_ >= std::chrono::seconds(1)) {
      window_start_ = now;
      used_ = 0;
    }
    if (used_ >= per_second_) {
      ++hidden_;
      return false;
    }
    ++used_;
    *hidden = hidden_;
    hidden_ = 0;
    return true;
  }
  /// " (N more suppressed)" when `hidden` > 0, else "": to append to the line let through.
  static std::string suffix(std::uint64_t hidden) {
    return hidden ? " (" + std::to_string(hidden) + " more like it suppressed)" : std::string();
  }

 private:
  std::mutex mu_;
  std::uint32_t per_second_;
  std::chrono::steady_clock::time_point window_start_{};
  std::uint32_t used_ = 0;
  std::uint64_t hidden_ = 0;
};

}  // namespace mesh::common
