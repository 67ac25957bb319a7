// The apply engine: for each resource in order, read → plan → apply → read back → compare; the
// first failure fails the apply and later resources are not attempted; owned resources that left
// the declaration are pruned; the ownership record is saved after every resource that changed it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mesh/engine/declaration.h"
#include "mesh/engine/state.h"
#include "mesh/sdk/cancel.h"
#include "mesh/sdk/logger.h"

namespace mesh::engine {

// ---- Notifications: what a change earlier in the same apply asks of a later resource ---------
// The engine knows no resource type: each provider declares in its sdk::ProviderCapabilities
// whether the resources named in a resource's `restart_on` property and/or those it `requires`
// notify it (sdk/provider.h, "Notification"). A resource "changed in this apply" when its
// outcome was "changed" or "removed" (dry run: "would_change" or "would_remove"). On reaching a
// resource (always after those: parse_declaration orders `restart_on` like `requires`), the
// engine passes the changed ones that notify it to plan() and apply() as `notified_by`, logs
// "resource=<type:id> trigger=<the provider's notification word> changed=<type:id>[,...]", and
// then proceeds as for any plan: the provider's own change ("restart" for the service provider,
// "refresh_index" for the package provider) is in the plan and so among the outcome's changes
// ("changed  service:nginx.service (restart)"); the read-back plan is made without notification
// and must be empty. When apply says what it really changed (sdk::ApplyResponse::changed), those
// are the outcome's changes, and none means "unchanged" (an index refresh that installed nothing).
// A notified resource that changed may notify others in turn. Wording of a failure (e.g.
// "restart after file:/etc/nginx/nginx.conf changed: ...") is the provider's.
// No notification during scan_drift() or remove_orphans(): a repair there restarts nothing.
//
// ---- Removal --------------------------------------------------------------------------------
// Pruning an owned resource calls remove() and then reads it back as the provider's removal mode
// says (sdk::Removal): Delete — read() must return nothing; Release — read() must succeed and,
// when the provider says what it left (sdk::RemoveResponse::left), plan it against the read with
// an empty result. Either way the outcome is "removed" and the resource is no longer owned.

// ---- A provider that may replace the running host (sdk::ProviderCapabilities::may_replace_host)
// Decision 0076. When the caller named the host's program (Engine::set_host_program), after each
// *changed* apply of a resource whose provider declares may_replace_host the engine compares the
// identity of the program file with what it was at start. When it differs:
//   1. it runs `<executable> self-test --config <config>` (no shell, no descriptor of ours, the
//      time limit below). Exit 0 passes; anything else fails, and the first 4 KiB of its output
//      become the reason;
//   2. failed: it reverts — declares what read() returned before the apply (for each schema
//      attribute the read state carries, its value; the other declared properties as they were)
//      and converges that with the same provider (or removes the resource when nothing was there
//      before), reads back — and fails the resource and the apply with "self-test of the new
//      host failed: <output>" plus "; reverted to the state before the apply" or "; the revert
//      failed too: <why>". Nothing is recorded as owned for the new state;
//   3. passed: the resource is recorded as owned, later resources are not attempted
//      ("not_attempted"), nothing is pruned, and the apply's outcome is "restart": the caller
//      exits to be restarted into the new program, whose first reconcile applies the rest.
//      last_revision/last_outcome/applied_revision are left as they were.
// A dry run, an unchanged resource and a provider without the capability never self-test.

/// What identifies a file's content without reading it: it changed when any field differs.
struct FileIdentity {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  std::int64_t mtime_sec = 0;
  std::int64_t mtime_nsec = 0;
  std::int64_t size = 0;
  bool operator==(const FileIdentity&) const = default;
  /// stat() of `path` (following links); nullopt when it cannot be stat'ed.
  static std::optional<FileIdentity> of(const std::string& path);
};

/// The running host's program, for the check above.
struct HostProgram {
  std::string executable;  ///< absolute path of the program as named at start (/proc/self/exe)
  std::string config;      ///< the live config path, passed to `self-test --config`
  /// The program's identity at start; nullopt when it could not be stat'ed (then any identity
  /// read after an apply counts as changed).
  std::optional<FileIdentity> at_start;
  std::chrono::milliseconds self_test_timeout{60'000};  ///< the self-test's limit
};

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
  /// "planned"; "restart" (the host's program was replaced and the new one passed its
  /// self-test: see above; `replaced_by` names the resource).
  std::string outcome;
  /// For "restart": the "type:id" whose apply replaced the host's program, and the self-test's
  /// output (first 4 KiB). Else "".
  std::string replaced_by{};
  std::string self_test_output{};
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

  /// Names the running host's program: from now on a changed apply of a resource whose
  /// provider declares may_replace_host checks it (see above). Without a call nothing is
  /// checked (`mesh-host apply`, tests). Not thread-safe against a running apply.
  void set_host_program(HostProgram program) { program_ = std::move(program); }

  /// Applies `decl` (already parsed and validated). Order per resource: read; plan (with the
  /// notifications above); if the plan is not empty, apply; read again and plan again — a non-empty second plan is a failure
  /// ("read-back does not match: properties.mode is 0600, declared 0644"). A resource is recorded
  /// as owned only after a matching read-back. On the first failure: stop, mark the rest
  /// not_attempted, save state (applied_revision unchanged, last_outcome "failed"), return.
  /// After all resources succeed: remove owned resources absent from `decl`, read back as the
  /// provider's removal mode says (see "Removal" above; a failed removal fails the apply), then
  /// save state with applied_revision = decl.revision and the applied declaration text `text`. The caller holds the state lock.
  /// `dry_run`: read and plan only; nothing is changed or saved.
  ApplyResult apply(const Declaration& decl, const std::string& text, const sdk::CancelToken& cancel,
                    bool dry_run = false);
  /// As apply(), for a caller that needs the declared properties no more once they are applied
  /// (`mesh-host apply`, the daemon): the properties of each resource recorded as owned are moved
  /// out of `decl` into the ownership record instead of copied, so one copy of them is in memory,
  /// not two (docs/benchmarks.md, "First apply: memory"). On return those resources of `decl`
  /// keep their rid and depends_on, and their `properties` are left empty (`{}` or null); the
  /// others are as they were. Same outcomes, state and errors as apply().
  ApplyResult apply_taking(Declaration& decl, const std::string& text, const sdk::CancelToken& cancel,
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
  std::optional<HostProgram> program_;
  /// apply() (`take` nullptr) and apply_taking() (`take` == &decl).
  ApplyResult apply_impl(const Declaration& decl, Declaration* take, const std::string& text,
                         const sdk::CancelToken& cancel, bool dry_run);
};

}  // namespace mesh::engine
