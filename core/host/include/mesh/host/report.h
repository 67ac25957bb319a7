// JSON bodies the host sends (docs/protocol.md): apply reports and drift reports, and the
// per-resource text report of `mesh-host apply`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mesh/engine/engine.h"

namespace mesh::host {

/// Outbox key of an apply report: "apply-" + zero-padded revision (sorts by revision).
std::string outbox_key_for_revision(std::uint64_t revision);

/// Changed or removed resources listed one by one in an apply report; the rest are counted.
inline constexpr std::size_t kReportedChanges = 100;

/// The apply report body for `result` (protocol "Apply report"): counts of every per-resource
/// outcome, every failed resource in full, the first kReportedChanges changed or removed ones
/// (unchanged and not attempted ones by count only, `resources_omitted`), and the complete owned
/// list with `owned_count` and `owned_digest` (SHA-256 of the `owned` array's JSON). `code` is
/// the result's ErrorCode name ("" when applied); a listed resource has `code` only when it has
/// one (failed, cancelled). A report
/// larger than the broker's limit is sent in parts (protocol::parts).
std::string apply_report_json(const std::string& node, const engine::ApplyResult& result, std::int64_t at_ms);

/// The drift report body (protocol "Drift report").
std::string drift_report_json(const std::string& node, const std::string& scan, std::uint64_t revision,
                              const std::vector<engine::DriftItem>& items, std::int64_t at_ms);

/// Human-readable per-resource report for `mesh-host apply`: one apply_report_line() per outcome
/// of `result.resources`, then apply_report_tail(). Throws only std::bad_alloc.
std::string apply_report_text(const engine::ApplyResult& result, bool dry_run);

/// One line of the text report, newline included:
///   changed        file:/etc/motd (properties.content, properties.mode)
///   failed         file:/etc/x: permission_denied: open /etc/x: Permission denied
/// (a failed or cancelled resource: its ErrorCode name, then the reason). For a caller printing
/// each outcome as the engine decides it (ApplyOptions::on_outcome).
std::string apply_report_line(const engine::ResourceOutcome& outcome);

/// The last line of the text report, newline included, counting the outcomes of
/// `result.resources` and `result.not_kept`:
///   applied: 2 changed, 0 removed, 1 unchanged
///   planned: 2 to change, 0 to remove, 1 unchanged (nothing was changed)     (dry_run)
///   failed at file:/etc/x
std::string apply_report_tail(const engine::ApplyResult& result, bool dry_run);

}  // namespace mesh::host
