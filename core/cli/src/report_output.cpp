#include "mesh/cli/report_output.h"

#include <cstdlib>
#include <filesystem>

#include "mesh/cli/locate.h"
#include "mesh/common/error_text.h"
#include "mesh/common/config.h"

namespace mesh::cli {

using sdk::ErrorCode;

sdk::Result<loader::PluginDirs> report_plugin_dirs(const std::string& plugin_dir_flag,
                                                   const std::string& config_flag) {
  if (!plugin_dir_flag.empty()) return loader::PluginDirs{plugin_dir_flag};
  if (const char* env = std::getenv("NOX_MESH_PLUGIN_DIR"); env && *env) return loader::PluginDirs{env};
  std::string config = config_flag;
  if (config.empty())
    if (const char* env = std::getenv("NOX_MESH_CONFIG"); env && *env) config = env;
  if (!config.empty()) {
    auto file = common::ConfigFile::load(config);
    if (!file) return sdk::fail(ErrorCode::InvalidArgument, common::described(file.error()));
    const sdk::Value plugins = file->table("plugins");
    if (const sdk::Value* d = plugins.is_object() ? plugins.find("dir") : nullptr) {
      auto dirs = file->string_or_list("plugins.dir", *d);
      if (!dirs) return sdk::fail(ErrorCode::InvalidArgument, common::described(dirs.error()));
      return loader::PluginDirs(dirs->begin(), dirs->end());
    }
  }
  loader::PluginDirs all = default_plugin_dirs(self_exe()), existing;
  for (const auto& d : all) {
    std::error_code ec;
    if (std::filesystem::is_directory(d, ec)) existing.push_back(d);
  }
  return existing.empty() ? all : existing;
}

sdk::Result<ReportOutput> ReportOutput::load(const loader::PluginDirs& dirs, const std::string& name) {
  auto plugin = loader::ReportPlugin::load(dirs, name, "tool");
  if (!plugin) return sdk::fail(ErrorCode::InvalidArgument, "--output " + name + ": " + plugin.error().message);
  return ReportOutput(std::move(*plugin));
}

}  // namespace mesh::cli
