// The delivery report (docs/protocol.md "API" and "Delivery outcomes", INTERFACE.md `mesh
// report`), assembled from store records by a pure function so that its rules are tested
// without a store or a clock. Per target (node, revision), from the current identity's report
// for exactly that revision:
//   - "applied" → applied (final: nothing later changes it);
//   - "failed" or "refused" → failed (a later revision never rewrites it);
//   - else (no report, or the host's own "superseded"), when a newer revision was written for the
//     node → superseded, `by` the first newer one {revision, delivery, outcome}, its outcome
//     as it stands now ("outstanding" until it ends);
//   - else → outstanding, with the node's last contact (null when never heard from).
// Outstanding is not failure, and silence is never turned into "down".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/sdk/store.h"
#include "mesh/sdk/value.h"

namespace mesh::control {

/// What the store knows about one target of a delivery.
struct TargetStatus {
  sdk::DeliveryTarget target;
  /// The node's apply report for exactly `target.revision`, if any.
  std::optional<sdk::ApplyReport> report;
  /// The node's record; nullopt when the store no longer knows the node, or (delivery_report)
  /// when `report` answers the target itself (applied or failed): it is shown only for the others.
  std::optional<sdk::NodeRecord> node;
  /// The first revision written for the node after `target.revision`, if any, and the current
  /// identity's report for it.
  std::optional<sdk::RevisionRef> next;
  std::optional<sdk::ApplyReport> next_report;
  /// True when `next` has no report but a revision newer than it was written too: `next` will
  /// never be applied either, it is superseded itself (shown as `by.outcome`).
  bool next_superseded = false;
};

/// Builds the report JSON:
/// {"delivery","declared","at",
///  "applied":[{"node","revision","at"}],
///  "failed":[{"node","revision","outcome","resource","reason","code","at"}],
///  "outstanding":[{"node","revision","last_contact"|null,"age_s"|null}],
///  "superseded":[{"node","revision","applied_revision",
///                 "by":{"revision","delivery","outcome"}|null}]}
/// Each list is sorted by node name. `age_s` is whole seconds from last contact to `now_ms`.
/// `code` is the stored report's ErrorCode name, or null when it has none (a report stored
/// before codes were kept).
sdk::Value build_delivery_report(const sdk::DeliveryRecord& delivery,
                                 const std::vector<TargetStatus>& targets, std::int64_t now_ms);

/// A report's `code` as shown to operators: the string, or null when empty (none known).
sdk::Value report_code_value(const std::string& code);

/// Whether `code` may be an apply report's `code` field as a host sends it: "" (none), or an
/// ErrorCode name's shape — a lower-case letter, then lower-case letters, digits and '_', at
/// most 32 bytes. A name this build does not know (a newer host's) is accepted as it is.
bool valid_report_code(std::string_view code);

}  // namespace mesh::control
