// Nox Mesh SDK — the store interface: where the control plane keeps nodes, enrolment tokens,
// declaration revisions, deliveries, apply reports, last contact and recovery copies.
// `sqlite` is the embedded default; `jetstream-kv` is the cluster path.
//
// Conventions: times are milliseconds since the Unix epoch (UTC), in `*_ms` fields; revisions
// and delivery ids start at 1 and only grow; every write method is atomic (all or nothing).
// Thread safety: every method may be called from any thread; implementations serialise writes.
//
// Errors (every method): a failure of the store itself — disk full, I/O error, busy, locked —
// is never the caller's fault and must be returned as a retryable code (Transient or
// Unavailable), never as Failed or InvalidArgument: the control plane answers a node's report
// with the store's code, and a host drops a report from its outbox only when it is refused as
// invalid (or its sender is not allowed), keeping it otherwise until it is recorded.
// InvalidArgument is for what the caller sent, including a record beyond a bound the store
// documents (what one node may store); its message names the node and the limit.
//
// Removed nodes (decision record 37): `remove_node` retires a node. nodes() and node() no longer
// return it, per-node writes refuse it (NotFound), and its history stays readable by name until
// purged. Added in SDK ABI 1.1 with `all_nodes` and `NodeRecord::removed_at_ms`; the defaults
// below answer Unsupported, so a store written for 1.0 still builds.
#pragma once

#include <climits>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mesh/sdk/plugin.h"

namespace mesh::sdk {

/// A node known to the control plane.
struct NodeRecord {
  std::string name;
  std::int64_t enrolled_at_ms = 0;
  /// When the control plane received the node's last verified message (heartbeat, report), by
  /// its own clock — never a time the node claimed; nullopt if never heard from.
  std::optional<std::int64_t> last_contact_ms;
  /// Highest revision the node's current identity reported applied; 0 when none (re-enrolment
  /// resets it: nothing recorded under a revoked identity counts).
  std::uint64_t applied_revision = 0;
  /// Outcome of the current identity's newest apply report: "applied", "failed", "refused",
  /// "superseded", or "" (none).
  std::string last_outcome;
  /// Highest revision declared to the node (its pending revision when above applied_revision);
  /// 0 when none. The newest revision stored, which may be below the store's revision counter
  /// for the node (the counter raised by a heartbeat: ContactUpdate::applied_revision).
  std::uint64_t declared_revision = 0;
  /// When the control plane received the heartbeat that `host_state` comes from; nullopt when
  /// no heartbeat was taken.
  std::optional<std::int64_t> heartbeat_at_ms;
  /// False when the node's latest briefing has a failed line. Means nothing while `briefing` is
  /// empty (never briefed: eligibility unknown).
  bool eligible = true;
  /// The node's Ed25519 public key (hex), pinned at enrolment; empty if the node has none.
  std::string public_key;
  /// Host software version reported in heartbeats.
  std::string host_version;
  /// Host state reported in heartbeats: "idle", "applying", "failed", or "".
  std::string host_state;
  /// The latest briefing document (JSON text), or "".
  std::string briefing;
  /// Identity generation: grows by one at each (re-)enrolment.
  std::uint64_t generation = 0;
  /// When the node was removed (`Store::remove_node`), or nullopt while it is enrolled. Only
  /// `Store::all_nodes` returns removed nodes. (SDK ABI 1.1.)
  std::optional<std::int64_t> removed_at_ms;
  /// The newest heartbeat timestamp taken (the host's MAC'd Mesh-Timestamp) and the generation of
  /// the identity it came from; 0 when none was recorded. A heartbeat is contact only when newer.
  std::int64_t heartbeat_ms = 0;
  std::uint64_t heartbeat_generation = 0;
};

/// An enrolment token. The secret itself is never stored: `hash` is its SHA-256 (hex).
struct TokenRecord {
  std::string id;  ///< public identifier for list/revoke (not secret)
  std::string node;
  std::string hash;
  std::int64_t created_at_ms = 0;
  std::int64_t expires_at_ms = 0;
  bool reenrol = false;  ///< may re-enrol an already enrolled node (decided at issue time)
  std::optional<std::int64_t> used_at_ms;
  bool revoked = false;
};

/// One stored revision of a node's declaration.
struct RevisionRecord {
  std::string node;
  std::uint64_t revision = 0;
  std::int64_t created_at_ms = 0;
  /// The delivery that wrote it.
  std::uint64_t delivery = 0;
  /// The declaration exactly as stored and pushed (JSON text with the revision in it).
  std::string body;
  /// SHA-256 (hex) of `body`.
  std::string digest;
  /// Appended (sqlite schema 7, docs/decisions/0050): which resource of `body` came from where —
  /// JSON text, the composition of DeclarationWrite::composition, stored as written. "" for a
  /// revision written without one (before schema 7, or by a plain declare): all its resources
  /// are the node's own.
  std::string composition{};
};

/// One node's part in a delivery.
struct DeliveryTarget {
  std::string node;
  std::uint64_t revision = 0;
};

/// Where a revision of a node came from: which delivery wrote it.
struct RevisionRef {
  std::uint64_t revision = 0;
  std::uint64_t delivery = 0;
};

/// One entry of a recovery copy: a resource and the digest of the state the host read back
/// after applying it (SHA-256 hex of the read-back State's JSON, see docs/protocol.md), or ""
/// when the host sent none (a host that may not remove it: it cannot be shown to be the mesh's).
struct OwnedRecord {
  std::string resource;  ///< `type:id`
  std::string digest;
};

/// A delivery: one declaration write covering one or more nodes.
struct DeliveryRecord {
  std::uint64_t id = 0;
  std::int64_t created_at_ms = 0;
  std::vector<DeliveryTarget> targets;
};

/// A node's report on applying one revision. (node, revision) is its identity; which report of
/// a pair is kept is the outcome state machine of docs/protocol.md ("Delivery outcomes", see
/// Store::record_apply).
struct ApplyReport {
  std::string node;
  std::uint64_t revision = 0;
  /// When the host says it finished (its clock): shown, never used as contact.
  std::int64_t at_ms = 0;
  /// When the control plane received and verified the report (its own clock): what last contact
  /// is set to. 0: the report does not count as contact.
  std::int64_t received_at_ms = 0;
  /// The identity generation whose key verified the report (NodeRecord::generation at that
  /// moment); 0 means "the node's current generation". A report of another generation is refused.
  std::uint64_t generation = 0;
  /// "applied", "failed", "refused" (the host would not apply it: bad signature, older), or
  /// "superseded" (the host cancelled the apply because a newer revision arrived).
  std::string outcome;
  /// The failing resource (`type:id`) when failed; else "".
  std::string resource;
  /// Why it failed, with the backend's own error line; else "".
  std::string reason;
  /// Resources (`type:id`) the host owns after this apply: the recovery copy.
  std::vector<std::string> owned;
  /// Parallel to `owned` (same length, or empty when the host sent none): the digest of each
  /// owned resource's read-back state (OwnedRecord::digest), "" when unknown.
  std::vector<std::string> owned_digests;
  /// Appended in SDK ABI 2. The sdk::to_string() name of the ErrorCode of the failure when not
  /// applied ("permission_denied", "transient", "failed" for a read-back mismatch, "cancelled"
  /// for superseded, ...; docs/decisions/0041); "" when applied, and in a report stored before
  /// codes were kept. A store keeps at most 64 bytes (longer is InvalidArgument).
  std::string code;
};

/// A node's report on one drift scan. `received_at_ms` is when the control plane received it
/// (its own clock; what last contact is set to; 0: no contact); `at_ms` is the host's claim.
struct DriftItem {
  std::string resource;  ///< `type:id`
  std::string found;     ///< what differed, e.g. "properties.content differs"
  std::string action;    ///< "repaired", or "repair failed: <reason>"
};
struct DriftReport {
  std::string node;
  std::string scan_id;  ///< unique per scan (the host makes it); the idempotence key
  std::uint64_t revision = 0;
  std::int64_t at_ms = 0;
  std::vector<DriftItem> items;  ///< empty when nothing drifted
  std::int64_t received_at_ms = 0;
};

/// A heartbeat's effect on the store (batched by the control plane).
struct ContactUpdate {
  std::string node;
  std::int64_t at_ms = 0;
  /// The revision the host says it applied (its heartbeat). It does not move
  /// NodeRecord::applied_revision (apply reports do). A store may raise the node's revision
  /// counter to it when it is above (for a heartbeat of the node's current `generation`, never
  /// lowering it), so that after a restore from a backup the next revision is numbered above
  /// what the host applied and refuses everything below; the sqlite store does (decision 191).
  std::uint64_t applied_revision = 0;
  std::string host_version;
  std::string host_state;
  /// The heartbeat's own MAC'd timestamp (Mesh-Timestamp, the host's clock) and the identity
  /// generation it was verified with: kept as NodeRecord::heartbeat_ms/heartbeat_generation, so
  /// that a replayed heartbeat is refused after a control-plane restart too. 0: none (not stored).
  std::int64_t heartbeat_ms = 0;
  std::uint64_t generation = 0;
};

/// Reports that arrived together, recorded in one write (Store::record_reports, SDK ABI 2.3).
/// Each element is what record_apply() / record_drift() take; the same (node, revision) or
/// (node, scan_id) may appear more than once (a re-send): each copy gets its own result, as if
/// recorded one after the other in this order.
struct ReportBatch {
  std::vector<ApplyReport> applies;
  std::vector<DriftReport> drifts;
};

/// What Store::record_reports answers for each report of a ReportBatch, parallel to its
/// vectors (same lengths, same order): the report's own result — true/false as record_apply /
/// record_drift return, or its own refusal.
struct ReportResults {
  std::vector<Result<bool>> applies;
  std::vector<Result<bool>> drifts;
};

/// A signed request the control plane has seen (docs/protocol.md "Nonces"). Kept until
/// `expires_at_ms`, so that a replay is refused even after a restart; for a mutating request
/// also its answer, written in the same transaction as what the request wrote, so that a retry
/// of the same request gets the first answer instead of writing again.
struct RequestRecord {
  /// Who signed it: "operator:<name>" or "node:<name>".
  std::string signer;
  /// Its Mesh-Nonce (16-64 characters).
  std::string nonce;
  /// SHA-256 (hex) of the signed request text: the same nonce with other bytes is another request.
  std::string digest;
  std::int64_t expires_at_ms = 0;
  /// The stored answer (opaque text written by the control plane), or nullopt when none is.
  std::optional<std::string> answer;
};

/// What Store::remember_requests answers for each request of a batch (SDK ABI 2.4), in the
/// batch's order: what remember_request() would have answered for it.
using RememberResults = std::vector<Result<std::optional<RequestRecord>>>;

/// The answer that declare_answered() stores for the request (signer, nonce) that asked for it.
struct RequestAnswer {
  std::string signer;
  std::string nonce;
  /// Called inside the write's transaction with the delivery written; returns the answer text to
  /// store. Must not call back into the store.
  std::function<std::string(const DeliveryRecord&)> render{};
};

/// What `declare` writes for one node.
struct DeclarationWrite {
  std::string node;
  /// Called with the assigned revision; returns the exact body to store (the control plane puts
  /// the revision into the declaration and signs it). Must not call back into the store.
  std::function<std::string(std::uint64_t revision)> render;
  /// Appended (docs/decisions/0050). What each resource of the rendered body came from, JSON
  /// text stored with the revision as given (the store does not parse it):
  ///   {"own": ["file:/etc/hosts"],
  ///    "modules": {"web": {"version": "1.4.2", "resources": ["file:/etc/motd"]}},
  ///    "operator": "alice", "cause": "declare|deploy|rollback", "deploy": 4}
  /// "" = none: every resource is the node's own. The body keeps the rendered resources; the
  /// composition only says which `type:id` came from where.
  std::string composition{};
  /// Appended (docs/decisions/0050). Compare-and-swap: when set, the node's latest revision (as
  /// latest_revision() reports it; 0 when that is nullopt) must be exactly this when the write
  /// runs, or nothing at all is written and the call fails with FailedPrecondition naming the
  /// node, the expected and the actual revision. nullopt: no check (the write goes on top of
  /// whatever is latest).
  std::optional<std::uint64_t> expected_revision{};
};

/// A keyed JSON document with a version, kept by the store for the control plane: modules,
/// labels, assignments, deploys, pipeline runs (docs/decisions/0050). `(ns, key)` is its
/// identity.
struct StoredRecord {
  /// The namespace: "module", "labels", "assignment", "deploy", "pipeline_run", ... (the
  /// control plane's; the store only bounds it, see put_records).
  std::string ns{};
  /// The key within `ns` (e.g. "web/1.4.2", a node name, a zero-padded id).
  std::string key{};
  /// The document (JSON text by convention; the store does not parse it).
  std::string value{};
  /// 1 when first written, +1 at each write of the same (ns, key). An erased record that is
  /// written again continues from its last version (never reused: a compare-and-swap made
  /// against the old record cannot succeed on the new one).
  std::uint64_t version = 0;
  /// The `now_ms` of the write that gave it this version.
  std::int64_t updated_at_ms = 0;
};

/// One write of a record (put_records, declare_with).
struct RecordWrite {
  std::string ns{};
  std::string key{};
  /// The new value (ignored when `erase` or when `render` is set).
  std::string value{};
  /// Compare-and-swap: nullopt = any (no check); 0 = the record must not exist yet (never
  /// written, or erased); N = its version must be exactly N. When it does not hold, nothing of
  /// the whole call is written (FailedPrecondition naming ns/key, expected and actual version).
  std::optional<std::uint64_t> expected_version{};
  /// Deletes the record instead (its version still advances; erasing a record that does not
  /// exist is a no-op unless expected_version says otherwise).
  bool erase = false;
  /// When set (declare_with only), called inside the transaction with the delivery declare_with
  /// wrote (e.g. for a deploy record naming its delivery); its result is the value. Must not call
  /// back into the store. put_records refuses a write with a render (InvalidArgument: there is
  /// no delivery).
  std::function<std::string(const DeliveryRecord&)> render{};
};

class Store : public Plugin {
 public:
  using Plugin::Plugin;

  /// Opens (creating if needed) the store. Called once after configure(). Errors: Unavailable,
  /// PermissionDenied, Failed (corrupt file).
  virtual Result<void> open() noexcept = 0;

  // --- nodes ---------------------------------------------------------------------------------
  /// All enrolled nodes (removed ones left out), sorted by name.
  virtual Result<std::vector<NodeRecord>> nodes() noexcept = 0;
  /// One enrolled node; NotFound when unknown or removed.
  virtual Result<NodeRecord> node(const std::string& name) noexcept = 0;

  // --- tokens and enrolment --------------------------------------------------------------------
  /// Stores a new token. AlreadyExists when the id or hash is taken.
  virtual Result<void> add_token(const TokenRecord& token) noexcept = 0;
  /// Tokens not used, not revoked and not expired at `now_ms`, oldest first.
  virtual Result<std::vector<TokenRecord>> tokens(std::int64_t now_ms) noexcept = 0;
  /// Revokes a token by id. NotFound when unknown; idempotent otherwise.
  virtual Result<void> revoke_token(const std::string& id) noexcept = 0;
  /// Enrols `node` with the token whose hash is `token_hash`, in one transaction: the token must
  /// be unused, unrevoked, unexpired at `now_ms` and issued for `node`; it is marked used (of
  /// concurrent attempts exactly one wins); the node is created, or — only when the token allows
  /// re-enrolment — its key replaced and its generation raised, keeping its declarations,
  /// history and deliveries. Re-enrolment revokes the old identity's record: the recovery copy is
  /// cleared, applied_revision and last_outcome are reset, and reports recorded under an older
  /// generation no longer count (apply_report/apply_reports do not return them; a report of the
  /// new identity replaces them). A removed node (remove_node) is not enrolled: any
  /// new token for it enrols it again as a new identity (generation raised, revision numbers
  /// continuing), with no current declaration, no recovery copy and no briefing; its earlier
  /// revisions and reports stay history. Errors: PermissionDenied (with the reason: unknown,
  /// used, revoked, expired, issued for another node, node already enrolled).
  virtual Result<NodeRecord> enrol(const std::string& token_hash, const std::string& node,
                                   const std::string& public_key, std::int64_t now_ms) noexcept = 0;
  /// Stores a node's briefing (JSON text) and its eligibility. InvalidArgument beyond the store's
  /// documented size bound.
  virtual Result<void> set_briefing(const std::string& node, const std::string& briefing,
                                    bool eligible) noexcept = 0;

  // --- declarations and deliveries -------------------------------------------------------------
  /// One write: for each entry assigns the node's next revision, stores the rendered body,
  /// and creates one delivery covering all of them; keeps at most `retain` revisions per node
  /// (older ones are deleted; the latest is always kept), and the node's apply reports by the
  /// same rule (a report of a deleted revision is deleted with it; `retain` 0 keeps all).
  /// Each write's `composition` is stored with its revision, and its `expected_revision`, when
  /// set, must hold (docs/decisions/0050).
  /// Errors: NotFound (a node is not enrolled), InvalidArgument, FailedPrecondition (an
  /// expected_revision does not hold; nothing written).
  virtual Result<DeliveryRecord> declare(const std::vector<DeclarationWrite>& writes,
                                         std::int64_t now_ms, std::uint32_t retain) noexcept = 0;
  /// The node's newest revision, or nullopt when it has none.
  virtual Result<std::optional<RevisionRecord>> latest_revision(const std::string& node) noexcept = 0;
  /// A given revision; NotFound when unknown or pruned by retention.
  virtual Result<RevisionRecord> revision(const std::string& node, std::uint64_t revision) noexcept = 0;
  /// The node's retained revisions, newest first, at most `limit`.
  virtual Result<std::vector<RevisionRecord>> history(const std::string& node,
                                                      std::uint32_t limit) noexcept = 0;
  /// The first revision written for `node` after `revision` (however old: retention may have
  /// pruned its body, not this), with its delivery; nullopt when none was. The default
  /// implementation looks in history() and so misses pruned revisions; stores should override it.
  virtual Result<std::optional<RevisionRef>> next_revision(const std::string& node,
                                                           std::uint64_t revision) noexcept {
    auto h = history(node, UINT32_MAX);
    if (!h) return fail(std::move(h).error());
    std::optional<RevisionRef> best;
    for (const auto& r : *h)
      if (r.revision > revision && (!best || r.revision < best->revision))
        best = RevisionRef{r.revision, r.delivery};
    return best;
  }
  /// A delivery by id; NotFound when unknown.
  virtual Result<DeliveryRecord> delivery(std::uint64_t id) noexcept = 0;
  /// The newest delivery, or nullopt when there is none.
  virtual Result<std::optional<DeliveryRecord>> latest_delivery() noexcept = 0;

  // --- reports and contact ---------------------------------------------------------------------
  /// Records an apply report, following the outcome state machine of docs/protocol.md
  /// ("Delivery outcomes"). Per (node, revision) of the current identity:
  ///   - nothing recorded → the report is recorded;
  ///   - "refused" or "superseded" → replaced by "applied" or "failed" (the apply is the answer);
  ///   - "failed" → replaced by "applied" only (a retried success; never the other way);
  ///   - "applied" → final;
  ///   - anything else → returns false, nothing changes (re-sends are harmless).
  /// A report recorded under an older generation is replaced by any report of the current one.
  /// Refused (nothing changes):
  ///   - PermissionDenied when `report.generation` is set and is not the node's current
  ///     generation (signed by a revoked identity);
  ///   - InvalidArgument (field `revision`) when the revision was never declared to the node or
  ///     is no longer in its history (a report for a revision the control plane never sent);
  ///   - InvalidArgument for an unknown outcome, or owned_digests of another length than owned;
  ///   - InvalidArgument beyond the store's documented bounds (owned list length, text sizes);
  ///   - false (nothing recorded) for a revision older than every retained one.
  /// Also moves last contact to `received_at_ms` (never back; never to `at_ms`), updates the
  /// node's applied revision (only upward), last outcome (from the highest revision reported),
  /// and — for "applied" of the node's newest applied revision — its recovery copy (`owned`
  /// with `owned_digests`).
  virtual Result<bool> record_apply(const ApplyReport& report) noexcept = 0;
  /// The current identity's report for a revision, or nullopt (also when only a revoked
  /// identity reported it).
  virtual Result<std::optional<ApplyReport>> apply_report(const std::string& node,
                                                          std::uint64_t revision) noexcept = 0;
  /// The current identity's newest apply reports, newest first, at most `limit`.
  virtual Result<std::vector<ApplyReport>> apply_reports(const std::string& node,
                                                         std::uint32_t limit) noexcept = 0;
  /// Records a drift report; idempotent per (node, scan_id). Moves last contact to
  /// `received_at_ms` (never back; never to the claimed `at_ms`).
  virtual Result<bool> record_drift(const DriftReport& report) noexcept = 0;
  /// The node's newest drift report with at least one item, or nullopt; and the newest of any.
  virtual Result<std::optional<DriftReport>> last_drift(const std::string& node,
                                                        bool with_items_only) noexcept = 0;
  /// Applies a batch of heartbeats in one transaction. Last contact only moves forward.
  /// Unknown nodes are skipped. May raise a node's revision counter (ContactUpdate::applied_revision).
  virtual Result<void> touch(const std::vector<ContactUpdate>& updates) noexcept = 0;
  /// The node's recovery copy: what it last reported owning (`type:id`), sorted.
  virtual Result<std::vector<std::string>> owned(const std::string& node) noexcept = 0;

  // --- removal (SDK ABI 1.1) -------------------------------------------------------------------
  /// Every node ever enrolled and not purged from the list — enrolled and removed ones (with
  /// `removed_at_ms`) — sorted by name. Default: Unsupported.
  virtual Result<std::vector<NodeRecord>> all_nodes() noexcept {
    return fail(ErrorCode::Unsupported, "this store cannot list removed nodes");
  }
  /// Removes (retires) `node` at `now_ms`, in one transaction: it is no longer enrolled (nodes(),
  /// node() leave it out; reports, drift, heartbeats and briefings for it are refused with
  /// NotFound), its unused tokens are revoked (only a token issued after this enrols the name
  /// again), and its key stays on record for audit only. Its revisions, deliveries, reports,
  /// drift reports and recovery copy are kept for audit; with `purge` they are deleted (the
  /// name, its removal time, its revision counter and generation are always kept, so that a
  /// later enrolment never reuses a revision number). Removing a removed node again is allowed
  /// only with `purge` (it purges). Returns the node as it was before. Errors: NotFound (never
  /// enrolled; or already removed and not `purge`). Default: Unsupported.
  virtual Result<NodeRecord> remove_node(const std::string& node, std::int64_t now_ms, bool purge) noexcept {
    (void)node;
    (void)now_ms;
    (void)purge;
    return fail(ErrorCode::Unsupported, "this store cannot remove nodes");
  }

  // --- recovery copy with digests (SDK ABI 1.1) -------------------------------------------------
  /// The recovery copy with each resource's digest, sorted by resource. The default
  /// implementation returns owned() with empty digests (so a host removes none of them).
  virtual Result<std::vector<OwnedRecord>> recovery_copy(const std::string& node) noexcept {
    auto o = owned(node);
    if (!o) return fail(std::move(o).error());
    std::vector<OwnedRecord> out;
    for (auto& r : *o) out.push_back(OwnedRecord{std::move(r), {}});
    return out;
  }

  // --- signed requests (docs/protocol.md "Nonces") -----------------------------------------------
  /// Remembers the request (signer, nonce) until `request.expires_at_ms` — `request.answer` is
  /// ignored — and forgets every request that expired at `now_ms` (so what is kept is bounded by
  /// what arrives within one window). Returns nullopt when the pair was not remembered (the request
  /// is fresh; it is remembered now), otherwise the record kept for it, with its answer when one is
  /// stored (a replay or a retry). Of concurrent calls with the same pair, exactly one gets nullopt.
  /// Durable like every write: a restart of the control plane does not forget it.
  /// Errors: InvalidArgument (empty signer or nonce), the store's own.
  virtual Result<std::optional<RequestRecord>> remember_request(const RequestRecord& request,
                                                                std::int64_t now_ms) noexcept = 0;
  /// Stores `answer` for the remembered request (signer, nonce), replacing none or an earlier one.
  /// Used for answers of requests that wrote nothing (refusals). Errors: NotFound (not
  /// remembered, or expired and forgotten).
  virtual Result<void> answer_request(const std::string& signer, const std::string& nonce,
                                      const std::string& answer) noexcept = 0;
  /// declare(), and in the same transaction stores `answer.render(delivery)` as the answer of the
  /// remembered request (answer.signer, answer.nonce): either both are written or neither. Errors:
  /// those of declare(); NotFound also when the request is not remembered.
  virtual Result<DeliveryRecord> declare_answered(const std::vector<DeclarationWrite>& writes,
                                                  std::int64_t now_ms, std::uint32_t retain,
                                                  const RequestAnswer& answer) noexcept = 0;

  // --- provider schemas (SDK ABI 2, appended; docs/decisions/0048) ------------------------------
  /// Stores the provider schemas a node sent with its briefing: `schemas` is JSON text, a list
  /// of provider schemas as `mesh-host plugins describe --output json` prints them (the control
  /// plane has checked its shape), replacing any earlier list; "" forgets it (a briefing from a
  /// host that sends no schemas: provider_schemas then returns nullopt). Re-enrolling a removed node and
  /// purging it forget it. Errors: NotFound (not enrolled), InvalidArgument beyond the store's
  /// documented size bound. Default: Unsupported (a store written before this method; the control
  /// plane then checks declarations for shape only, and says so).
  virtual Result<void> set_provider_schemas(const std::string& node, const std::string& schemas) noexcept {
    (void)node;
    (void)schemas;
    return fail(ErrorCode::Unsupported, "this store cannot keep provider schemas");
  }
  /// The schemas last stored by set_provider_schemas (JSON text as given), or nullopt when the
  /// node never sent any (never briefed, or briefed by a host that predates them). Default:
  /// nullopt.
  virtual Result<std::optional<std::string>> provider_schemas(const std::string& node) noexcept {
    (void)node;
    return std::optional<std::string>{};
  }

  // --- records, sequences and compare-and-swap declarations (docs/decisions/0050, appended) -----
  // Stores written before these methods answer Unsupported for each (the control plane then
  // cannot keep modules, assignments, deploys or pipeline runs, and says so).

  /// The record (ns, key), or nullopt when it was never written or is erased. Errors: the
  /// store's own. Default: Unsupported.
  virtual Result<std::optional<StoredRecord>> record(const std::string& ns, const std::string& key) noexcept {
    (void)ns;
    (void)key;
    return fail(ErrorCode::Unsupported, "this store cannot keep records");
  }
  /// Every record of `ns` whose key starts with `key_prefix` ("" = all of them), sorted by key
  /// (bytewise), erased ones left out. Errors: the store's own. Default: Unsupported.
  virtual Result<std::vector<StoredRecord>> records(const std::string& ns, const std::string& key_prefix) noexcept {
    (void)ns;
    (void)key_prefix;
    return fail(ErrorCode::Unsupported, "this store cannot keep records");
  }
  /// Writes (or erases) every record of `writes` in one transaction, all or nothing, stamped
  /// `now_ms`. Returns each record as written, in the order of `writes` (an erased one with an
  /// empty value and the version its erasure took). Errors:
  ///   - FailedPrecondition naming ns/key when an expected_version does not hold (nothing
  ///     written);
  ///   - InvalidArgument: empty `writes`, an empty ns or key, the same (ns, key) twice, a write
  ///     with a `render`, or a key/value beyond the store's documented bounds;
  ///   - the store's own.
  /// Default: Unsupported.
  virtual Result<std::vector<StoredRecord>> put_records(const std::vector<RecordWrite>& writes,
                                                        std::int64_t now_ms) noexcept {
    (void)writes;
    (void)now_ms;
    return fail(ErrorCode::Unsupported, "this store cannot keep records");
  }
  /// The next value of the monotonic counter `name` (deploy ids, pipeline run ids): 1 the first
  /// time, then one more at each call, durable (never repeats, also after a restart; a value
  /// taken by a caller that then failed is a gap, never given again). Of concurrent callers each
  /// gets its own value. Errors: InvalidArgument (empty name), the store's own. Default:
  /// Unsupported.
  virtual Result<std::uint64_t> next_sequence(const std::string& name) noexcept {
    (void)name;
    return fail(ErrorCode::Unsupported, "this store cannot keep sequences");
  }
  /// declare() + the record writes + (optional) the request's answer (as declare_answered) in ONE
  /// transaction: so a deploy to N nodes, with its deploy record, is one all-or-nothing write.
  /// Nothing at all is written when a node's expected_revision or a record's expected_version
  /// does not hold: FailedPrecondition naming the node or ns/key (the caller re-reads and
  /// retries). Order: every check first (nodes enrolled, revisions, versions), then the
  /// delivery and the declarations (each `render` with its revision), then the records (each
  /// RecordWrite::render with the complete delivery), then the answer (RequestAnswer::render).
  /// `writes` may be empty: then no delivery is written (the renders see a DeliveryRecord with id
  /// 0 and no targets, and that is what is returned) — records and answer alone. `retain` as for
  /// declare(). The renders run while the store serialises its writes (other callers wait):
  /// with `expected_revision = R` the node's new revision is R + 1 when the write succeeds and the
  /// store has not raised the node's counter above R (ContactUpdate::applied_revision); a caller
  /// that renders before the call must check the revision its render is called with
  /// (docs/decisions/0051).
  /// Errors: those of declare() and put_records(); NotFound also when `answer` names a request
  /// that is not remembered. Default: Unsupported.
  virtual Result<DeliveryRecord> declare_with(const std::vector<DeclarationWrite>& writes,
                                              const std::vector<RecordWrite>& records, std::int64_t now_ms,
                                              std::uint32_t retain,
                                              const std::optional<RequestAnswer>& answer) noexcept {
    (void)writes;
    (void)records;
    (void)now_ms;
    (void)retain;
    (void)answer;
    return fail(ErrorCode::Unsupported, "this store cannot declare with records");
  }

  // --- backup and restore (SDK ABI 2.2, appended; docs/decisions/0085) ---------------------------
  // A control plane calls these only on a plugin built with ABI minor 2 or later (an older
  // plugin's table has no such entries): `mesh-control backup` / `restore` say so otherwise.

  /// Writes a consistent copy of everything the store holds — as of one instant — to the file
  /// `path`, while the store is open and in use: other callers of this instance wait at most
  /// for the copy, other processes sharing the store go on writing. The file is written
  /// atomically (a temporary file in the same directory, made durable, then renamed over
  /// `path`, replacing an older backup), owner-only (0600: it holds every node's key), in a
  /// format restore() of the same plugin reads and documents. Thread safety: as every method.
  /// Errors: FailedPrecondition (not open); InvalidArgument (empty path, its directory missing,
  /// the store's own file); PermissionDenied; Unavailable (disk full, I/O); the store's own.
  /// Default: Unsupported.
  virtual Result<void> backup(const std::string& path) noexcept {
    (void)path;
    return fail(ErrorCode::Unsupported, "this store cannot make backups");
  }
  /// Replaces everything the store holds with the backup at `path` (made by backup() of the same
  /// plugin). Called after configure() and instead of open(); open() may follow (it migrates a
  /// backup of an older schema). The backup is checked before anything is written, and the
  /// replacement is all or nothing: a refused or failed restore leaves the store as it was.
  /// Errors: FailedPrecondition (open, or the store is in use by another instance or process —
  /// the message says how to stop it; or a backup from a newer release); InvalidArgument (not
  /// a backup of this plugin, damaged — naming the file and what is wrong); PermissionDenied;
  /// Unavailable; the store's own. Not thread-safe with any other call on the instance.
  /// Default: Unsupported.
  virtual Result<void> restore(const std::string& path) noexcept {
    (void)path;
    return fail(ErrorCode::Unsupported, "this store cannot restore backups");
  }

  // --- group commit of reports and many reads (SDK ABI 2.3, appended; docs/decisions/0100, 0101)
  // A control plane calls these only on a plugin built with ABI minor 3 or later (an older
  // plugin's table has no such entries): it loops over record_apply/record_drift itself, and
  // reads one call at a time, otherwise.

  /// Records every report of `batch` — apply reports and drift reports that arrived together —
  /// in ONE write of the store (sqlite: one transaction, one fsync; jetstream-kv: one operation
  /// message), each exactly as record_apply() / record_drift() would record it alone, in the
  /// order of `batch.applies` then `batch.drifts`.
  ///
  /// Returns, when the write is durable, one result per report (ReportResults, parallel to the
  /// batch's vectors): true/false as record_apply/record_drift return, or that report's own
  /// refusal (InvalidArgument, PermissionDenied, NotFound, with the message record_apply or
  /// record_drift would give). A refused report changes nothing and does not fail the others:
  /// the others are recorded in the same write.
  ///
  /// Errors (the whole batch; nothing of it is written): a failure of the store itself —
  /// retryable (Transient, Unavailable) as for every method; FailedPrecondition before open().
  /// A caller acknowledges a report only after this returned its result.
  ///
  /// Parameters: `batch` is read only during the call (not kept). Any size is accepted; a store
  /// may split a large batch into several writes only if each report is still recorded once and
  /// the call returns after all are durable. Thread safety: as every method.
  ///
  /// Default: calls record_apply() then record_drift() for each report in turn (one write each),
  /// so a store written before this method still works; a store's own failure on one report is
  /// then that report's result and the others are still tried.
  virtual Result<ReportResults> record_reports(const ReportBatch& batch) noexcept {
    ReportResults out;
    out.applies.reserve(batch.applies.size());
    out.drifts.reserve(batch.drifts.size());
    for (const auto& r : batch.applies) out.applies.push_back(record_apply(r));
    for (const auto& d : batch.drifts) out.drifts.push_back(record_drift(d));
    return out;
  }

  /// Runs `reads` once with `view`, a Store to READ from (SDK ABI 2.3, docs/decisions/0101): a
  /// caller with many reads to make (a deploy report asks for 10,000 nodes' reports) makes them
  /// through `view`, which answers them from one state — a store whose every read costs a round
  /// trip (jetstream-kv catches up with its log before each) catches up once for all of them.
  /// `view` is valid only during the call and only for reads: nodes, node, latest_revision,
  /// revision, history, next_revision, delivery, latest_delivery, apply_report, apply_reports,
  /// last_drift, owned, recovery_copy, all_nodes, provider_schemas, record, records. A write
  /// through it is a bug of the caller (a store may answer it with FailedPrecondition or apply it
  /// outside its log). Other callers of this store may wait until `reads` returns: keep it short,
  /// and do not call this store itself from inside (it may deadlock).
  /// Returns what `reads` returns; errors: the store's own (e.g. Unavailable when it cannot catch
  /// up: `reads` is then not called). Thread safety: as every method. Default: `reads(*this)`.
  virtual Result<void> read_many(const std::function<Result<void>(Store& view)>& reads) noexcept {
    return reads(*this);
  }

  /// Group commit of nonces (SDK ABI 2.4, appended; docs/decisions/0119): remembers every
  /// request of `requests` in ONE write, each exactly as remember_request(request, now_ms) would
  /// in the batch's order — nullopt when it is fresh (remembered now), the record kept for it
  /// otherwise. The same (signer, nonce) twice in one batch: the first is fresh, the second gets
  /// the first's record (a replay). Expired requests are forgotten once for the batch.
  ///
  /// Returns, when the write is durable (a restart, or another control plane sharing the store,
  /// then refuses each of them as a replay), one result per request (same length and order); a
  /// request's own refusal (InvalidArgument: empty signer or nonce) is its result alone and does
  /// not fail the others. Of concurrent calls (or remember_request calls) with the same pair,
  /// exactly one gets nullopt for it.
  ///
  /// Errors (the whole batch; none of it is remembered): the store's own — retryable (Transient,
  /// Unavailable) as for every method; FailedPrecondition before open(). A caller treats each
  /// request as unchecked then (refuses it) — never as fresh.
  ///
  /// Parameters: `requests` is read only during the call (answers in it are ignored). Any size is
  /// accepted; a store may split a large batch into several writes only if each request is still
  /// remembered once and the call returns after all are durable. Thread safety: as every method.
  ///
  /// Default: calls remember_request() for each in turn (one write each), so a store written
  /// before this method still works; its failure on one request is then that request's result.
  virtual Result<RememberResults> remember_requests(const std::vector<RequestRecord>& requests,
                                                    std::int64_t now_ms) noexcept {
    RememberResults out;
    out.reserve(requests.size());
    for (const auto& r : requests) out.push_back(remember_request(r, now_ms));
    return out;
  }
};

}  // namespace mesh::sdk
