// The text report: the delivery report exactly as `mesh report` printed it before report
// plugins, and the deploy report in the same columns (docs/reports.md).
#include <set>
#include <vector>

#include "mesh/support/report_text.h"
#include "renderers.h"

namespace mesh::reports {
namespace {

using sdk::Value;
using support::failure_detail;
using support::int_field;
using support::report_list;

constexpr std::size_t kLabel = 13;  // "outstanding  "

std::string pad(std::string s, std::size_t width = kLabel) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string plural(std::int64_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

/// " (unchanged, revision 4)" for an unchanged node's entry (the revision it holds), else "".
std::string held_text(const Value& e) {
  return e.get_bool("unchanged", false) ? " (unchanged, revision " + int_field(e, "revision", "?") + ")" : "";
}

std::string failure_text(const Value& f) {
  std::string s = f.get_string("node") + held_text(f) + ": ";
  if (f.get_string("outcome") == "refused") s += "refused: ";
  return s + failure_detail(f, "(no reason given)");
}

/// How many entries of the outcome lists are an unchanged node's (the revision it holds).
std::int64_t held_count(const Value& report) {
  std::int64_t n = 0;
  for (const char* k : {"applied", "failed", "outstanding", "superseded"})
    for (const auto& e : report_list(report, k)) n += e.get_bool("unchanged", false) ? 1 : 0;
  return n;
}

/// "web-01 by revision 8 (delivery 12, failed)", or "web-01 applied revision 7" without `by`.
std::string superseded_text(const Value& s) {
  const Value* by = s.find("by");
  if (!by || !by->is_object())
    return s.get_string("node") + " applied revision " + int_field(s, "applied_revision");
  return s.get_string("node") + " by revision " + int_field(*by, "revision") + " (delivery " +
         int_field(*by, "delivery") + ", " + by->get_string("outcome") + ")";
}

/// "LABEL  N — first\n                 second\n": one entry per line, aligned after the dash.
std::string multiline(const char* label, const Value::Array& items, std::string (*text)(const Value&)) {
  if (items.empty()) return "";
  std::string out;
  const std::string head = pad(label) + std::to_string(items.size()) + " — ";
  const std::string indent(kLabel + std::to_string(items.size()).size() + 3, ' ');
  for (std::size_t i = 0; i < items.size(); ++i) out += (i == 0 ? head : indent) + text(items[i]) + "\n";
  return out;
}

/// The lines every report has: applied, failed, outstanding, superseded.
std::string outcome_lines(const Value& report, std::int64_t declared, std::int64_t now_ms) {
  const auto applied = report_list(report, "applied");
  const auto outstanding = report_list(report, "outstanding");
  const auto superseded = report_list(report, "superseded");
  std::string out = pad("applied") + std::to_string(applied.size()) + " of " + std::to_string(declared) + "\n";
  out += multiline("failed", report_list(report, "failed"), failure_text);
  if (!outstanding.empty()) {
    out += pad("outstanding") + std::to_string(outstanding.size()) + " — ";
    for (std::size_t i = 0; i < outstanding.size(); ++i)
      out += (i ? ", " : "") + outstanding[i].get_string("node") + held_text(outstanding[i]) + " last seen " +
             support::last_contact(outstanding[i], now_ms, false);
    out += "\n";
  }
  if (!superseded.empty()) {
    out += pad("superseded") + std::to_string(superseded.size()) + " — ";
    for (std::size_t i = 0; i < superseded.size(); ++i) out += (i ? ", " : "") + superseded_text(superseded[i]);
    out += "\n";
  }
  return out;
}

std::string delivery_text(const Value& report, std::int64_t now_ms) {
  const std::int64_t declared = report.get_int("declared", 0);
  std::string out = "delivery " + int_field(report, "delivery", "?");
  if (!report.get_string("at").empty()) out += " (" + report.get_string("at") + ")";
  out += "\n";
  out += pad("delivered") + "declaration updated for " + plural(declared, "node") + "\n";
  return out + outcome_lines(report, declared, now_ms);
}

std::string skipped_text(const Value& s) {
  const std::string reason = support::one_line(s.get_string("reason"));
  return s.get_string("node") + (reason.empty() ? "" : ": " + reason);
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

/// The names in a list of strings or of objects with a `node`.
std::vector<std::string> strings(const Value* v) {
  std::vector<std::string> out;
  if (v && v->is_array())
    for (const auto& s : v->as_array()) {
      if (s.is_string()) out.push_back(s.as_string());
      else if (s.is_object() && !s.get_string("node").empty()) out.push_back(s.get_string("node"));
    }
  return out;
}

/// A dry run's per-node changes: "  web-01 (update): added file:/etc/motd; changed package:nginx".
std::string changes_text(const Value& report) {
  Value::Array nodes = report_list(report, "nodes");
  if (nodes.empty()) nodes = report_list(report, "changes");
  std::string out;
  for (const auto& n : nodes) {
    if (!n.is_object()) continue;
    out += "  " + n.get_string("node");
    if (!n.get_string("action").empty()) out += " (" + n.get_string("action") + ")";
    bool any = false;
    for (const char* what : {"added", "changed", "removed"}) {
      auto items = strings(n.find(what));
      if (items.empty()) continue;
      out += std::string(any ? ";" : ":") + " " + what + " " + join(items);
      any = true;
    }
    out += any ? "\n" : ": module versions only\n";
  }
  return out;
}

/// "unchanged    2 — web-06, web-07" and "dropped      1 — web-08 (module resources removed)".
std::string membership_lines(const Value& report) {
  std::string out;
  const auto unchanged = strings(report.find("unchanged"));
  if (!unchanged.empty()) out += pad("unchanged") + std::to_string(unchanged.size()) + " — " + join(unchanged) + "\n";
  const auto dropped = strings(report.find("dropped"));
  if (!dropped.empty())
    out += pad("dropped") + std::to_string(dropped.size()) + " — " + join(dropped) + " (module resources removed)\n";
  return out;
}

std::string deploy_text(const Value& report, std::int64_t now_ms) {
  const std::int64_t declared = report.get_int("declared", 0);
  const bool dry_run = report.get_bool("dry_run", false);
  std::string what = "module " + report.get_string("module") + " " + report.get_string("version");
  if (!report.get_string("selector").empty()) what += " to " + report.get_string("selector");
  if (dry_run) {
    Value::Array nodes = report_list(report, "nodes");
    if (nodes.empty()) nodes = report_list(report, "changes");
    std::string out = "dry run: deploying " + what + " would write " +
                      plural(static_cast<std::int64_t>(nodes.size()), "node") + " (nothing was written)\n";
    return out + changes_text(report) + membership_lines(report) +
           multiline("skipped", report_list(report, "skipped"), skipped_text);
  }
  std::string out = "deploy " + int_field(report, "deploy", "?") + ": " + what;
  if (!report.get_string("operator").empty()) out += " by " + report.get_string("operator");
  if (!report.get_string("at").empty()) out += " (" + report.get_string("at") + ")";
  out += "\n";

  // Waves: the written ones have a delivery; those after a halt do not.
  std::vector<std::string> deliveries;
  std::vector<std::string> unwritten;
  for (const auto& w : report_list(report, "waves")) {
    const Value* d = w.find("delivery");
    if (d && d->is_int())
      deliveries.push_back(std::to_string(d->as_int()));
    else
      for (auto& n : strings(w.find("nodes"))) unwritten.push_back(std::move(n));
  }
  if (deliveries.empty())
    if (const Value* d = report.find("delivery"); d && d->is_int()) deliveries.push_back(std::to_string(d->as_int()));

  // "applied N of M": M counts the nodes written and the unchanged ones reported with the
  // revision they hold (an unchanged node that never applied it is not fine: decision record 68).
  const std::int64_t held = held_count(report);
  if (deliveries.empty() && declared == 0) {
    out += pad("delivered") + "nothing: no selected node's declaration changes\n";
    if (held > 0) out += outcome_lines(report, held, now_ms);
  } else {
    out += pad("delivered") + "declaration updated for " + plural(declared, "node");
    if (deliveries.size() > 1)
      out += " in " + std::to_string(deliveries.size()) + " waves (deliveries " + join(deliveries) + ")";
    else if (deliveries.size() == 1)
      out += " (delivery " + deliveries.front() + ")";
    out += "\n" + outcome_lines(report, declared + held, now_ms);
  }
  out += membership_lines(report);
  out += multiline("skipped", report_list(report, "skipped"), skipped_text);
  if (const Value* h = report.find("halted"); h && h->is_object()) {
    // "halted at wave 1 — web-01: …": a sentence, not a count, so not in the columns.
    std::string line = "halted at wave " + int_field(*h, "wave", "?");
    const std::string node = h->get_string("node");
    const std::string reason = support::one_line(h->get_string("reason"));
    if (!node.empty() || !reason.empty()) line += " — ";
    if (!node.empty()) line += node + (reason.empty() ? "" : ": ");
    out += line + reason + "\n";
    if (!unwritten.empty())
      out += pad("not written") + std::to_string(unwritten.size()) + " — " + join(unwritten) + "\n";
  } else if (report.get_string("state") == "running" && !unwritten.empty()) {
    // Still rolling out: the later waves are written as the current one applies. Not done, so
    // never read as done: say how far it is and who is still to come.
    const std::size_t waves = report_list(report, "waves").size();
    out += "running: wave " + std::to_string(deliveries.size()) + " of " + std::to_string(waves) +
           " written; the next is written when this one has applied (mesh deploy --show " +
           int_field(report, "deploy", "?") + ")\n";
    out += pad("not written") + std::to_string(unwritten.size()) + " — " + join(unwritten) + "\n";
  } else if (report.get_string("state") == "superseded") {
    // Overtaken by a newer deploy of the module: its later waves were never written.
    out += "superseded by deploy " + int_field(report, "superseded_by", "?") + " of module " +
           report.get_string("module") + " (its later waves are not written)\n";
    if (!unwritten.empty())
      out += pad("not written") + std::to_string(unwritten.size()) + " — " + join(unwritten) + "\n";
  }
  return out;
}

}  // namespace

std::string render_text(const Value& report, std::int64_t now_ms) {
  return report.find("deploy") || report.get_bool("dry_run", false) ? deploy_text(report, now_ms)
                                                                    : delivery_text(report, now_ms);
}

sdk::Result<std::string> TextReport::do_render(const Value& report, std::int64_t now_ms) {
  if (!report.is_object()) return sdk::fail(sdk::ErrorCode::InvalidArgument, "the report is not a JSON object");
  return render_text(report, now_ms);
}

}  // namespace mesh::reports
