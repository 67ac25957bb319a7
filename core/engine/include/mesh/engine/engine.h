// The apply engine: for each resource in order, read → plan → apply → read back → compare; the
// first failure fails the apply and later resources are not attempted; owned resources that left
// the declaration are pruned; the ownership record is saved after every resource that changed it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mesh/engine/declaration.h"
#include "mesh/engine/state.h"
#include "mesh/sdk/cancel.h"
#include "mesh/sdk/logger.h"

namespace mesh::engine {

// ---- Triggers: what a change earlier in the same apply asks of a later resource -------------
// A resource "changed in this apply" when its outcome was "changed" or "removed" (its plan was
// not empty, or a trigger below made the provider act, and the read-back matched); in a dry run,
// "would_change" or "would_remove".
//
// Restart (`properties.restart_on`, any resource type; the `service` provider implements it).
// When one of the resources named in `restart_on` changed in this apply, the engine, on reaching
// this resource (always after them: parse_declaration orders `restart_on` like `requires`),
// plans as usual, then adds Change{path = kRestartChange, observed = null, declared = null} to
// the plan (action Update when the plan was empty; other changes stay as planned), calls apply,
// reads back and plans again, which must be empty (a "restart" change in it would be ignored).
// The outcome is "changed" with "restart" among its changes, so the report shows
// "changed  service:nginx.service (restart)". A failed restart fails the apply like any failed
// apply (the reason starts "restart after file:/etc/nginx/nginx.conf changed: " when nothing else
// was planned). No restart for a resource declared `ensure = "absent"` or whose plan removes it.
// A restarted resource has itself changed, so it may trigger others in turn.
//
// Index refresh (resources of type kRefreshIndexType, i.e. `package`). When a resource the
// package `requires` changed in this apply (typically the `file` holding its apt sources), the
// engine sets `kRefreshIndexKey: true` in the plan's `desired.properties` (never in the declared
// or recorded properties) and calls apply even when the plan was empty. The outcome is
// "changed" (with "refresh_index" among its changes) when the plan was not empty or a declared
// property reads back differently (the refresh installed a newer `latest`), else "unchanged".
// Not for a package declared absent or purged, nor when its plan removes it.
//
// Neither trigger applies during scan_drift(): a repair there restarts nothing.

/// Change path of the restart request added to a plan (see above).
inline constexpr const char* kRestartChange = "restart";
/// The resource type whose apply is asked to refresh its index, and the key set for that in
/// `plan.desired.properties` (the package provider's kRefreshIndexKey).
inline constexpr const char* kRefreshIndexType = "package";
inline constexpr const char* kRefreshIndexKey = "refresh_index";

struct ResourceOutcome {
  std::string resource;  ///< "type:id"
  /// "unchanged", "changed", "removed", "failed", "not_attempted", "cancelled" (the provider
  /// stopped because the CancelToken fired), or for dry runs "would_change", "would_remove".
  std::string outcome;
  std::vector<sdk::Change> changes;  ///< what differed before apply (the plan)
  std::string reason;                ///< for failed: provider error, or the read-back mismatch
  /// For "failed" and "cancelled": the sdk::to_string() name of the failure's ErrorCode — the
  /// provider's own code when one of its calls failed ("permission_denied", "transient",
  /// "cancelled", ...), else the engine's: "failed" (the read-back does not match the
  /// declaration, or declared absent but still there), "failed_precondition" (no provider for
  /// the type is loaded), or the state directory's error code when saving ownership failed.
  /// "" for every other outcome (decision record 0041). (Default-initialised so that the
  /// existing `{resource, outcome, changes, reason}` initialisers stay warning-free.)
  std::string code{};
};

struct ApplyResult {
  std::uint64_t revision = 0;
  /// "applied", "failed", or "cancelled" (the CancelToken fired: the apply stopped at a resource
  /// boundary; last_revision/last_outcome unchanged, ownership of what changed kept); dry run:
  /// "planned".
  std::string outcome;
  std::string failed_resource;   ///< "type:id" of the first failure, else ""
  std::string reason;            ///< why, with the backend's error line, else ""
  /// The ErrorCode name of the failure when not applied: the failing resource's `code`, or the
  /// state directory's error code when saving the apply failed, "cancelled" when cancelled; else "".
  std::string code;
  std::vector<ResourceOutcome> resources;  ///< in apply order, then prunes
  std::vector<std::string> owned;          ///< owned after this apply, sorted ("type:id")
  /// Parallel to `owned`: each one's OwnedResource::digest ("" unknown).
  std::vector<std::string> owned_digests;
};

struct DriftItem {
  std::string resource;
  std::string found;   ///< e.g. "properties.content, properties.mode differ", "missing"
  std::string action;  ///< "repaired" or "repair failed: <reason>"
};

class Engine {
 public:
  /// Neither argument is owned; both must outlive the engine.
  Engine(const ProviderRegistry& providers, StateDir& state, sdk::Logger& log);

  /// Applies `decl` (already parsed and validated). Order per resource: read; plan (plus the
  /// triggers above); if the plan is not empty, apply; read again and plan again — a non-empty second plan is a failure
  /// ("read-back does not match: properties.mode is 0600, declared 0644"). A resource is recorded
  /// as owned only after a matching read-back. On the first failure: stop, mark the rest
  /// not_attempted, save state (applied_revision unchanged, last_outcome "failed"), return.
  /// After all resources succeed: remove owned resources absent from `decl` (a failed removal
  /// fails the apply), then save state with applied_revision = decl.revision and the applied
  /// declaration text `text`. The caller holds the state lock.
  /// `dry_run`: read and plan only; nothing is changed or saved.
  ApplyResult apply(const Declaration& decl, const std::string& text, const sdk::CancelToken& cancel,
                    bool dry_run = false);

  /// Re-reads every owned resource through its provider (using the properties it was applied
  /// with); repairs each that differs (apply, read back); returns one item per drifted resource.
  /// Nothing is returned for resources in their declared state.
  std::vector<DriftItem> scan_drift(const sdk::CancelToken& cancel);

  /// Removes resources of `orphans` not in `keep` (e.g. after fetching the recovery copy on a
  /// host with wiped state, `orphans` are resources the control plane says this node owned), but
  /// only those shown to be the mesh's: `digests` (parallel to `orphans`; missing entries count
  /// as "") holds the state_digest() the host reported for each; each orphan is read first and
  /// removed only when its digest now equals that one. Outcomes: "removed"; "kept" (no digest,
  /// or it differs: never delete what cannot be shown to be ours); "unchanged" (already absent);
  /// "failed" (read or removal failed); "not_attempted" (cancelled).
  std::vector<ResourceOutcome> remove_orphans(const std::vector<std::string>& orphans,
                                              const std::vector<std::string>& digests,
                                              const Declaration& keep, const sdk::CancelToken& cancel);
  /// As above with no digests: removes nothing that exists (every one is "kept").
  std::vector<ResourceOutcome> remove_orphans(const std::vector<std::string>& orphans,
                                              const Declaration& keep, const sdk::CancelToken& cancel);

 private:
  const ProviderRegistry& providers_;
  StateDir& state_;
  sdk::Logger& log_;
};

}  // namespace mesh::engine
