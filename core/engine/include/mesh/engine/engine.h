// The apply engine: for each resource in order, read → plan → apply → read back → compare; the
// first failure fails the apply and later resources are not attempted; owned resources that left
// the declaration are pruned; the ownership record is saved after every resource that changed it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string_view>
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

/// How many outcomes of each kind (ResourceOutcome::outcome).
struct OutcomeCounts {
  std::size_t changed = 0, unchanged = 0, removed = 0, failed = 0, not_attempted = 0, cancelled = 0,
              would_change = 0, would_remove = 0;
  /// Counts one `outcome` (an unknown word counts nowhere: total() does not include it).
  void add(std::string_view outcome) noexcept;
  std::size_t total() const noexcept {
    return changed + unchanged + removed + failed + not_attempted + cancelled + would_change + would_remove;
  }
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
  /// In apply order, then prunes: every outcome, or, with ApplyOptions::keep_changes, only those
  /// it keeps (the others are counted in `not_kept`).
  std::vector<ResourceOutcome> resources;
  /// Owned after this apply, sorted ("type:id"); empty when ApplyOptions::list_owned is false.
  std::vector<std::string> owned;
  /// Parallel to `owned`: each one's OwnedResource::digest ("" unknown).
  std::vector<std::string> owned_digests;
  /// The outcomes the apply decided but `resources` does not keep (ApplyOptions::keep_changes),
  /// by kind; all zero when it keeps every one. A report's totals are those of `resources` plus these.
  OutcomeCounts not_kept{};
};

/// What an apply hands back and how (Engine::apply_taking with options). The defaults are
/// apply()'s: every outcome kept, the owned list filled, nothing called.
struct ApplyOptions {
  static constexpr std::size_t kKeepAll = std::numeric_limits<std::size_t>::max();
  /// Read and plan only; nothing is changed or saved.
  bool dry_run = false;
  /// Called with each outcome as soon as it is decided (after its log line), in the order
  /// ApplyResult::resources would list them all — declared resources in apply order, the ones
  /// not attempted, then the prunes — whether or not `resources` keeps it. Called on the applying
  /// thread, between resources (a batch's outcomes after the batch); it must not throw, and must
  /// not call the engine or the StateDir. Empty: not called.
  std::function<void(const ResourceOutcome&)> on_outcome{};
  /// kKeepAll: ApplyResult::resources keeps every outcome. Else it keeps every "failed" and
  /// "cancelled" outcome and the first `keep_changes` ones that are "changed", "removed",
  /// "would_change" or "would_remove", in order, and counts the rest in ApplyResult::not_kept
  /// (at 20,000 resources every outcome kept, with its plan's changes, was ~12 MB at the end of
  /// a first apply: docs/benchmarks.md, "The end of an apply, and drift's syncs").
  std::size_t keep_changes = kKeepAll;
  /// Fill ApplyResult::owned and owned_digests (a copy of every owned name and digest); false
  /// leaves them empty, for a caller that does not report ownership (`mesh-host apply`).
  bool list_owned = true;
  /// Called once the declaration's text is staged beside applied.json (or found there), before
  /// the first resource is touched: the engine reads the text no more, and the caller may free
  /// it (`mesh-host apply` does: 2.8 MB at 20,000 files not held through the apply). Not called
  /// in a dry run or when the text could not be staged (the apply then fails untouched).
  /// Must not throw.
  std::function<void()> text_staged{};
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
  /// `text` is staged before the first resource is touched (StateDir::stage_applied_declaration:
  /// written beside applied.json and synced, or found there already) and renamed into place at
  /// the commit; when it cannot be staged the apply fails before touching anything ("saving the
  /// applied declaration: ...", every resource not_attempted).
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
  /// apply_taking() with `options` (what is kept and handed back; see ApplyOptions). `text` is
  /// read before the first resource is touched and never after: once it is staged (below),
  /// ApplyOptions::text_staged is called and the caller may free what `text` views. Same
  /// outcomes, state and errors as apply().
  ApplyResult apply_taking(Declaration& decl, std::string_view text, const sdk::CancelToken& cancel,
                           const ApplyOptions& options);

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
  ApplyResult apply_impl(const Declaration& decl, Declaration* take, std::string_view text,
                         const sdk::CancelToken& cancel, const ApplyOptions& options);
};

}  // namespace mesh::engine
