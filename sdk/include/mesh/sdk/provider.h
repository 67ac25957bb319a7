// Nox Mesh SDK — the provider interface: one resource type (file, package, service, container).
//
// Life of a resource in one apply (the engine drives it; providers never call each other):
//   validate → read → plan → apply → read (read-back) → plan again, which must be empty
// The engine records a resource as applied only when the read-back plan is empty: the reporter
// is the applier, and success is never reported without having been observed.
//
// Public methods are non-virtual wrappers that catch every exception (→ ErrorCode::Internal);
// plugin authors implement the protected `do_*` methods.
// Thread safety: the engine calls one provider from one thread at a time (one apply at a time
// per host). A provider need not be thread-safe.
#pragma once

#include <optional>

#include "mesh/sdk/cancel.h"
#include "mesh/sdk/plugin.h"
#include "mesh/sdk/resource.h"
#include "mesh/sdk/schema.h"

namespace mesh::sdk {

class Provider : public Plugin {
 public:
  using Plugin::Plugin;

  /// The resource's properties (types, required, allowed values, defaults, docs). The engine
  /// checks every declared resource against it before any provider code runs, so `do_*` methods
  /// may assume well-typed properties. The returned reference lives as long as the provider.
  virtual const Schema& schema() const noexcept = 0;

  /// Checks what a schema cannot express: an absolute normalised path, a mode string, a unit
  /// name. Called for every resource before anything in the declaration is applied; must have no
  /// side effects. Errors: InvalidArgument with `path` = "id" or "properties.<name>".
  Result<void> validate(const Resource& want) noexcept {
    return guard("validate", [&] { return do_validate(want); });
  }

  /// Observes the resource as it is now. Returns nullopt when it does not exist. No side effects.
  /// Errors: Unavailable (backend not answering), Failed, PermissionDenied.
  Result<std::optional<State>> read(const ResourceId& rid) noexcept {
    return guard("read", [&] { return do_read(rid); });
  }

  /// Compares `want` with `observed` and returns what apply would do. Pure: no side effects, no
  /// I/O beyond what `observed` already holds. An empty plan (action None) means "in the declared
  /// state". Errors: InvalidArgument only.
  Result<Plan> plan(const Resource& want, const std::optional<State>& observed) noexcept {
    return guard("plan", [&] { return do_plan(want, observed); });
  }

  /// Carries out exactly `plan` (including action Remove for `ensure = absent`). Returns the state
  /// the provider believes it produced; the engine reads back independently anyway. Must leave
  /// the resource either as it was or as planned, never half-written where the backend allows
  /// (write-to-temp-and-rename for files). Polls `cancel` between steps (→ Cancelled).
  /// Errors: Failed (with the backend's own error line in the message), Timeout, Cancelled,
  /// Unavailable, PermissionDenied.
  Result<State> apply(const Plan& plan, const CancelToken& cancel) noexcept {
    return guard("apply", [&] { return do_apply(plan, cancel); });
  }

  /// Removes the resource (prune, or `ensure = absent`). Idempotent: removing something absent
  /// succeeds. Errors as for apply.
  Result<void> remove(const ResourceId& rid, const CancelToken& cancel) noexcept {
    return guard("remove", [&] { return do_remove(rid, cancel); });
  }

 protected:
  virtual Result<void> do_validate(const Resource& /*want*/) { return {}; }
  virtual Result<std::optional<State>> do_read(const ResourceId& rid) = 0;
  virtual Result<Plan> do_plan(const Resource& want, const std::optional<State>& observed) = 0;
  virtual Result<State> do_apply(const Plan& plan, const CancelToken& cancel) = 0;
  virtual Result<void> do_remove(const ResourceId& rid, const CancelToken& cancel) = 0;
};

/// Helper for `do_plan` implementations: compares each declared property named in `keys` with
/// the observed one and appends a Change (path `properties.<key>`) for each that differs.
inline void diff_properties(const Value& declared, const Value& observed,
                            std::initializer_list<std::string_view> keys,
                            std::vector<Change>& out) {
  for (auto key : keys) {
    const Value* want = declared.find(key);
    if (!want) continue;  // not declared: not managed
    const Value* have = observed.find(key);
    if (!have || !(*have == *want))
      out.push_back(Change{"properties." + std::string(key), have ? *have : Value(), *want});
  }
}

}  // namespace mesh::sdk
