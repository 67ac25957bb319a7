// Pipeline files (mesh/control/pipeline.h, decision record 61).
#include "mesh/control/pipeline.h"

#include <cstdio>
#include <filesystem>
#include <set>

#include "mesh/common/config.h"

namespace mesh::control {
namespace {

using sdk::ErrorCode;
using sdk::Value;

bool name_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'; }

bool valid_stage_name(std::string_view s) {
  if (s.empty() || s.size() > 63 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9'))) return false;
  for (char c : s)
    if (!name_char(c)) return false;
  return true;
}

}  // namespace

bool valid_pipeline_name(std::string_view s) noexcept {
  if (s.empty() || s.size() > 63 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9'))) return false;
  for (char c : s)
    if (!name_char(c) && c != '.') return false;
  return true;
}

sdk::Result<Pipeline> parse_pipeline(std::string_view text, const std::string& path, const std::string& name,
                                     const StageSettingsLookup& settings) {
  MESH_TRY(file, common::ConfigFile::parse(text, path));
  const Value& root = file.root();
  Pipeline p;
  p.name = name;
  p.file = path;
  for (const auto& [k, v] : root.as_object()) {
    if (k == "description") {
      if (!v.is_string()) return sdk::fail(file.error_at(k, "must be a string"));
      p.description = v.as_string();
    } else if (k != "stage") {
      return sdk::fail(file.error_at(k, "unknown key '" + k + "' (valid: description, stage)"));
    }
  }
  const Value* stages = root.find("stage");
  if (!stages || !stages->is_array() || stages->as_array().empty())
    return sdk::fail(file.error_at(stages ? "stage" : "",
                                   stages ? "must be [[stage]] tables, at least one"
                                          : "no [[stage]]: a pipeline has at least one stage"));
  std::set<std::string> names;
  for (std::size_t i = 0; i < stages->as_array().size(); ++i) {
    const Value& s = stages->as_array()[i];
    const std::string at = "stage[" + std::to_string(i) + "]";
    if (!s.is_object()) return sdk::fail(file.error_at(at, "must be a table ([[stage]])"));
    PipelineStage stage;
    const Value* plugin = s.find("plugin");
    if (!plugin) return sdk::fail(file.error_at(at, "no 'plugin': name the stage plugin that runs it"));
    if (!plugin->is_string() || plugin->as_string().empty())
      return sdk::fail(file.error_at(at + ".plugin", "must be a stage plugin's name"));
    stage.plugin = plugin->as_string();
    const sdk::Schema* schema = settings ? settings(stage.plugin) : nullptr;
    if (!schema)
      return sdk::fail(file.error_at(at + ".plugin", "no stage plugin '" + stage.plugin +
                                                         "' is loaded (control.toml [stages] load)"));
    stage.name = stage.plugin;
    if (const Value* n = s.find("name")) {
      if (!n->is_string() || !valid_stage_name(n->as_string()))
        return sdk::fail(file.error_at(at + ".name", "must be a stage name ([a-z0-9][a-z0-9_-]{0,62})"));
      stage.name = n->as_string();
    }
    if (!valid_stage_name(stage.name))
      return sdk::fail(file.error_at(at + ".name", "'" + stage.name + "' is not a stage name: set 'name'"));
    if (!names.insert(stage.name).second)
      return sdk::fail(file.error_at(at + ".name", "stage '" + stage.name +
                                                       "' is named twice (give one of them another 'name')"));
    Value rest = Value::object();
    for (const auto& [k, v] : s.as_object())
      if (k != "plugin" && k != "name") rest.set(k, v);
    if (auto ok = sdk::validate_against(*schema, rest, at); !ok) {
      const auto& e = ok.error();
      return sdk::fail(file.error_at(e.path.empty() ? at : e.path, e.message));
    }
    stage.settings = sdk::apply_defaults(*schema, std::move(rest));
    p.stages.push_back(std::move(stage));
  }
  return p;
}

sdk::Result<Pipeline> load_pipeline(const std::string& dir, const std::string& name,
                                    const StageSettingsLookup& settings) {
  if (!valid_pipeline_name(name))
    return sdk::fail(ErrorCode::InvalidArgument,
                     "'" + name.substr(0, 64) + "' is not a pipeline name ([a-z0-9][a-z0-9._-]{0,62})", "name");
  if (dir.empty())
    return sdk::fail(ErrorCode::FailedPrecondition,
                     "no pipelines here: control.toml has no [pipelines] dir", "name");
  const std::string path = (std::filesystem::path(dir) / (name + ".toml")).string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return sdk::fail(ErrorCode::NotFound, "no pipeline '" + name + "' (no file " + path + ")", "name");
  std::string text;
  {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return sdk::fail(ErrorCode::NotFound, "cannot read " + path, "name");
    char buf[65536];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
      text.append(buf, n);
      if (text.size() > (1u << 20)) {
        std::fclose(f);
        return sdk::fail(ErrorCode::InvalidArgument, path + ": larger than 1 MiB", "name");
      }
    }
    std::fclose(f);
  }
  return parse_pipeline(text, path, name, settings);
}

}  // namespace mesh::control
