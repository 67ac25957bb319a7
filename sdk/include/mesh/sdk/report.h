// Nox Mesh SDK — report plugins: render a delivery report for people (text), programs (json)
// or CI systems (junit). The report is handed over as the JSON document of docs/protocol.md
// ("delivery report"), so a renderer sees exactly what `mesh report --output json` prints.
#pragma once

#include <string>

#include "mesh/sdk/plugin.h"
#include "mesh/sdk/value.h"

namespace mesh::sdk {

class ReportRenderer : public Plugin {
 public:
  using Plugin::Plugin;
  /// Renders `report` (the delivery report object). `now_ms` (ms since the Unix epoch) lets a
  /// renderer print ages ("last seen 4 minutes ago"). Errors: InvalidArgument (unexpected shape).
  Result<std::string> render(const Value& report, std::int64_t now_ms) noexcept {
    return guard("render", [&] { return do_render(report, now_ms); });
  }

 protected:
  virtual Result<std::string> do_render(const Value& report, std::int64_t now_ms) = 0;
};

}  // namespace mesh::sdk
