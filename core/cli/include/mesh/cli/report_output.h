// How `mesh` prints a report (`mesh report`, `mesh deploy`): through a report plugin
// (mesh-report-NAME.so, kind `report`) named by `--output NAME` — `text`, `json`, `junit` or any
// other installed one. The CLI keeps no renderer of its own for reports (decision record 0055).
#pragma once

#include <cstdint>
#include <utility>
#include <string>

#include "mesh/loader/loader.h"
#include "mesh/loader/report_plugin.h"
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

/// One loaded report plugin, for `--output NAME` (loader::ReportPlugin with the CLI's messages).
/// Movable, not copyable; the plugin stays loaded while the object lives. Not thread-safe.
class ReportOutput {
 public:
  /// Loads report plugin `name` from `dirs` (loader::ReportPlugin::load, role "tool").
  /// Errors (all InvalidArgument, so `mesh` exits 2 before sending anything), each starting
  /// "--output NAME: ": "no report plugin 'markdown' in /a, /b (installed: json, junit, text)", or
  /// why the file does not load, naming it.
  static sdk::Result<ReportOutput> load(const loader::PluginDirs& dirs, const std::string& name);

  /// Renders `report` (a delivery or deploy report as the control plane answered it) with
  /// `now_ms` for ages; strings are made printable unless the plugin asks for them raw
  /// (loader::ReportPlugin::render). Errors: the plugin's own.
  sdk::Result<std::string> render(const sdk::Value& report, std::int64_t now_ms) const {
    return plugin_.render(report, now_ms);
  }

  /// The plugin's name (`text`, `junit`, ...).
  const std::string& name() const noexcept { return plugin_.name(); }

 private:
  explicit ReportOutput(loader::ReportPlugin p) : plugin_(std::move(p)) {}
  loader::ReportPlugin plugin_;
};

}  // namespace mesh::cli
