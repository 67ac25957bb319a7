// Nox Mesh SDK — the logger the host hands to each plugin. No spdlog or fmt type crosses the
// plugin boundary; the host's implementation forwards to spdlog with the plugin's name attached.
#pragma once

#include <string>
#include <string_view>

namespace mesh::sdk {

enum class LogLevel { Trace = 0, Debug = 1, Info = 2, Warn = 3, Error = 4 };

/// Thread safety: every method may be called from any thread at any time while the plugin lives.
class Logger {
 public:
  virtual ~Logger() = default;
  /// Writes one log line. `message` should read `key=value` where it names things, e.g.
  /// `resource=file:/etc/motd outcome=applied`, so operators can grep. Never throws.
  virtual void log(LogLevel level, std::string_view message) noexcept = 0;
  /// True when a line at `level` would be written; lets callers skip building expensive lines.
  virtual bool enabled(LogLevel level) const noexcept = 0;

  void trace(std::string_view m) noexcept { log(LogLevel::Trace, m); }
  void debug(std::string_view m) noexcept { log(LogLevel::Debug, m); }
  void info(std::string_view m) noexcept { log(LogLevel::Info, m); }
  void warn(std::string_view m) noexcept { log(LogLevel::Warn, m); }
  void error(std::string_view m) noexcept { log(LogLevel::Error, m); }
};

/// A logger that drops everything; for tests and tools.
class NullLogger final : public Logger {
 public:
  void log(LogLevel, std::string_view) noexcept override {}
  bool enabled(LogLevel) const noexcept override { return false; }
};

}  // namespace mesh::sdk
