// Nox Mesh SDK — the provider interface: one resource type (file, package, service, container).
//
// Life of a resource in one apply (the engine drives it; providers never call each other):
//   validate → read → plan → apply → read (read-back) → plan again, which must be empty
// The engine records a resource as applied only when the read-back plan is empty: the reporter
// is the applier, and success is never reported without having been observed.
// A resource that leaves the declaration is pruned: remove, then the read-back that the
// provider's removal mode (ProviderCapabilities::removal, below) asks for.
//
// ---- Calls are request/response structs (SDK ABI 2; docs/decisions/0038) -----------------------
// Every call takes a request and fills in a response, both plain structs that the CALLER (the
// host, or a test) allocates and passes by reference; they only live for the call. Each starts
// with `std::uint32_t struct_size`, initialised to sizeof(the struct) when the caller was built.
// Extension rule, the same as for the descriptor in abi.h: within an ABI major a struct only
// grows at the end (fields are never inserted, removed, reordered or retyped), and a field added
// to a response is defined so that its default value means what an older provider, which does
// not set it, meant. Since the loader refuses a plugin whose ABI minor is newer than the host's,
// every field a plugin was compiled with is present in what the host passes (`struct_size` ≥ the
// plugin's sizeof); a plugin reads and writes only the fields it knows and never copies,
// constructs, assigns or destroys a request or response it was given as a whole (that would use
// its own, possibly smaller, sizeof). It may of course make its own for calls within itself.
// The virtual methods below (their order and signatures) are fixed for an ABI major; a minor may
// append one after all the others (do_apply_batch, 2.3), called only when a capability that an
// older plugin cannot set says the provider has it.
//
// Public methods are non-virtual inline wrappers (compiled into the caller) that catch every
// exception (→ ErrorCode::Internal); plugin authors implement the protected `do_*` methods. Each
// call has the struct form (what crosses the boundary) and, for the host's tools and tests, a
// short form with the ABI 1 signature that builds the structs on the caller's stack.
//
// Ownership: the provider owns nothing it is passed; references into a request or response are
// valid only during the call. Values a provider puts into a response (State, Change, Error, Value,
// std::string, std::vector) are moved or copied out by the caller, which relies on provider and
// host sharing one C++ standard library ABI (the descriptor's fingerprint, decision 0011).
// Thread safety: the engine calls one provider from one thread at a time (one apply at a time
// per host). A provider need not be thread-safe. capabilities() and schema() may be called at
// any time between other calls, from that same thread.
//
// ---- What the engine does with capabilities (ProviderCapabilities) ------------------------------
// Removal (prune, by the engine; also orphans after a state loss, decision 0026):
//   Delete   remove() deletes the resource: afterwards read() must return nothing (nullopt), or
//            the prune fails "read-back does not match: still present after removal". A resource
//            declared `ensure = "absent"` must also read back as nothing after its apply.
//   Release  remove() stops managing the resource and leaves it in a state the provider defines
//            (a sysctl key left at its current value — examples/provider-sysctl — or put back
//            at a value it recorded before managing it; a service stopped and disabled with its
//            unit file left in place). The resource may well still exist. The
//            read-back: read() must succeed; when RemoveResponse::left is set, plan(left, what
//            read() returned) must be empty, otherwise what read() returns is not checked. The
//            engine never requires nothing to be read, neither after a prune nor after an apply
//            of `ensure = "absent"` (for a Release provider that declared state is whatever its
//            plan says it is).
// Notification ("something this resource depends on changed in this apply"):
//   A resource "changed in this apply" when its outcome was "changed" or "removed" (in a dry run
//   "would_change" or "would_remove"). When the provider sets `notified_by_restart_on`, the
//   changed resources named in the resource's `restart_on` property (kRestartOnProperty, a list
//   of "type:id"; the declaration orders them before it, like `requires`) notify it; when it sets
//   `notified_by_requires`, its changed `requires` do. The engine passes those resources, in
//   declaration order without duplicates, in PlanRequest::notified_by and ApplyRequest::notified_by,
//   and logs "resource=<type:id> trigger=<notification> changed=<type:id>[,<type:id>...]".
//   What a notification means is the provider's: its plan adds its own change (path without the
//   "properties." prefix, e.g. "restart" or "refresh_index"; action Update when the plan was
//   otherwise empty), or adds nothing (a resource declared absent, a plan that removes it). The
//   engine then treats the plan like any other: empty → "unchanged"; else apply, read back, plan
//   again with `notified_by` EMPTY, which must be empty. So a notification change never appears in
//   a read-back plan. The outcome lists the plan's changes, unless ApplyResponse::changed says what
//   apply really changed (an index refresh that installed nothing: empty → "unchanged").
//   A notification is never given during drift repair (scan_drift) or orphan removal.
// Host replacement (`may_replace_host`, docs/decisions/0076):
//   After a changed apply of such a provider's resource, when the host's own program file
//   changed, the engine runs the new program's self-test; a failure is reverted by declaring,
//   with this provider, what read() returned before the apply (so read()'s output must be a
//   valid declaration), and a pass ends the apply so the host restarts into the new program.
//   Never during drift repair or orphan removal, nor in a dry run.
//
// ---- The `ensure` convention --------------------------------------------------------------------
// The one property name the engine reads: a resource whose `ensure` property is "absent" is
// forgotten from the host's ownership record once it reads back as declared (instead of being
// recorded as owned). Providers that support absence spell it that way; any other value (e.g. the
// package provider's "purged") is the provider's own and is recorded like any declared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/sdk/cancel.h"
#include "mesh/sdk/plugin.h"
#include "mesh/sdk/resource.h"
#include "mesh/sdk/schema.h"

namespace mesh::sdk {

/// The declaration property that lists the resources whose change notifies a resource when its
/// provider sets ProviderCapabilities::notified_by_restart_on (a StringList of "type:id").
inline constexpr const char* kRestartOnProperty = "restart_on";

/// What remove() means for a resource type (see the file comment for the engine's read-back).
enum class Removal : std::uint32_t {
  Delete = 0,   ///< removed: afterwards read() returns nothing. The default (ABI 1 behaviour).
  Release = 1,  ///< no longer managed, left as the provider defines; it may still exist.
};

constexpr const char* to_string(Removal r) noexcept {
  return r == Removal::Release ? "release" : "delete";
}

/// What a provider declares about its resource type; the engine asks for it and acts on it, so
/// it needs to know nothing of any one provider. Caller-allocated, struct_size-led, append-only;
/// every field's default is the ABI 1 behaviour, so a provider sets only what differs.
struct ProviderCapabilities {
  /// sizeof(ProviderCapabilities) at the caller's build, in bytes. Never written by a provider.
  std::uint32_t struct_size = sizeof(ProviderCapabilities);
  /// What remove() does. Default Delete.
  Removal removal = Removal::Delete;
  /// The changed resources named in the resource's `restart_on` property notify it.
  bool notified_by_restart_on = false;
  /// The changed resources the resource `requires` notify it.
  bool notified_by_requires = false;
  /// Resources of this type exist before (and after) anything manages them: a sysctl key, a
  /// kernel module, a unit file a package installed. Not used by the engine; tells the
  /// conformance suite (sdk/testing) to skip the checks that need a missing resource (see
  /// ProviderConformance there). Usually goes with Removal::Release.
  bool exists_before_management = false;
  /// The word the engine logs for a notification ("trigger=<notification>"), e.g. "restart".
  /// A NUL-terminated string with static storage duration in the plugin (a string literal), or
  /// nullptr for "notify".
  const char* notification = nullptr;
  /// An apply of this type's resources can replace files of the running host (a package
  /// manager installing `nox-mesh-host`). Appended in ABI 2.1 (default false: an older plugin that
  /// does not set it never triggers what follows). After each *changed* apply of such a resource
  /// the engine compares the identity (device, inode, mtime, size) of the host's executable with
  /// what it was at start, and when it differs runs the new executable's `self-test` with the
  /// live config (docs/decisions/0076): on failure it reverts by declaring what read() returned
  /// before the apply — for each schema attribute the read state carries, its value; the other
  /// declared properties as they were — and applying that with this same provider, so a
  /// provider that sets this must accept its own read() output as a declaration (the package
  /// provider: `version = U`). A resource that did not exist before is reverted with remove().
  /// On success the apply stops and the host restarts into the new executable.
  bool may_replace_host = false;
  /// Appended in ABI 2.3 (docs/decisions/0106). The most plans one apply_batch() call takes, or
  /// 0 / 1 (the default): the provider has no batch, and the engine applies each resource with
  /// apply(). A provider that sets it implements do_apply_batch() (the SDK's default loops over
  /// do_apply(), which is correct but no faster). The engine batches only a run of consecutive
  /// resources of this provider that are independent: none requires, or names in `restart_on`, a
  /// resource of the same run, none is notified (every plan's notified_by is empty), and the
  /// provider does not set may_replace_host. Never in a dry run, a drift repair or a prune.
  std::uint32_t max_batch = 0;
};

// ---- Requests and responses. Each: caller-allocated, struct_size first, append-only. ----------

/// validate(): checks what a schema cannot express.
struct ValidateRequest {
  std::uint32_t struct_size = sizeof(ValidateRequest);  ///< caller's sizeof, bytes
  /// The declared resource, already checked against schema() and with defaults filled in.
  Resource resource;
};
struct ValidateResponse {
  std::uint32_t struct_size = sizeof(ValidateResponse);  ///< caller's sizeof, bytes
  /// Every problem found, in the order found; empty when the resource is valid. Each is
  /// InvalidArgument with `path` = "id" or "properties.<name>[...]" relative to the resource.
  /// The caller may already hold entries; a provider only appends.
  std::vector<Error> errors;
};

/// read(): observes a resource as it is now.
struct ReadRequest {
  std::uint32_t struct_size = sizeof(ReadRequest);  ///< caller's sizeof, bytes
  ResourceId rid;
};
struct ReadResponse {
  std::uint32_t struct_size = sizeof(ReadResponse);  ///< caller's sizeof, bytes
  /// The observed state; nullopt (the caller's initial value) when the resource does not exist.
  std::optional<State> state;
};

/// plan(): compares the declared resource with the observed one.
struct PlanRequest {
  std::uint32_t struct_size = sizeof(PlanRequest);  ///< caller's sizeof, bytes
  /// The declared resource (validated, defaults filled in).
  Resource desired;
  /// What read() returned (nullopt: absent).
  std::optional<State> observed;
  /// Resources that changed earlier in this apply and notify this one (file comment,
  /// "Notification"); empty when nothing notifies it, and always empty for the read-back plan,
  /// in a drift repair and when the provider declared no notification capability.
  std::vector<ResourceId> notified_by;
};
struct PlanResponse {
  std::uint32_t struct_size = sizeof(PlanResponse);  ///< caller's sizeof, bytes
  /// What apply would do. The caller initialises it empty (action None); a provider sets it
  /// whole, usually `resp.plan = Plan{req.desired.rid, action, changes, req.desired}`.
  Plan plan;
};

/// apply(): carries out a plan.
struct ApplyRequest {
  std::uint32_t struct_size = sizeof(ApplyRequest);  ///< caller's sizeof, bytes
  /// A plan this provider made (possibly with a notification change of its own in it).
  Plan plan;
  /// Polled between steps (→ Cancelled). Never null; owned by the caller.
  const CancelToken* cancel = nullptr;
  /// The same list the plan was made with (PlanRequest::notified_by), for the provider's
  /// messages ("restart after file:/etc/app.conf changed: ..."). Empty in a drift repair.
  std::vector<ResourceId> notified_by;
};
struct ApplyResponse {
  std::uint32_t struct_size = sizeof(ApplyResponse);  ///< caller's sizeof, bytes
  /// The state the provider believes it produced; the engine reads back independently anyway.
  State state;
  /// What apply really changed, when that is not simply the plan's changes: set it when the
  /// plan held only a notification change whose effect apply found out (an index refresh that
  /// installed nothing → set to empty: the outcome is "unchanged"; one that installed a newer
  /// version → that change plus the notification change). nullopt (the default): the plan's
  /// changes are what changed.
  std::optional<std::vector<Change>> changed;
};

/// remove(): prune, or `ensure = absent` by a provider that implements it through remove.
struct RemoveRequest {
  std::uint32_t struct_size = sizeof(RemoveRequest);  ///< caller's sizeof, bytes
  ResourceId rid;
  /// Polled between steps (→ Cancelled). Never null; owned by the caller.
  const CancelToken* cancel = nullptr;
};
struct RemoveResponse {
  std::uint32_t struct_size = sizeof(RemoveResponse);  ///< caller's sizeof, bytes
  /// Release only (ignored for Delete): the properties (a JSON object with schema names) the
  /// resource was left with, e.g. {"running": false, "enabled": false}. The engine's read-back
  /// plans a resource with these properties against what read() returns and requires an empty
  /// plan. nullopt: read() must merely succeed.
  std::optional<Value> left;
};

/// apply_batch(): the host's hook, called by the provider once per batch (docs/decisions/0106).
/// Implemented by the caller (the engine: it makes its ownership intent durable there); the
/// provider only calls it. Lives for the call of apply_batch() that carries it.
class BatchIntent {
 public:
  /// The provider calls this exactly once in each apply_batch() that makes anything visible,
  /// after every write of the batch it will make visible is durable (written and synced, e.g.
  /// with one syncfs) and before the first of them becomes visible (renamed into place, removed,
  /// chmod'ed). `count` is how many of the batch's plans, from the first, it is about to make
  /// visible (fewer than all when one failed before this point). On an error the provider makes
  /// nothing visible, discards what it prepared, and returns that error from apply_batch() with
  /// ApplyBatchResponse::applied = 0. Errors: the caller's (Failed, PermissionDenied: its journal
  /// could not be written). Called from the thread that called apply_batch().
  virtual Result<void> before_visible(std::size_t count) noexcept = 0;

 protected:
  ~BatchIntent() = default;
};

/// apply_batch(): carries out a run of independent plans with one durability step for all.
struct ApplyBatchRequest {
  std::uint32_t struct_size = sizeof(ApplyBatchRequest);  ///< caller's sizeof, bytes
  /// Plans this provider made, in the order they are to be applied; at most
  /// ProviderCapabilities::max_batch of them; none with a notification change (the engine
  /// never batches a notified resource).
  std::vector<Plan> plans;
  /// Polled between plans (→ Cancelled). Never null; owned by the caller.
  const CancelToken* cancel = nullptr;
  /// Called once before anything is made visible (BatchIntent). Never null; owned by the caller.
  BatchIntent* intent = nullptr;
};
struct ApplyBatchResponse {
  std::uint32_t struct_size = sizeof(ApplyBatchResponse);  ///< caller's sizeof, bytes
  /// How many plans, from the first, were applied: each is as apply() would have left it
  /// (visible and durable when apply_batch() returns). The plans after them were not made
  /// visible: their prepared writes are discarded, their targets untouched.
  std::size_t applied = 0;
  /// The state the provider believes each applied plan produced (applied entries, in order).
  std::vector<State> states;
};

class Provider : public Plugin {
 public:
  using Plugin::Plugin;

  /// The resource's properties (types, required, allowed values, defaults, docs). The engine
  /// checks every declared resource against it before any provider code runs, so `do_*` methods
  /// may assume well-typed properties. The returned reference lives as long as the provider.
  virtual const Schema& schema() const noexcept = 0;

  /// What this provider declares (removal mode, notifications, whether its resources exist
  /// before management). Starts from the defaults (ABI 1 behaviour) and lets do_capabilities()
  /// change them. Cheap; the engine asks once per resource step. Errors: Internal (an exception).
  Result<ProviderCapabilities> capabilities() const noexcept {
    return guard("capabilities", [&]() -> Result<ProviderCapabilities> {
      ProviderCapabilities caps;
      if (auto ok = do_capabilities(caps); !ok) return fail(ok.error());
      return caps;
    });
  }

  /// Checks what a schema cannot express: an absolute normalised path, a mode string, a unit
  /// name. Called for every resource before anything in the declaration is applied; must have no
  /// side effects. Problems go into `resp.errors` (all of them, not only the first), each
  /// InvalidArgument with its path. Returns an error only when validation itself could not run
  /// (Internal: an exception); callers report such an error like one more problem, keeping its
  /// code.
  Result<void> validate(const ValidateRequest& req, ValidateResponse& resp) noexcept {
    return guard("validate", [&] { return do_validate(req, resp); });
  }
  /// Short form: the first problem found (or the call's own error) as the error, else success.
  Result<void> validate(const Resource& want) noexcept {
    return guard("validate", [&]() -> Result<void> {
      ValidateRequest req;
      req.resource = want;
      ValidateResponse resp;
      if (auto ok = do_validate(req, resp); !ok) return ok;
      if (!resp.errors.empty()) return fail(resp.errors.front());
      return {};
    });
  }

  /// Observes the resource as it is now: `resp.state` stays nullopt when it does not exist. No
  /// side effects. Errors: Unavailable (backend not answering), Failed, PermissionDenied,
  /// InvalidArgument (path "id": an id validate() would refuse).
  Result<void> read(const ReadRequest& req, ReadResponse& resp) noexcept {
    return guard("read", [&] { return do_read(req, resp); });
  }
  /// Short form: the observed state, nullopt when absent.
  Result<std::optional<State>> read(const ResourceId& rid) noexcept {
    return guard("read", [&]() -> Result<std::optional<State>> {
      ReadRequest req;
      req.rid = rid;
      ReadResponse resp;
      if (auto ok = do_read(req, resp); !ok) return fail(ok.error());
      return std::move(resp.state);
    });
  }

  /// Compares `req.desired` with `req.observed` and sets `resp.plan` to what apply would do,
  /// including the provider's own change for a notification (`req.notified_by` not empty). Pure:
  /// no side effects, no I/O beyond what `observed` already holds. An empty plan (action None)
  /// means "in the declared state". Errors: InvalidArgument only.
  Result<void> plan(const PlanRequest& req, PlanResponse& resp) noexcept {
    return guard("plan", [&] { return do_plan(req, resp); });
  }
  /// Short form: no notification.
  Result<Plan> plan(const Resource& want, const std::optional<State>& observed) noexcept {
    return guard("plan", [&]() -> Result<Plan> {
      PlanRequest req;
      req.desired = want;
      req.observed = observed;
      PlanResponse resp;
      if (auto ok = do_plan(req, resp); !ok) return fail(ok.error());
      return std::move(resp.plan);
    });
  }

  /// Carries out exactly `req.plan` (including action Remove for `ensure = absent`) and sets
  /// `resp.state` (and `resp.changed` when the plan was only a notification whose effect apply
  /// found out). Must leave the resource either as it was or as planned, never half-written
  /// where the backend allows (write-to-temp-and-rename for files). Polls `*req.cancel` between
  /// steps (→ Cancelled). Errors: Failed (with the backend's own error line in the message),
  /// Timeout, Cancelled, Unavailable, PermissionDenied; InvalidArgument when `req.cancel` is null.
  Result<void> apply(const ApplyRequest& req, ApplyResponse& resp) noexcept {
    if (!req.cancel) return fail(ErrorCode::InvalidArgument, "apply: no cancel token");
    return guard("apply", [&] { return do_apply(req, resp); });
  }
  /// Short form: no notification; returns the state the provider reports.
  Result<State> apply(const Plan& plan, const CancelToken& cancel) noexcept {
    return guard("apply", [&]() -> Result<State> {
      ApplyRequest req;
      req.plan = plan;
      req.cancel = &cancel;
      ApplyResponse resp;
      if (auto ok = do_apply(req, resp); !ok) return fail(ok.error());
      return std::move(resp.state);
    });
  }

  /// Applies `req.plans` in order as apply() would apply each, with one durability step for the
  /// whole batch (ProviderCapabilities::max_batch; docs/decisions/0106): the provider prepares
  /// every write (a temp file each), makes them durable together, calls
  /// `req.intent->before_visible(n)` once, then makes the n prepared plans visible in order
  /// (renames) and syncs each touched directory once. Returns success when every plan was applied
  /// (`resp.applied` = plans.size()); otherwise the error of the plan at index `resp.applied` (the
  /// first that failed; Cancelled when `*req.cancel` fired before it, or the error of
  /// before_visible()), with the plans before it applied and none after it made visible. A plan
  /// that fails while being prepared does not stop the ones before it from being applied.
  /// Only called when capabilities() set max_batch > 1. Errors: as for apply; InvalidArgument when
  /// `req.cancel` or `req.intent` is null or there are more than max_batch plans.
  Result<void> apply_batch(const ApplyBatchRequest& req, ApplyBatchResponse& resp) noexcept {
    if (!req.cancel) return fail(ErrorCode::InvalidArgument, "apply_batch: no cancel token");
    if (!req.intent) return fail(ErrorCode::InvalidArgument, "apply_batch: no intent hook");
    return guard("apply_batch", [&] { return do_apply_batch(req, resp); });
  }

  /// Removes the resource (prune), in the provider's removal mode (capabilities()). Idempotent:
  /// removing something absent, or already released, succeeds. Release: sets `resp.left` when it
  /// can say what it left. Polls `*req.cancel`. Errors as for apply.
  Result<void> remove(const RemoveRequest& req, RemoveResponse& resp) noexcept {
    if (!req.cancel) return fail(ErrorCode::InvalidArgument, "remove: no cancel token");
    return guard("remove", [&] { return do_remove(req, resp); });
  }
  /// Short form, discarding RemoveResponse::left.
  Result<void> remove(const ResourceId& rid, const CancelToken& cancel) noexcept {
    return guard("remove", [&]() -> Result<void> {
      RemoveRequest req;
      req.rid = rid;
      req.cancel = &cancel;
      RemoveResponse resp;
      return do_remove(req, resp);
    });
  }

 protected:
  /// Sets the fields that differ from the defaults. Default: none (Delete, no notification).
  virtual Result<void> do_capabilities(ProviderCapabilities& /*caps*/) const { return {}; }
  /// Default: nothing beyond the schema to check.
  virtual Result<void> do_validate(const ValidateRequest& /*req*/, ValidateResponse& /*resp*/) {
    return {};
  }
  virtual Result<void> do_read(const ReadRequest& req, ReadResponse& resp) = 0;
  virtual Result<void> do_plan(const PlanRequest& req, PlanResponse& resp) = 0;
  virtual Result<void> do_apply(const ApplyRequest& req, ApplyResponse& resp) = 0;
  virtual Result<void> do_remove(const RemoveRequest& req, RemoveResponse& resp) = 0;
  /// Appended in ABI 2.3, after every other virtual, so an older plugin's table is a prefix of
  /// this one; the host calls it only for a provider whose capabilities() set max_batch > 1,
  /// which an older plugin cannot. Default: before_visible(all), then do_apply() for each plan in
  /// order, stopping at the first error — correct, with apply()'s own durability per plan.
  virtual Result<void> do_apply_batch(const ApplyBatchRequest& req, ApplyBatchResponse& resp) {
    if (auto ok = req.intent->before_visible(req.plans.size()); !ok) return ok;
    for (const Plan& plan : req.plans) {
      if (req.cancel->cancelled())
        return fail(ErrorCode::Cancelled, "cancelled before applying " + plan.rid.str());
      ApplyRequest one;
      one.plan = plan;
      one.cancel = req.cancel;
      ApplyResponse out;
      if (auto ok = do_apply(one, out); !ok) return ok;
      resp.states.push_back(std::move(out.state));
      ++resp.applied;
    }
    return {};
  }
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

/// Helper for `do_validate` implementations that have a check returning Result<void>: appends
/// its error, if any, to `resp.errors`. Returns success so it can end a do_validate:
/// `return report(resp, check(req.resource));`.
inline Result<void> report(ValidateResponse& resp, const Result<void>& checked) {
  if (!checked) resp.errors.push_back(checked.error());
  return {};
}

/// Helper for `do_plan`: whether a plan should take a notification change. True when
/// `req.notified_by` is not empty and the plan does not remove the resource.
inline bool notified(const PlanRequest& req, const Plan& plan) noexcept {
  return !req.notified_by.empty() && plan.action != PlanAction::Remove;
}

/// Helper for `do_plan`: adds the notification change `path` (observed null, declared
/// `declared`) and makes an empty plan an Update.
inline void add_notification_change(Plan& plan, std::string path, Value declared = Value()) {
  plan.changes.push_back(Change{std::move(path), Value(), std::move(declared)});
  if (plan.action == PlanAction::None) plan.action = PlanAction::Update;
}

/// "file:/a, file:/b": the names of `rids`, for messages.
inline std::string names_of(const std::vector<ResourceId>& rids) {
  std::string out;
  for (const auto& r : rids) out += (out.empty() ? "" : ", ") + r.str();
  return out;
}

}  // namespace mesh::sdk
