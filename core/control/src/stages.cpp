// The StageRegistry and the StageContext of one stage run (mesh/control/stages.h, decision
// record 57).
#include "mesh/control/stages.h"

#include <stdlib.h>
#include <string.h>

#include <cerrno>
#include <filesystem>

#include "mesh/common/fs.h"
#include <spdlog/spdlog.h>

#include "mesh/common/logging.h"

namespace mesh::control {

using sdk::ErrorCode;
using sdk::Value;

const sdk::Schema& stages_table_schema() {
  static const sdk::Schema s{
      "stages",
      "stage plugins run by pipelines and by `mesh publish`; each has its own [stages.<name>] table",
      {sdk::Attribute{"load", sdk::ValueType::Any, false,
                      "the stage plugins to load (mesh-stage-<name>.so in the plugin directories)"}}};
  return s;
}

sdk::Result<std::shared_ptr<StageRegistry>> StageRegistry::load(const ControlConfig& config,
                                                                const loader::LoadOptions& options) {
  const common::ConfigFile& file = config.file;
  auto registry = std::make_shared<StageRegistry>();
  // A table for a stage that is not loaded is a mistake (a typo in its name, a forgotten load).
  Value tables = file.table("stages");
  if (tables.is_object())
    for (const auto& [k, v] : tables.as_object()) {
      if (!v.is_object()) continue;
      bool loaded = false;
      for (const auto& n : config.stages_load) loaded = loaded || n == k;
      if (!loaded)
        return sdk::fail(file.error_at("stages." + k, "[stages." + k + "] is for stage '" + k +
                                                          "', which is not in stages.load"));
    }
  for (const auto& name : config.stages_load) {
    auto loaded = loader::load_plugin(config.plugin_dirs, "stage", name, options);
    if (!loaded) {
      const sdk::Error& e = loaded.error();
      std::string why = e.code == ErrorCode::NotFound
                            ? "no stage plugin '" + name + "': " + e.message + " (stage plugins in " +
                                  loader::describe_dirs(config.plugin_dirs) + ": " +
                                  loader::plugin_names_in(config.plugin_dirs, "stage") + ")"
                            : "stage plugin '" + name + "': " + e.message;
      return sdk::fail(file.error_at("stages.load", why));
    }
    auto stage = loaded->as<sdk::Stage>();
    if (!stage)
      return sdk::fail(file.error_at("stages.load", loaded->path + " is not a stage plugin"));
    const std::string table = "stages." + name;
    Value t = file.table(table);
    if (!t.is_object()) return sdk::fail(file.error_at(table, "must be a table"));
    const sdk::Schema& schema = stage->config_schema();
    if (schema.find("repository") && !t.find("repository") && config.repository.enabled())
      t.set("repository", config.repository.dir);
    if (auto ok = sdk::validate_against(schema, t, table); !ok) {
      const auto& e = ok.error();
      return sdk::fail(file.error_at(e.path.empty() ? table : e.path, e.message));
    }
    Value filled = sdk::apply_defaults(schema, std::move(t));
    if (auto ok = stage->configure(filled); !ok)
      return sdk::fail(file.error_at(ok.error().path.empty() ? table : table + "." + ok.error().path,
                                     ok.error().message));
    if (auto ok = registry->add(name, stage, loaded->version); !ok)
      return sdk::fail(file.error_at("stages.load", "stage '" + name + "' is listed twice"));
    common::logger()->info("stage plugin loaded name={} version={} path={}", name, loaded->version, loaded->path);
  }
  return registry;
}

sdk::Result<void> StageRegistry::add(const std::string& name, std::shared_ptr<sdk::Stage> stage,
                                     std::string version) {
  if (stages_.count(name)) return sdk::fail(ErrorCode::AlreadyExists, "stage '" + name + "' is already registered");
  stages_.emplace(name, Entry{std::move(stage), std::move(version)});
  return {};
}

std::shared_ptr<sdk::Stage> StageRegistry::find(std::string_view name) const {
  auto it = stages_.find(name);
  return it == stages_.end() ? nullptr : it->second.stage;
}

std::vector<std::string> StageRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : stages_) out.push_back(k);
  return out;
}

std::string StageRegistry::describe() const {
  std::string out;
  for (const auto& [k, v] : stages_) out += (out.empty() ? "" : ", ") + k;
  return out.empty() ? "none" : out;
}

std::string StageRegistry::version(std::string_view name) const {
  auto it = stages_.find(name);
  return it == stages_.end() ? std::string() : it->second.version;
}

sdk::Result<std::unique_ptr<ControlStageContext>> ControlStageContext::create(Options options,
                                                                              std::string_view prefix) {
  if (options.work_base.empty()) return sdk::fail(ErrorCode::InvalidArgument, "no work directory base", "work_base");
  if (auto ok = common::make_dirs(options.work_base, 0700); !ok)
    return sdk::fail(ErrorCode::Failed, "work directory " + options.work_base + ": " + ok.error().message);
  std::string pattern = options.work_base + "/" + std::string(prefix) + "XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data()))
    return sdk::fail(ErrorCode::Failed, "cannot make a work directory in " + options.work_base + ": " +
                                            std::string(::strerror(errno)));
  std::unique_ptr<ControlStageContext> ctx(new ControlStageContext(std::move(options)));
  ctx->work_dir_ = buf.data();
  return ctx;
}

ControlStageContext::~ControlStageContext() {
  if (work_dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(work_dir_, ec);
  if (ec) common::logger()->warn("work directory {} not removed: {}", work_dir_, ec.message());
}

void ControlStageContext::log(std::string_view line) {
  std::size_t start = 0;
  for (;;) {
    std::size_t nl = line.find('\n', start);
    std::string_view piece = line.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    if (nl == std::string_view::npos && piece.empty() && start > 0) break;
    if (options_.on_log) options_.on_log(piece);
    lines_.emplace_back(piece);
    if (lines_.size() > options_.max_log_lines) {
      lines_.erase(lines_.begin());
      ++dropped_;
    }
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
}

sdk::Result<Value> ControlStageContext::deploy(const std::string& module, const std::string& version,
                                               const Value& options) {
  if (!options_.deploy)
    return sdk::fail(ErrorCode::Unsupported, "this stage run cannot deploy (no deploy in its context)");
  if (!options_.dry_run_only) return options_.deploy(options_.operator_name, module, version, options);
  sdk::Value dry = options.is_object() ? options : sdk::Value::object();
  dry.set("dry_run", true);
  dry.erase("wait");  // a dry run has nothing to wait for
  return options_.deploy(options_.operator_name, module, version, dry);
}

}  // namespace mesh::control
