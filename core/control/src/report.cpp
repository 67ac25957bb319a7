#include "mesh/control/report.h"

#include <algorithm>

#include "mesh/common/clock.h"
#include "node_facts.h"

namespace mesh::control {
namespace {

using sdk::Value;

Value sorted_by_node(std::vector<Value> items) {
  std::stable_sort(items.begin(), items.end(), [](const Value& a, const Value& b) {
    return a.get_string("node") < b.get_string("node");
  });
  return Value(Value::Array(std::move(items)));
}

}  // namespace

Value report_code_value(const std::string& code) { return code.empty() ? Value(nullptr) : Value(code); }

bool valid_report_code(std::string_view code) {
  if (code.empty()) return true;
  if (code.size() > 32 || code[0] < 'a' || code[0] > 'z') return false;
  return std::all_of(code.begin(), code.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

Value build_delivery_report(const sdk::DeliveryRecord& delivery,
                            const std::vector<TargetStatus>& targets, std::int64_t now_ms) {
  std::vector<Value> applied, failed, outstanding, superseded;
  for (const auto& t : targets) {
    const auto& node = t.target.node;
    const auto rev = static_cast<std::int64_t>(t.target.revision);
    const bool reported = t.report && t.report->revision == t.target.revision;
    if (reported && t.report->outcome != "superseded") {
      const auto& r = *t.report;
      Value e = Value::object();
      e.set("node", node);
      e.set("revision", rev);
      // `at`: when the control plane received it (its clock), not the time the host claims.
      const std::int64_t at = r.received_at_ms > 0 ? r.received_at_ms : r.at_ms;
      // `at_ms`: the same instant in epoch milliseconds, for the time from the delivery's write
      // (its `at_ms`) to this answer that a JUnit testcase reports.
      if (r.outcome == "applied") {
        e.set("at", common::format_rfc3339(at));
        e.set("at_ms", at);
        applied.push_back(std::move(e));
      } else {
        e.set("outcome", r.outcome);
        // null when the host refused the whole declaration, not one resource.
        e.set("resource", r.resource.empty() ? Value(nullptr) : Value(r.resource));
        e.set("reason", r.reason);
        e.set("code", report_code_value(r.code));
        e.set("at", common::format_rfc3339(at));
        e.set("at_ms", at);
        failed.push_back(std::move(e));
      }
      continue;
    }
    if (t.next || reported) {
      // Not ended when a newer revision was written (or the host cancelled it for one).
      Value e = Value::object();
      e.set("node", node);
      e.set("revision", rev);
      e.set("applied_revision", static_cast<std::int64_t>(t.node ? t.node->applied_revision : 0));
      if (t.next) {
        Value by = Value::object();
        by.set("revision", static_cast<std::int64_t>(t.next->revision));
        by.set("delivery", static_cast<std::int64_t>(t.next->delivery));
        const bool ended = t.next_report && t.next_report->revision == t.next->revision;
        by.set("outcome", ended                ? t.next_report->outcome
                          : t.next_superseded ? std::string("superseded")
                                              : std::string("outstanding"));
        e.set("by", std::move(by));
      } else {
        e.set("by", nullptr);
      }
      superseded.push_back(std::move(e));
      continue;
    }
    Value e = Value::object();
    e.set("node", node);
    e.set("revision", rev);
    // A briefing is contact too (node_facts.h).
    if (const auto contact = t.node ? detail::last_contact_ms(*t.node) : std::nullopt) {
      e.set("last_contact", common::format_rfc3339(*contact));
      e.set("age_s", std::max<std::int64_t>(0, (now_ms - *contact) / 1000));
    } else {
      e.set("last_contact", nullptr);
      e.set("age_s", nullptr);
    }
    outstanding.push_back(std::move(e));
  }

  Value out = Value::object();
  out.set("delivery", static_cast<std::int64_t>(delivery.id));
  out.set("declared", static_cast<std::int64_t>(targets.size()));
  out.set("at", common::format_rfc3339(delivery.created_at_ms));
  out.set("at_ms", delivery.created_at_ms);
  out.set("applied", sorted_by_node(std::move(applied)));
  out.set("failed", sorted_by_node(std::move(failed)));
  out.set("outstanding", sorted_by_node(std::move(outstanding)));
  out.set("superseded", sorted_by_node(std::move(superseded)));
  return out;
}

}  // namespace mesh::control
