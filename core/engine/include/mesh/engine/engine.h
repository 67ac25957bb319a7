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

struct ResourceOutcome {
  std::string resource;  ///< "type:id"
  /// "unchanged", "changed", "removed", "failed", "not_attempted", or for dry runs "would_change",
  /// "would_remove".
  std::string outcome;
  std::vector<sdk::Change> changes;  ///< what differed before apply (the plan)
  std::string reason;                ///< for failed: provider error, or the read-back mismatch
};

struct ApplyResult {
  std::uint64_t revision = 0;
  std::string outcome;           ///< "applied" or "failed" (dry run: "planned")
  std::string failed_resource;   ///< "type:id" of the first failure, else ""
  std::string reason;            ///< why, with the backend's error line, else ""
  std::vector<ResourceOutcome> resources;  ///< in apply order, then prunes
  std::vector<std::string> owned;          ///< owned after this apply, sorted ("type:id")
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

  /// Applies `decl` (already parsed and validated). Order per resource: read; plan; if the plan is
  /// not empty, apply; read again and plan again — a non-empty second plan is a failure
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

  /// Removes owned resources not in `keep` (e.g. after fetching the recovery copy on a host with
  /// wiped state, `orphans` are resources the control plane says this node owned). Returns
  /// outcomes (removed/failed).
  std::vector<ResourceOutcome> remove_orphans(const std::vector<std::string>& orphans,
                                              const Declaration& keep, const sdk::CancelToken& cancel);

 private:
  const ProviderRegistry& providers_;
  StateDir& state_;
  sdk::Logger& log_;
};

}  // namespace mesh::engine
