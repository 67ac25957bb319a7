// Nox Mesh SDK — report plugins: render a delivery or deploy report for people (text), programs
// (json) or CI systems (junit). The report is handed over as the JSON document the control plane
// answered with (docs/protocol.md "delivery report" and "deploy report"), so a renderer sees
// exactly what `mesh report --output json` and `mesh deploy --output json` print.
//
// `mesh --output NAME` loads the report plugin NAME (file mesh-report-NAME.so) from its plugin
// folders; docs/reports.md describes both report shapes and how to write a renderer.
#pragma once

#include <cstdint>
#include <string>

#include "mesh/sdk/plugin.h"
#include "mesh/sdk/value.h"

namespace mesh::sdk {

class ReportRenderer : public Plugin {
 public:
  using Plugin::Plugin;
  /// Renders `report`: a delivery report (has "delivery", no "deploy") or a deploy report (has
  /// "deploy": the delivery report's lists over all waves plus "module", "version", "skipped",
  /// "waves", "halted"). Tell them apart with report.find("deploy").
  /// @param report the report object; borrowed for the call only. Unless raw_strings() is true,
  ///        every string in it (at any depth, not object keys) has been made printable by the
  ///        caller: control characters, line breaks and bidirectional controls are escaped
  ///        (`\n`, `\x1b`, `\u202e`), so a value from a node cannot move the cursor, split a line
  ///        or forge a line of the report.
  /// @param now_ms the caller's clock (ms since the Unix epoch), for ages ("last seen 4 minutes
  ///        ago") when an entry has no `age_s` (the control plane's own age, to be preferred).
  /// @return the whole output, newline-terminated, as the program prints it to stdout.
  /// Errors: InvalidArgument (a shape the renderer cannot show, naming the field); Internal (an
  /// exception escaped do_render). Thread safety: the host calls render from one thread at a time.
  Result<std::string> render(const Value& report, std::int64_t now_ms) noexcept {
    return guard("render", [&] { return do_render(report, now_ms); });
  }

 protected:
  /// Implements render(); may throw (turned into Internal).
  virtual Result<std::string> do_render(const Value& report, std::int64_t now_ms) = 0;

 public:
  /// Whether render() wants the report's strings exactly as the control plane sent them (true:
  /// a machine format that must round-trip them, as `json` does) or made printable (false, the
  /// default: for a terminal, a file people read, XML). Constant for the plugin's life.
  virtual bool raw_strings() const noexcept { return false; }
};

}  // namespace mesh::sdk
