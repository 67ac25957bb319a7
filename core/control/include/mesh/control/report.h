// The delivery report (docs/protocol.md "API", INTERFACE.md `mesh report`), assembled from store
// records by a pure function so that its rules are tested without a store or a clock:
//   - a report for exactly the target revision → applied (outcome "applied") or failed
//     ("failed", "refused");
//   - else, when the node applied a newer revision → superseded (a declaration is a desired
//     state, not a queue);
//   - else → outstanding, with the node's last contact (null when never heard from).
// Outstanding is not failure, and silence is never turned into "down".
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "mesh/sdk/store.h"
#include "mesh/sdk/value.h"

namespace mesh::control {

/// What the store knows about one target of a delivery.
struct TargetStatus {
  sdk::DeliveryTarget target;
  /// The node's apply report for exactly `target.revision`, if any.
  std::optional<sdk::ApplyReport> report;
  /// The node's record; nullopt when the store no longer knows the node.
  std::optional<sdk::NodeRecord> node;
};

/// Builds the report JSON:
/// {"delivery","declared","at",
///  "applied":[{"node","revision","at"}],
///  "failed":[{"node","revision","outcome","resource","reason","at"}],
///  "outstanding":[{"node","revision","last_contact"|null,"age_s"|null}],
///  "superseded":[{"node","revision","applied_revision"}]}
/// Each list is sorted by node name. `age_s` is whole seconds from last contact to `now_ms`.
sdk::Value build_delivery_report(const sdk::DeliveryRecord& delivery,
                                 const std::vector<TargetStatus>& targets, std::int64_t now_ms);

}  // namespace mesh::control
