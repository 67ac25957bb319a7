#include "markdown_report.h"

#include <vector>

#include "mesh/support/report_text.h"

namespace example {
namespace {

using mesh::sdk::Value;
namespace support = mesh::support;

/// A table cell: one line, `|` and backticks escaped.
std::string cell(const std::string& s) {
  std::string out;
  for (char c : support::one_line(s)) {
    if (c == '|' || c == '`' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

struct Row {
  std::string node, outcome, detail;
};

}  // namespace

std::string render_markdown(const Value& report, std::int64_t now_ms) {
  const bool deploy = report.find("deploy") != nullptr;
  const std::int64_t declared = report.get_int("declared", 0);
  const auto applied = support::report_list(report, "applied");
  std::string out;
  if (deploy)
    out += "## Deploy " + support::int_field(report, "deploy", "?") + ": " + cell(report.get_string("module")) + " " +
           cell(report.get_string("version")) + "\n\n";
  else
    out += "## Delivery " + support::int_field(report, "delivery", "?") + "\n\n";
  out += "Declaration updated for " + std::to_string(declared) + (declared == 1 ? " node" : " nodes") + ": **" +
         std::to_string(applied.size()) + " of " + std::to_string(declared) + " applied**.\n\n";

  std::vector<Row> rows;
  for (const auto& a : applied) rows.push_back({a.get_string("node"), "applied", "revision " + support::int_field(a, "revision")});
  for (const auto& f : support::report_list(report, "failed"))
    rows.push_back({f.get_string("node"), "**failed**", support::failure_detail(f, "(no reason given)")});
  for (const auto& o : support::report_list(report, "outstanding"))
    rows.push_back({o.get_string("node"), "outstanding", "last seen " + support::last_contact(o, now_ms, true)});
  for (const auto& s : support::report_list(report, "superseded"))
    rows.push_back({s.get_string("node"), "superseded", "applied revision " + support::int_field(s, "applied_revision")});
  for (const auto& s : support::report_list(report, "skipped"))
    rows.push_back({s.get_string("node"), "skipped", s.get_string("reason")});
  for (const auto& w : support::report_list(report, "waves")) {
    const Value* d = w.find("delivery");
    if (d && d->is_int()) continue;
    if (const Value* nodes = w.find("nodes"); nodes && nodes->is_array())
      for (const auto& n : nodes->as_array())
        if (n.is_string()) rows.push_back({n.as_string(), "not written", "wave " + support::int_field(w, "wave")});
  }
  out += "| node | outcome | detail |\n|---|---|---|\n";
  for (const auto& r : rows) out += "| " + cell(r.node) + " | " + r.outcome + " | " + cell(r.detail) + " |\n";
  if (const Value* h = report.find("halted"); h && h->is_object())
    out += "\n**Halted at wave " + support::int_field(*h, "wave", "?") + "**" +
           (h->get_string("node").empty() ? "" : " by " + cell(h->get_string("node"))) + ": " +
           cell(h->get_string("reason")) + "\n";
  return out;
}

mesh::sdk::Result<std::string> MarkdownReport::do_render(const Value& report, std::int64_t now_ms) {
  if (!report.is_object()) return mesh::sdk::fail(mesh::sdk::ErrorCode::InvalidArgument, "the report is not a JSON object");
  return render_markdown(report, now_ms);
}

}  // namespace example
