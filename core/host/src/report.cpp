#include "mesh/host/report.h"

#include <cstdio>

#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/sdk/value.h"

namespace mesh::host {

std::string outbox_key_for_revision(std::uint64_t revision) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "apply-%020llu", static_cast<unsigned long long>(revision));
  return buf;
}

std::string apply_report_json(const std::string& node, const engine::ApplyResult& r, std::int64_t at_ms) {
  sdk::Value v = sdk::Value::object();
  v.set("node", node);
  v.set("revision", static_cast<std::int64_t>(r.revision));
  v.set("at", common::format_rfc3339(at_ms));
  v.set("outcome", r.outcome);
  v.set("resource", r.failed_resource);
  v.set("reason", r.reason);
  v.set("code", r.code);
  // The owned list is the recovery copy: always complete (the report goes in parts when it is
  // larger than the broker's limit), with its count and digest so a reader can tell it whole.
  sdk::Value owned = sdk::Value::array();
  for (const auto& o : r.owned) owned.as_array().push_back(o);
  v.set("owned_count", static_cast<std::int64_t>(r.owned.size()));
  v.set("owned_digest", common::sha256_hex(owned.to_json()));
  v.set("owned", std::move(owned));
  // Parallel to "owned": the digest of each one's read-back state, for a checked recovery.
  if (r.owned_digests.size() == r.owned.size() && !r.owned.empty()) {
    sdk::Value digests = sdk::Value::array();
    for (const auto& d : r.owned_digests) digests.as_array().push_back(d);
    v.set("owned_digests", std::move(digests));
  }
  // Per-resource entries: every failed one in full, the first kReportedChanges changed or
  // removed ones, the rest by count only (`counts`, `resources_omitted`).
  sdk::Value counts = sdk::Value::object();
  std::int64_t changed = 0, unchanged = 0, removed = 0, failed = 0, not_attempted = 0, omitted = 0;
  std::size_t listed_changes = 0;
  sdk::Value resources = sdk::Value::array();
  for (const auto& ro : r.resources) {
    if (ro.outcome == "changed") ++changed;
    else if (ro.outcome == "unchanged") ++unchanged;
    else if (ro.outcome == "removed") ++removed;
    else if (ro.outcome == "failed") ++failed;
    else if (ro.outcome == "not_attempted") ++not_attempted;
    const bool keep = ro.outcome == "failed" ||
                      ((ro.outcome == "changed" || ro.outcome == "removed") && listed_changes++ < kReportedChanges);
    if (!keep) {
      ++omitted;
      continue;
    }
    sdk::Value e = sdk::Value::object();
    e.set("resource", ro.resource);
    e.set("outcome", ro.outcome);
    sdk::Value changes = sdk::Value::array();
    for (const auto& c : ro.changes) changes.as_array().push_back(c.path);
    e.set("changes", std::move(changes));
    if (!ro.reason.empty()) e.set("reason", ro.reason);
    if (!ro.code.empty()) e.set("code", ro.code);
    resources.as_array().push_back(std::move(e));
  }
  // The outcomes the engine counted without keeping them (ApplyOptions::keep_changes) are omitted too.
  const engine::OutcomeCounts& more = r.not_kept;
  counts.set("changed", changed + static_cast<std::int64_t>(more.changed));
  counts.set("unchanged", unchanged + static_cast<std::int64_t>(more.unchanged));
  counts.set("removed", removed + static_cast<std::int64_t>(more.removed));
  counts.set("failed", failed + static_cast<std::int64_t>(more.failed));
  counts.set("not_attempted", not_attempted + static_cast<std::int64_t>(more.not_attempted));
  v.set("counts", std::move(counts));
  v.set("resources", std::move(resources));
  v.set("resources_omitted", omitted + static_cast<std::int64_t>(more.total()));
  return v.to_json();
}

std::string drift_report_json(const std::string& node, const std::string& scan, std::uint64_t revision,
                              const std::vector<engine::DriftItem>& items, std::int64_t at_ms) {
  sdk::Value v = sdk::Value::object();
  v.set("node", node);
  v.set("scan", scan);
  v.set("revision", static_cast<std::int64_t>(revision));
  v.set("at", common::format_rfc3339(at_ms));
  sdk::Value arr = sdk::Value::array();
  for (const auto& i : items) {
    sdk::Value e = sdk::Value::object();
    e.set("resource", i.resource);
    e.set("found", i.found);
    e.set("action", i.action);
    arr.as_array().push_back(std::move(e));
  }
  v.set("resources", std::move(arr));
  return v.to_json();
}

namespace {
void append_report_line(std::string& out, const engine::ResourceOutcome& ro) {
  char label[24];
  std::snprintf(label, sizeof label, "%-14s ", ro.outcome.c_str());
  out += label;
  out += ro.resource;
  if (!ro.changes.empty()) {
    out += " (";
    for (std::size_t i = 0; i < ro.changes.size(); ++i) out += (i ? ", " : "") + ro.changes[i].path;
    out += ")";
  }
  if (!ro.code.empty()) out += ": " + ro.code;
  if (!ro.reason.empty()) out += ": " + ro.reason;
  out += "\n";
}
}  // namespace

std::string apply_report_line(const engine::ResourceOutcome& outcome) {
  std::string out;
  append_report_line(out, outcome);
  return out;
}

std::string apply_report_tail(const engine::ApplyResult& r, bool dry_run) {
  std::size_t changed = r.not_kept.changed + r.not_kept.would_change;
  std::size_t unchanged = r.not_kept.unchanged;
  std::size_t removed = r.not_kept.removed + r.not_kept.would_remove;
  for (const auto& ro : r.resources) {
    if (ro.outcome == "changed" || ro.outcome == "would_change") ++changed;
    else if (ro.outcome == "unchanged") ++unchanged;
    else if (ro.outcome == "removed" || ro.outcome == "would_remove") ++removed;
  }
  char tail[160];
  if (dry_run)
    std::snprintf(tail, sizeof tail, "planned: %zu to change, %zu to remove, %zu unchanged (nothing was changed)\n",
                  changed, removed, unchanged);
  else if (r.outcome == "applied")
    std::snprintf(tail, sizeof tail, "applied: %zu changed, %zu removed, %zu unchanged\n", changed, removed, unchanged);
  else
    std::snprintf(tail, sizeof tail, "failed at %s\n", r.failed_resource.c_str());
  return tail;
}

std::string apply_report_text(const engine::ApplyResult& r, bool dry_run) {
  std::string out;
  {
    // Reserved once: at 20,000 resources the text is ~2 MB, and growing it by doublings held
    // the old and the new buffer at the end of the apply.
    std::size_t size = 160;
    for (const auto& ro : r.resources) {
      size += 24 + ro.resource.size() + ro.code.size() + ro.reason.size();
      for (const auto& c : ro.changes) size += c.path.size() + 2;
    }
    out.reserve(size);
  }
  for (const auto& ro : r.resources) append_report_line(out, ro);
  out += apply_report_tail(r, dry_run);
  return out;
}

}  // namespace mesh::host
