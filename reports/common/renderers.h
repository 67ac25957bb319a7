// The built-in report renderers (plugins `text`, `json`, `junit`): the classes, in one static
// library so that unit tests construct them directly; each plugin's plugin.cpp only exports one.
// Shapes read: docs/reports.md (the delivery report of docs/protocol.md and the deploy report of
// `mesh deploy --output json`). Decision records 0055 and 0056.
#pragma once

#include <cstdint>
#include <string>

#include "mesh/sdk/report.h"

namespace mesh::reports {

/// The delivery report as `mesh report` has always printed it, and the deploy report in the same
/// style with its skipped, halted and not-written nodes and its waves. Pure over its input.
std::string render_text(const sdk::Value& report, std::int64_t now_ms);

/// JUnit XML: a <testsuites> holding one <testsuite> per delivery (a deploy: per written wave),
/// one <testcase> per node: applied = passed, failed = <failure>, outstanding and superseded =
/// <skipped>; a deploy adds a suite for the nodes it did not deliver to (skipped as ineligible,
/// or in waves a halt left unwritten). Pure over its input.
std::string render_junit(const sdk::Value& report, std::int64_t now_ms);

/// Plugin `text`: render_text.
class TextReport final : public sdk::ReportRenderer {
 public:
  using ReportRenderer::ReportRenderer;

 protected:
  sdk::Result<std::string> do_render(const sdk::Value& report, std::int64_t now_ms) override;
};

/// Plugin `json`: the report as one JSON document and a newline, strings as they came.
class JsonReport final : public sdk::ReportRenderer {
 public:
  using ReportRenderer::ReportRenderer;
  bool raw_strings() const noexcept override { return true; }

 protected:
  sdk::Result<std::string> do_render(const sdk::Value& report, std::int64_t now_ms) override;
};

/// Plugin `junit`: render_junit.
class JunitReport final : public sdk::ReportRenderer {
 public:
  using ReportRenderer::ReportRenderer;

 protected:
  sdk::Result<std::string> do_render(const sdk::Value& report, std::int64_t now_ms) override;
};

}  // namespace mesh::reports
