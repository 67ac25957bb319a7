// How `mesh` prints a report (`mesh report`, `mesh deploy`): through a report plugin
// (mesh-report-NAME.so, kind `report`) named by `--output NAME` — `text`, `json`, `junit` or any
// other installed one. The CLI keeps no renderer of its own for reports (decision record 0055).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "mesh/loader/loader.h"
#include "mesh/sdk/report.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::cli {

/// The folders `mesh` loads report plugins from, in order: `plugin_dir_flag` (--plugin-dir),
/// else $NOX_MESH_PLUGIN_DIR, else the `[plugins] dir` (a string or a list) of `config_flag`
/// (--config, else $NOX_MESH_CONFIG), else the install-relative folders of default_plugin_dirs()
/// that exist (all of them when none does, so that a message names them).
/// Errors: InvalidArgument naming the config file and key when it cannot be read or `dir` is
/// not a string or a list of strings. Reads the config file; thread-safe otherwise.
sdk::Result<loader::PluginDirs> report_plugin_dirs(const std::string& plugin_dir_flag,
                                                   const std::string& config_flag);

/// One loaded report plugin. Movable, not copyable; the plugin's library stays loaded while the
/// object lives. Not thread-safe (one render at a time).
class ReportOutput {
 public:
  /// Loads report plugin `name` from the first of `dirs` holding mesh-report-<name>.so.
  /// Errors (all InvalidArgument, so `mesh` exits 2 before sending anything):
  /// - no such plugin: "--output markdown: no report plugin 'markdown' in /a, /b (installed:
  ///   json, junit, text)";
  /// - the file exists but does not load (ABI, not a report plugin): the loader's reason, naming
  ///   the file.
  static sdk::Result<ReportOutput> load(const loader::PluginDirs& dirs, const std::string& name);

  /// Renders `report` (a delivery or deploy report as the control plane answered it) with
  /// `now_ms` for ages. Unless the plugin asks for raw strings (ReportRenderer::raw_strings), every
  /// string is first passed through printable_values(), so nothing from a node reaches the
  /// terminal or the file as a control character or a line break.
  /// Errors: the plugin's own (InvalidArgument for a shape it cannot show, Internal).
  sdk::Result<std::string> render(const sdk::Value& report, std::int64_t now_ms) const;

  /// The plugin's name (`text`, `junit`, ...).
  const std::string& name() const noexcept { return plugin_.name; }

 private:
  loader::LoadedPlugin plugin_;
  std::shared_ptr<sdk::ReportRenderer> renderer_;
};

}  // namespace mesh::cli
