// A report plugin (kind `report`, mesh-report-NAME.so) loaded and ready to render: what `mesh
// --output NAME` prints a report with, and what mesh-control may render a stored report with
// (a pipeline's JUnit artifact) — the same plugins, given the same strings (decision records
// 0055, 0056).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "mesh/loader/loader.h"
#include "mesh/sdk/report.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::loader {

/// One loaded report plugin. Movable, not copyable; the plugin's library stays loaded while the
/// object lives. Not thread-safe: one render at a time (ReportRenderer's contract).
class ReportPlugin {
 public:
  /// Loads and configures (with an empty table) report plugin `name` from the first of `dirs`
  /// holding mesh-report-<name>.so. `role` is HostContext::role ("tool" for mesh, "control").
  /// Errors (all InvalidArgument, naming the plugin):
  /// - no such file: "no report plugin 'markdown' in /a, /b (installed: json, junit, text)";
  /// - the file does not load (ABI, descriptor, kind): the loader's reason, naming the file;
  /// - not a ReportRenderer, or its configure() failed.
  static sdk::Result<ReportPlugin> load(const PluginDirs& dirs, const std::string& name,
                                        const std::string& role = "tool");

  /// Renders `report` (a delivery or deploy report as the control plane answers it; borrowed
  /// for the call) with `now_ms` for ages. Unless the plugin asks for raw strings
  /// (ReportRenderer::raw_strings), every string in the report, at any depth, is first passed
  /// through common::printable (1024 bytes at most each), so nothing from a node reaches a
  /// terminal or a file as a control character or a line break.
  /// Errors: the plugin's own (InvalidArgument for a shape it cannot show; Internal).
  sdk::Result<std::string> render(const sdk::Value& report, std::int64_t now_ms) const;

  /// The plugin's name (`text`, `junit`, ...) and the file it came from.
  const std::string& name() const noexcept { return plugin_.name; }
  const std::string& path() const noexcept { return plugin_.path; }

 private:
  LoadedPlugin plugin_;
  std::shared_ptr<sdk::ReportRenderer> renderer_;
};

}  // namespace mesh::loader
