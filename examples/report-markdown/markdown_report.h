// A report plugin that prints a delivery or deploy report as a Markdown table (for a merge
// request comment or a CI job summary): `mesh report --output markdown`.
#pragma once

#include <cstdint>
#include <string>

#include "mesh/sdk/report.h"

namespace example {

/// The report as Markdown: a heading, a summary line, one table row per node (applied, failed,
/// outstanding, superseded, skipped, not written) and, for a halted deploy, what halted it.
/// `|` and backticks in values are escaped so that a value cannot break the table. Pure.
std::string render_markdown(const mesh::sdk::Value& report, std::int64_t now_ms);

class MarkdownReport final : public mesh::sdk::ReportRenderer {
 public:
  using ReportRenderer::ReportRenderer;

 protected:
  mesh::sdk::Result<std::string> do_render(const mesh::sdk::Value& report, std::int64_t now_ms) override;
};

}  // namespace example
