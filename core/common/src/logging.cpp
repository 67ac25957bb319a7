#include "mesh/common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace mesh::common {
namespace {

std::shared_ptr<spdlog::logger>& instance() {
  static std::shared_ptr<spdlog::logger> l = [] {
    auto lg = std::make_shared<spdlog::logger>("mesh", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    lg->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %n %v");
    lg->set_level(spdlog::level::info);
    return lg;
  }();
  return l;
}

spdlog::level::level_enum to_spd(sdk::LogLevel l) {
  switch (l) {
    case sdk::LogLevel::Trace: return spdlog::level::trace;
    case sdk::LogLevel::Debug: return spdlog::level::debug;
    case sdk::LogLevel::Info: return spdlog::level::info;
    case sdk::LogLevel::Warn: return spdlog::level::warn;
    case sdk::LogLevel::Error: return spdlog::level::err;
  }
  return spdlog::level::info;
}

}  // namespace

sdk::Result<void> init_logging(const std::string& program, const std::string& level) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    return sdk::fail(sdk::ErrorCode::InvalidArgument,
                     "unknown log level '" + level + "' (valid: trace, debug, info, warn, error, off)",
                     "--log-level");
  auto lg = std::make_shared<spdlog::logger>(program, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  lg->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %n %v");
  lg->set_level(lvl);
  lg->flush_on(spdlog::level::trace);
  instance() = lg;
  return {};
}

std::shared_ptr<spdlog::logger> logger() { return instance(); }

PluginLogger::PluginLogger(std::string plugin_name) : prefix_("plugin=" + plugin_name + " ") {}

void PluginLogger::log(sdk::LogLevel level, std::string_view message) noexcept {
  try {
    instance()->log(to_spd(level), "{}{}", prefix_, message);
  } catch (...) {
  }
}

bool PluginLogger::enabled(sdk::LogLevel level) const noexcept {
  return instance()->should_log(to_spd(level));
}

}  // namespace mesh::common
