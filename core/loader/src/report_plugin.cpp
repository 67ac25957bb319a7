#include "mesh/loader/report_plugin.h"

#include "mesh/common/text.h"

namespace mesh::loader {
namespace {

using sdk::ErrorCode;
using sdk::Value;

// Every string made printable (object keys are the report's own field names: left alone).
Value printable_strings(const Value& value) {
  if (value.is_string()) return Value(common::printable(value.as_string(), 1024));
  if (value.is_array()) {
    Value::Array out;
    out.reserve(value.as_array().size());
    for (const auto& v : value.as_array()) out.push_back(printable_strings(v));
    return Value(std::move(out));
  }
  if (value.is_object()) {
    Value out = Value::object();
    for (const auto& [k, v] : value.as_object()) out.set(k, printable_strings(v));
    return out;
  }
  return value;
}

}  // namespace

sdk::Result<ReportPlugin> ReportPlugin::load(const PluginDirs& dirs, const std::string& name,
                                             const std::string& role) {
  const auto found = find_plugin_file(dirs, "report", name);
  if (found.path.empty())
    return sdk::fail(ErrorCode::InvalidArgument, "no report plugin '" + common::printable(name, 64) + "' in " +
                                                     describe_dirs(dirs) + " (installed: " +
                                                     plugin_names_in(dirs, "report") + ")");
  LoadOptions options;
  options.role = role;
  auto plugin = load_plugin(dirs, "report", name, options);
  if (!plugin) return sdk::fail(ErrorCode::InvalidArgument, plugin.error().message);
  ReportPlugin out;
  out.renderer_ = plugin->as<sdk::ReportRenderer>();
  if (!out.renderer_)
    return sdk::fail(ErrorCode::InvalidArgument, plugin->path + " is not a report renderer");
  if (auto ok = out.renderer_->configure(Value::object()); !ok)
    return sdk::fail(ErrorCode::InvalidArgument, plugin->path + ": configure: " + ok.error().message);
  out.plugin_ = std::move(*plugin);
  return out;
}

sdk::Result<std::string> ReportPlugin::render(const Value& report, std::int64_t now_ms) const {
  if (renderer_->raw_strings()) return renderer_->render(report, now_ms);
  return renderer_->render(printable_strings(report), now_ms);
}

}  // namespace mesh::loader
