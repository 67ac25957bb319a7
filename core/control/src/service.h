// The handlers behind ControlPlane: one call per message, on a worker thread. Internal.
//
// One class, its members defined by concern in the files beside this one:
//   service.cpp        construction, handle(), replies and refusals, which reply subjects are
//                      allowed
//   dispatch.cpp       routing: the order of checks and which handler a subject goes to
//   parts_intake.cpp   messages in parts, reassembled before dispatch
//   auth.cpp           signed requests (operators, nodes): signature, clock, nonce, role
//   heartbeats.cpp     the heartbeat identity cache and heartbeat order
//   host_messages.cpp  latest, reports, drift reports, heartbeats, recovery, briefings
//   report_batcher.h   group commit of reports: one store write per batch, acks after it
//   nonce_batcher.h    group commit of signed requests' nonces: handled after their batch
//   enrolment.cpp      enrolment tokens (token.*) and enrolment itself
//   operations.cpp     the table of operations {name, handler, role, mutating} and on_api
//   api_read.cpp       nodes, node.show, report, history
//   api_write.cpp      declare, rollback (one declare_composed() path)
//   api_operators.cpp  operator.add, operator.list, operator.remove
//   node_removal.cpp   node.remove, nodes --all
//   api_pipeline.cpp   pipeline.run, pipeline.show (the runner: pipeline_runner.h)
//   api_publish.cpp    publish.part, publish, repository.key (uploads to the publish stage)
// All members may run concurrently on several workers: shared state is guarded by its own mutex
// (or is the store's, which is thread-safe).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fleet_state.h"
#include "fleet_view.h"
#include "operations.h"
#include "pipeline_runner.h"
#include "rate_limit.h"
#include "nonce_batcher.h"
#include "replay_cache.h"
#include "report_batcher.h"
#include "mesh/common/logging.h"
#include "mesh/common/parts.h"
#include "mesh/common/trust.h"
#include "mesh/control/control_plane.h"
#include "mesh/sdk/store.h"
#include "mesh/sdk/transport.h"
#include "mesh/sdk/value.h"

namespace mesh::control::detail {

class Service {
 public:
  using ContactSink = std::function<void(sdk::ContactUpdate&&)>;

  /// `store` and `transport` are shared with ControlPlane and must be open; `contacts` receives
  /// each heartbeat that counts (ControlPlane batches them into Store::touch).
  Service(std::shared_ptr<sdk::Store> store, std::shared_ptr<sdk::Transport> transport,
          const ControlOptions& options, ContactSink contacts);

  /// Handles one message completely: size, protocol version, JSON, fields, then the store; a
  /// request gets its reply here, a bad publish is logged and dropped. Never throws.
  void handle(const sdk::Message& message, std::int64_t received_ms) noexcept;
  /// Whether `node`'s heartbeat identity is cached and not due to be read again: a heartbeat of
  /// it is verified without a store read (ControlPlane then takes it on the subscription's
  /// delivery thread; decision record 122). Thread-safe.
  bool heartbeat_identity_cached(std::string_view node);

  /// The body limit in force: min(broker max_payload, limits.max_message).
  std::size_t body_limit() const noexcept;

  /// Replies to `request` with an error (no-op when it expects no reply) and logs the refusal
  /// with the subject and the field. Public for the queue's "busy" path.
  /// The message and path are capped (an echoed value shows its first 64 bytes and its size);
  /// no reply when the request's reply subject is not allowed (reply_allowed).
  /// `detail`: more keys of the reply's `error` object (ApiCall::refusal), or nullptr.
  void refuse(const sdk::Message& request, const sdk::Error& error, bool quiet = false,
              const sdk::Value* detail = nullptr) noexcept;

  /// True when `m` expects no reply, or its reply subject is an inbox this kind of request may be
  /// answered on (docs/protocol.md "Reply subjects"): API requests anywhere under `_INBOX.` but
  /// `_INBOX.node.` and `_INBOX.enrol.`; enrolment under `_INBOX.enrol.`; a node's requests under
  /// `_INBOX.node.<node>.`. Never under `_INBOX.control.`, the control plane's own inboxes
  /// (decision record 185), whatever the request and the broker permissions. Without broker
  /// permissions managed by this control plane (ControlOptions::broker_credentials false)
  /// enrolment may also use the API's inboxes, and a
  /// node's requests anything under `_INBOX.` but another node's prefix, since hosts then keep
  /// nats.c's default inbox prefix (or the enrolment one, for the first briefing).
  bool reply_allowed(const sdk::Message& m) const;

  /// Returns once every nonce handed to the group commit of nonces before the call has its
  /// result (nonce_batcher.h), then once every report handed to the group commit before the call
  /// (on_report, on_drift) is recorded and answered (report_batcher.h). ControlPlane::stop calls
  /// it after its workers ended (a request whose nonce comes back then is handled on the
  /// committer's thread: set_post's function refuses it). Thread-safe.
  void drain_reports() noexcept;

  /// `post` runs a task on one of the control plane's workers later and returns true, or returns
  /// false (the control plane is stopping) — the task is then run at once by the caller. A node
  /// request whose nonce was remembered by a batch is handled through it (admit_node_request),
  /// so that the committer's thread only hands results out. Called from the committer thread; it
  /// must not block. Set before messages are handled (not thread-safe with them); without it,
  /// such a request is handled on the committer's thread.
  void set_post(std::function<bool(std::function<void()>)> post);

 private:
  // The table of operations names the handlers below (operations.cpp).
  friend std::span<const Operation> operations();

  // --- routing (dispatch.cpp, parts_intake.cpp) ---------------------------------------------
  /// Routes one whole message to its handler after the checks every message gets, in the order
  /// of docs/protocol.md: size (`limit`: the largest body accepted, body_limit() for a single
  /// message and ControlOptions::max_assembled for one reassembled from parts), protocol
  /// version, proof (signature or MAC), JSON, then the node named in the body.
  void dispatch(const sdk::Message& m, std::int64_t now_ms, std::size_t limit);
  /// A part of a larger message (parts_intake.cpp): kept until its whole is complete (reply
  /// Mesh-Status `part`), then the whole is dispatched. Refused parts get an error reply.
  void take_part(const sdk::Message& m, std::int64_t now_ms);

  // --- replies (service.cpp) ----------------------------------------------------------------
  /// Publishes `reply` (in parts when over the broker's limit); a failure is logged. No-op for
  /// an empty subject.
  void reply(sdk::Message&& reply) noexcept;
  /// Replies Mesh-Status ok with `body`, signed as the request's kind requires (sign_reply_to).
  void reply_ok(const sdk::Message& request, const sdk::Value& body);
  /// Replies to a report request (mesh.report.*, mesh.drift.*) with `body`, signed with the
  /// control key over the report (trust::sign_ack), so that the host can tell it from a forgery
  /// before it drops the report from its outbox.
  void reply_ack(const sdk::Message& request, const sdk::Value& body);
  /// How a report request (on_report, on_drift) ends: reply_ack with `{"recorded": *recorded}`,
  /// or, on an error, refuse() with it as the host must read it — InvalidArgument,
  /// PermissionDenied, Transient, Unavailable and Timeout as they are, any other code as
  /// Unavailable ("not recorded (CODE): ...; retry later"), so that the host keeps the report and
  /// sends it again (host_messages.cpp).
  void answer_report(const sdk::Message& request, const sdk::Result<bool>& recorded);
  /// Signs `reply` for `request` as its kind requires: trust::sign_ack for reports and drift
  /// reports, trust::sign_reply for mesh.latest.* and mesh.recovery.*; others unchanged.
  void sign_reply_to(sdk::Message& reply, const sdk::Message& request);
  /// Logs a request dropped for its reply subject: at most one warning per second, counting the
  /// ones it did not log.
  void warn_reply_refused(const sdk::Message& m) noexcept;
  /// refuse() for a signed request (operator or node). A refusal for a timestamp outside the
  /// tolerance (error path Mesh-Timestamp) carries the control plane's clock `now_ms` in
  /// Mesh-Time, signed with the control key over the request's subject and nonce
  /// (trust::sign_time), so that the sender can correct its clock and retry.
  void refuse_signed_request(const sdk::Message& request, const sdk::Error& error, std::int64_t now_ms) noexcept;

  // --- trust (auth.cpp; docs/security.md). Each returns PermissionDenied with the reason. ----
  /// A signed request (operator or node): known signer, valid signature, timestamp within the
  /// clock tolerance, nonce not seen before — in the signer's own memory cache (its quota: busy
  /// when full), then in the store (Store::remember_request), so that a restart forgets none.
  /// `public_key` of the signer (raw 32 bytes); `kind` "operator" or "node". An `idempotent`
  /// request (Mutating::idempotent) seen before with the same signed bytes is not a replay but a
  /// retry: the Admission carries its stored answer, after waiting for its first copy if that
  /// still runs here. Errors: PermissionDenied (forged, expired, replayed), Transient (the
  /// signer's cache is full; a retry whose first copy has no answer yet), the store's errors
  /// (fail closed).
  sdk::Result<Admission> check_signed_request(const sdk::Message& m, const trust::RequestProof& proof,
                                              const std::string& public_key, std::int64_t now_ms,
                                              std::string_view kind, bool idempotent);
  /// The checks of check_signed_request before the store — signature, clock, the signer's memory
  /// cache (a repeated nonce is refused unless `idempotent`) — and the record the store is to
  /// remember. Same errors.
  sdk::Result<sdk::RequestRecord> request_record(const sdk::Message& m, const trust::RequestProof& proof,
                                                 const std::string& public_key, std::int64_t now_ms,
                                                 std::string_view kind, bool idempotent);
  /// A node's signed request (latest, recovery, content): authenticated as
  /// authenticate_node_request does, its nonce handed to the group commit of nonces
  /// (nonce_batcher.h), and `then(request)` run on a worker (set_post) only once the store's
  /// write holding the nonce is durable and found it fresh. Any refusal — forged, expired,
  /// replayed (also when the store, after a restart or through another instance, already had the
  /// nonce), the store's error (fail closed) — is answered with refuse_signed_request and `then`
  /// is not called. Returns at once.
  void admit_node_request(const sdk::Message& m, const std::string& node, std::int64_t now_ms,
                          std::function<void(const sdk::Message&)> then);
  /// Runs `task` through post_ (on a worker), or now when there is none or it refused.
  void run_posted(std::function<void()> task) noexcept;
  /// The operator behind an API request, allowed to run `op` (role_allows: the table's role;
  /// an unknown operation needs admin, then is answered unsupported); `admission` receives the
  /// nonce check's result (idempotent for the table's Mutating::idempotent operations).
  sdk::Result<OperatorRecord> authenticate_operator(const sdk::Message& m, std::string_view op,
                                                    std::int64_t now_ms, Admission* admission);
  /// The raw public key (32 bytes) of enrolled `node`, which its latest/recovery/content requests
  /// are signed with. Errors: PermissionDenied (not enrolled, no key on record), the store's.
  sdk::Result<std::string> node_request_key(const std::string& node);
  /// The node behind a report, drift report or briefing on its own subject: enrolled, with a key
  /// on record that verifies the message (trust::verify_report). Errors: PermissionDenied on
  /// path "subject" (not enrolled, no key on record) or the signature's; Internal (a stored key
  /// that is not hex); the store's errors.
  sdk::Result<sdk::NodeRecord> authenticate_node_message(const sdk::Message& m, const std::string& node);

  // --- heartbeats (heartbeats.cpp; decision record 17) --------------------------------------
  /// Whether a heartbeat with this (verified) timestamp counts: within the clock tolerance of
  /// `now_ms` and newer than the newest one taken from this identity (node, generation) — also
  /// across restarts, since that newest one is kept in the store (NodeRecord::heartbeat_ms) and
  /// read back with the identity. Errors: PermissionDenied "expired" / "replayed".
  sdk::Result<void> fresh_heartbeat(const std::string& node, std::uint64_t generation, std::int64_t timestamp_ms,
                                    std::int64_t now_ms);
  /// What a heartbeat is verified with: the node's current generation and heartbeat MAC key.
  struct HeartbeatIdentity {
    std::uint64_t generation = 0;
    std::string mac_key;  ///< trust::heartbeat_key of the node's current identity (raw)
    std::string public_key;  ///< the node's Ed25519 public key (raw, 32 bytes): its reports' signer
    std::chrono::steady_clock::time_point filled{};  ///< when it was read from the store
    bool cached = false;  ///< heartbeat_identity() answered from its cache
  };
  /// Raises the newest heartbeat timestamp known for (node, generation) to `recorded_ms` (the
  /// store's, read with the identity).
  void seed_heartbeat(const std::string& node, std::uint64_t generation, std::int64_t recorded_ms);
  /// The identity of an enrolled node, from a cache in front of Store::node (decision record 17).
  /// A cached entry is used for at most a minute, and `reread` skips the cache: another instance
  /// sharing the store may have re-enrolled the node (decision record 90; dispatch reads again
  /// when a cached identity fails to verify a heartbeat).
  /// Errors: PermissionDenied (not enrolled, no key on record), the store's errors. Thread-safe.
  sdk::Result<HeartbeatIdentity> heartbeat_identity(const std::string& node, bool reread = false);
  /// Drops `node` from that cache. Called right after the store committed an enrolment of
  /// `node`, before the reply: from then on its old MAC key verifies nothing. Thread-safe.
  void forget_heartbeat_identity(const std::string& node);
  /// A heartbeat whose MAC verified (`heartbeat_ms`, `generation`: its timestamp and identity),
  /// when its body is in the plain shape (heartbeat_body.h) and passes every field check: the
  /// freshness check, then taken as contact, or refused as stale — true. Otherwise nothing is
  /// done and false: the caller goes on with the general parse and checks (dispatch), which
  /// refuse it naming the field, or take it. Thread-safe.
  bool take_plain_heartbeat(const sdk::Message& m, const std::string& node, std::int64_t now_ms,
                            std::int64_t heartbeat_ms, std::uint64_t generation);

  // --- host messages (host_messages.cpp, enrolment.cpp; docs/protocol.md "Subjects") -------
  // Each replies (or refuses) itself; `node` is the subject's node, already authenticated.
  void on_latest(const sdk::Message& m, const std::string& node);
  /// `generation`: of the identity whose key verified `m`; `now_ms`: its receipt time.
  void on_report(const sdk::Message& m, const std::string& node, const sdk::Value& body,
                 std::uint64_t generation, std::int64_t now_ms);
  void on_drift(const sdk::Message& m, const std::string& node, const sdk::Value& body,
                std::int64_t now_ms);
  /// `heartbeat_ms` and `generation`: the heartbeat's verified timestamp and the identity it was
  /// verified with, kept with the contact (ContactUpdate) so that its order survives a restart.
  void on_heartbeat(const sdk::Message& m, const std::string& node, const sdk::Value& body,
                    std::int64_t now_ms, std::int64_t heartbeat_ms, std::uint64_t generation);
  /// The end of a report (apply or drift) recorded by a batch (ReportBatcher's Done posts it to a
  /// worker once the batch is durable, set_post): the log line, the stages' wake-up, and the answer (answer_report) with the report's
  /// own result.
  void finish_report(PendingReport&& report, const sdk::Result<bool>& recorded);
  void on_recovery(const sdk::Message& m, const std::string& node);
  /// mesh.content.<node> {digest, offset, length} (api_content.cpp, decision record 111): the
  /// range of the content file named by digest, at most one message (body_limit() less
  /// kContentHeaderRoom), Mesh-Content-Size its whole size; Mesh-Status none when the content
  /// directory lacks it. Signed for the request (sign_reply_to).
  void on_content(const sdk::Message& m, const std::string& node, const sdk::Value& body);
  void on_briefing(const sdk::Message& m, const sdk::NodeRecord& node, const sdk::Value& body,
                   std::int64_t now_ms);
  /// mesh.enrol (enrolment.cpp): unauthenticated but for its token.
  void on_enrol(const sdk::Message& m, const sdk::Value& body, std::int64_t now_ms);

  // --- operator API (operations.cpp; docs/protocol.md "API") --------------------------------
  /// Runs operation `op` for an operator already authenticated and allowed (authenticate_operator)
  /// — the table's handler — and replies. `request`: its nonce check; an idempotent operation's
  /// refusal is stored with it (its result is stored by declare_composed()), so that a retry of the same
  /// request gets the same answer. An operation not in the table is `unsupported`.
  void on_api(const sdk::Message& m, std::string_view op, const sdk::Value& params,
              std::int64_t now_ms, const OperatorRecord& who, const Admission& request);
  /// Replies to a retried idempotent request with the answer stored for its first copy (the
  /// stored text of ok_answer() / error_answer()).
  void reply_stored_answer(const sdk::Message& m, std::string_view op, const std::string& answer,
                           const OperatorRecord& who);

  // The handlers of the table of operations, one per row (ApiHandler). Parameters and results:
  // docs/protocol.md "API".
  sdk::Result<sdk::Value> api_token_issue(const ApiCall& call);   // enrolment.cpp
  sdk::Result<sdk::Value> api_token_list(const ApiCall& call);    // enrolment.cpp
  sdk::Result<sdk::Value> api_token_revoke(const ApiCall& call);  // enrolment.cpp
  sdk::Result<sdk::Value> api_operator_add(const ApiCall& call);     // api_operators.cpp
  sdk::Result<sdk::Value> api_operator_list(const ApiCall& call);    // api_operators.cpp
  sdk::Result<sdk::Value> api_operator_remove(const ApiCall& call);  // api_operators.cpp
  sdk::Result<sdk::Value> api_nodes(const ApiCall& call);      // api_read.cpp
  sdk::Result<sdk::Value> api_node_show(const ApiCall& call);  // api_read.cpp
  sdk::Result<sdk::Value> api_report(const ApiCall& call);     // api_read.cpp
  sdk::Result<sdk::Value> api_history(const ApiCall& call);    // api_read.cpp
  /// declare and rollback (api_write.cpp): their answer is stored with `call.request`.
  sdk::Result<sdk::Value> api_declare(const ApiCall& call);
  sdk::Result<sdk::Value> api_rollback(const ApiCall& call);
  /// node.remove {node, purge} (node_removal.cpp, decision record 37): Store::remove_node, then
  /// the node's heartbeat identity is forgotten and the broker's authorization file rewritten
  /// without it (nodes_changed).
  sdk::Result<sdk::Value> api_node_remove(const ApiCall& call);
  // Fleet operations (api_fleet.cpp, api_deploy.cpp; decision records 63-66).
  sdk::Result<sdk::Value> api_module_push(const ApiCall& call);
  sdk::Result<sdk::Value> api_module_list(const ApiCall& call);
  sdk::Result<sdk::Value> api_module_show(const ApiCall& call);
  sdk::Result<sdk::Value> api_node_label(const ApiCall& call);
  sdk::Result<sdk::Value> api_assign(const ApiCall& call);
  sdk::Result<sdk::Value> api_unassign(const ApiCall& call);
  sdk::Result<sdk::Value> api_assignments(const ApiCall& call);
  /// deploy: the one composed write and its answer, stored with `call.request`.
  sdk::Result<sdk::Value> api_deploy(const ApiCall& call);
  sdk::Result<sdk::Value> api_deploy_show(const ApiCall& call);

  /// publish.part {upload, offset, data}, publish {upload, file, size, sha256} and
  /// repository.key {} (api_publish.cpp, decision record 59): an upload in chunks into a spool
  /// file, then the `publish` stage run on the whole file once its size and SHA-256 match.
  sdk::Result<sdk::Value> api_publish_part(const ApiCall& call);
  sdk::Result<sdk::Value> api_publish(const ApiCall& call);
  /// Removes every spool file of `mesh publish` uploads (api_publish.cpp): called once when the
  /// service starts, when no upload can be going on (an upload does not outlive mesh-control: its
  /// `mesh` got no answer and said nothing was published). Failures are logged.
  void remove_interrupted_uploads();
  sdk::Result<sdk::Value> api_repository_key(const ApiCall& call);
  /// content.put {digest, size, offset, upload, data} (api_content.cpp, decision record 111):
  /// one range of a file into <content dir>/incoming/<hex>.<upload> (pwrite, fsync); the range
  /// that ends it has the whole file hashed and, when the digest matches, renamed into
  /// sha256/<hex> (PermissionDenied naming both digests otherwise, nothing stored). A digest
  /// already stored answers {present: true} at once. Errors: InvalidArgument (a field, an offset
  /// or range beyond `size`, a short file), Unsupported (no content directory), Transient (I/O).
  sdk::Result<sdk::Value> api_content_put(const ApiCall& call);
  /// <content dir>/sha256/<hex>.
  std::string content_path(const std::string& hex) const;
  /// The largest content `content.put` takes (4 GiB).
  static constexpr std::uint64_t kMaxContent = 4ull << 30;
  /// Bytes of a message left for headers when a content range is answered.
  static constexpr std::size_t kContentHeaderRoom = 16 << 10;
  /// The largest file `mesh publish` may upload (1 GiB).
  static constexpr std::uint64_t kMaxUpload = 1ull << 30;

  /// pipeline.run {pipeline, version} and pipeline.show {run} (api_pipeline.cpp, decision record
  /// 62): a run started on the runner's thread, answered with its first record; the record.
  sdk::Result<sdk::Value> api_pipeline_run(const ApiCall& call);
  sdk::Result<sdk::Value> api_pipeline_show(const ApiCall& call);
  /// The runner of this control plane (made at construction; api_pipeline.cpp).
  std::unique_ptr<PipelineRunner> make_pipeline_runner();
  /// StageContext::deploy for a pipeline's stage: the `deploy` operation of the table run for
  /// `operator_name` (Unsupported when this control plane has none). `written`, when set, is
  /// called with the deploy's first answer as soon as the deploy is written, before the wait.
  sdk::Result<sdk::Value> deploy_for_stage(const std::string& operator_name, const std::string& module,
                                           const std::string& version, const sdk::Value& options,
                                           const std::function<void(const sdk::Value&)>& written = {});

  // --- helpers of the operations ------------------------------------------------------------
  /// The nodes `nodes` lists: enrolled ones, or with {all: true} removed ones too
  /// (node_removal.cpp).
  sdk::Result<std::vector<sdk::NodeRecord>> listed_nodes(const sdk::Value& p);
  /// Unsupported when the store plugin predates Store::remove_node (SDK ABI 1.0).
  sdk::Result<void> store_can_remove() const;
  /// A revision of one node with its composition (api_write.cpp): `build` makes the new revision from
  /// the node's current state; the write is a compare-and-swap on that state's revision, made
  /// again from the new state when another write won (at most kCasAttempts times). The result is
  /// {delivery, nodes, revision} plus `extra`. Errors: those of `build` and write_plans.
  sdk::Result<sdk::Value> declare_composed(const std::string& node,
                                           const std::function<sdk::Result<NodePlan>(const NodeState&)>& build,
                                           std::int64_t now_ms, const Admission* request, const sdk::Value* extra);
  /// The composed write (fleet_write.cpp): one Store::declare_with of every plan (with its
  /// composition and expected revision) and `records`, with the request's answer
  /// (`answer_of(delivery)`, stored when `request` has a nonce), then the signed pushes. Errors:
  /// InvalidArgument (a body over limits.max_assembled), FailedPrecondition (a node's revision
  /// moved on: nothing written; make the plans again), the store's.
  sdk::Result<sdk::DeliveryRecord> write_plans(const std::vector<NodePlan>& plans, std::vector<sdk::RecordWrite> records,
                                               std::int64_t now_ms, const Admission* request,
                                               const std::function<sdk::Value(const sdk::DeliveryRecord&)>& answer_of);
  /// Signs and publishes one stored revision on mesh.decl.<node>; a failed push is logged.
  void push_declaration(const std::string& node, std::uint64_t revision, const std::string& body);
  /// The plan of a deploy of `module` (api_deploy.cpp): every node `selector` selects or that
  /// carries the module (only those in `only`, when given), rendered, composed and checked.
  /// Errors: InvalidArgument naming the node (template, conflict, schema: `refusal` gets the
  /// diagnostics), NotFound (no assignment and no carrier), the store's.
  sdk::Result<DeployPlan> plan_deploy(const fleet::Module& module, const fleet::Selector* selector,
                                      const std::string& operator_name, bool dry_run,
                                      const std::vector<std::string>* only, sdk::Value* refusal);
  /// The delivery report of `delivery` as `report` answers it (api_deploy.cpp).
  sdk::Result<sdk::Value> delivery_report(const sdk::DeliveryRecord& delivery, std::int64_t now_ms);
  /// The outcome lists (`applied`, `failed`, `outstanding`, `superseded`) of the revisions a
  /// deploy's unchanged nodes hold (`held`: [{"node","revision"}]), each entry marked
  /// `"unchanged": true` (api_deploy.cpp, decision record 68). Errors: the store's.
  sdk::Result<sdk::Value> held_outcomes(const sdk::Value& held, std::int64_t now_ms);

 public:
  /// The deploy of `module` at `version` as the `deploy` operation runs it (api_deploy.cpp,
  /// decision record 64), for callers inside mesh-control too (a pipeline's deploy stage):
  /// `operator_name` is recorded as who asked; `request` (nullable) is the API request whose
  /// answer is stored with the write; `refusal` (nullable) receives a schema refusal's
  /// diagnostics. Returns the deploy report (or the dry run's plan). Errors: NotFound (module,
  /// version, assignment), InvalidArgument (naming the node: a template, a conflict, a schema),
  /// Transient (other writes kept winning), the store's. Thread-safe.
  sdk::Result<sdk::Value> deploy_module(const std::string& module, const std::string& version, bool dry_run,
                                        const std::string& operator_name, std::int64_t now_ms,
                                        const Admission* request = nullptr, sdk::Value* refusal = nullptr,
                                        const StagedOptions* staged = nullptr);
  /// When advance_deploys wants to be called again, besides a set_stage_wake() call.
  struct StageWait {
    /// The earliest wave timeout (epoch milliseconds) of a running deploy not yet past it.
    std::optional<std::int64_t> due_ms;
    /// Run again 250 ms from now: a round stopped on an error (the store, a lost
    /// compare-and-swap) or wrote a wave (whose nodes may have nothing to apply).
    bool soon = false;
  };
  /// Moves every running staged deploy on (api_waves.cpp, decision records 66 and 71): a wave
  /// with a failed node halts the deploy; one with nothing outstanding, or past its wave
  /// timeout, writes the next wave when enough of it applied, and halts otherwise. Remembers the
  /// nodes of the current waves (for set_stage_wake) and returns when it wants to run again.
  /// Called by the control plane's staging thread when woken, at `due_ms`, 250 ms after a round
  /// that says `soon`, and at least every 5 s; logs, never fails. Not to be called concurrently with
  /// itself.
  StageWait advance_deploys(std::int64_t now_ms) noexcept;
  /// `wake` is called when a staged deploy may move on before its next timeout: a report from a
  /// node of a current wave (as advance_deploys last saw them) was taken by the store, a revision
  /// of such a node was written (write_plans: it may be superseded), a staged deploy was written
  /// (deploy_module). Called from the thread that handled the message, with no lock of the
  /// Service held; it must not block nor call back into the Service. Set before messages are
  /// handled and advance_deploys runs (not thread-safe with them); none by default.
  void set_stage_wake(std::function<void()> wake);
  /// The deploy report of deploy `id` (what `deploy.show` answers). Errors: NotFound, the store's.
  sdk::Result<sdk::Value> deploy_report(std::uint64_t id, std::int64_t now_ms);
  /// At start: pushes again each node's latest revision that was neither applied nor reported
  /// (written just before a stop, its push perhaps lost). Logged; never fails.
  void push_pending() noexcept;
  /// Pushes again a node's declared revision that a connected node seems never to have received
  /// (decision record 192): still neither applied nor reported, while heartbeats taken
  /// kStrandedAfter or more after this instance first saw it outstanding say the host is not
  /// applying. Again at growing intervals (kStrandedRepush, doubling, at most kStrandedRepushMax)
  /// while that holds; once only while the host says its last apply failed; never while it says
  /// it is applying. For the lease holder, every lease round (`now_ms`: epoch ms). Logged; never
  /// fails. Not to be called concurrently with itself.
  void push_stranded(std::int64_t now_ms) noexcept;
  /// How long after a revision was first seen outstanding a heartbeat that does not say
  /// "applying" counts as the host not having it, and the first wait between pushes again.
  static constexpr std::int64_t kStrandedAfterMs = 10'000;
  static constexpr std::int64_t kStrandedRepushMs = 30'000;
  static constexpr std::int64_t kStrandedRepushMaxMs = 600'000;

 private:
  /// The record of an enrolled node (api_read.cpp). Errors: NotFound on path "node", saying how
  /// to enrol it; the store's errors.
  sdk::Result<sdk::NodeRecord> enrolled(const std::string& node);
  /// Charges `m`'s body to `node`'s store budget (store_bytes_, decision record 186): nullopt when
  /// it may be written; else the refusal to answer it with (Transient, saying when to try again),
  /// after a rate-limited warning naming the node.
  std::optional<sdk::Error> charge_store_bytes(const sdk::Message& m, const std::string& node);

  std::shared_ptr<sdk::Store> store_;
  std::shared_ptr<sdk::Transport> transport_;
  ControlOptions options_;
  ContactSink contacts_;
  /// Calls stage_wake_ when `node` is null or a node of a current wave (stage_nodes_).
  void wake_stages(const std::string* node) noexcept;
  std::function<void()> stage_wake_;
  std::mutex stage_mu_;
  std::set<std::string> stage_nodes_;  // the nodes of running staged deploys' current waves
  SignerReplayCache replay_;  // per-signer nonce caches in front of the store's (replay_cache.h)
  InFlight in_flight_;        // idempotent requests running now, for their retries to wait on
  std::mutex heartbeat_mu_;
  struct LastHeartbeat {
    std::uint64_t generation = 0;
    std::int64_t timestamp_ms = 0;
  };
  std::unordered_map<std::string, LastHeartbeat> last_heartbeat_;
  // The heartbeat identity cache. `identity_epoch_` grows at every forget: a fill whose store
  // read may have raced an enrolment is used once and not kept.
  std::mutex identity_mu_;
  std::unordered_map<std::string, HeartbeatIdentity> identities_;
  std::uint64_t identity_epoch_ = 0;
  std::mutex reflection_mu_;
  std::chrono::steady_clock::time_point reflection_next_log_{};
  std::uint64_t reflection_hidden_ = 0;
  // Refusals are caused by whoever sends a message: their warnings are rate-limited.
  common::LogBudget refusal_log_{20};
  /// What each node's reports, drift reports and briefings make the store write (decision record
  /// 186), and the warnings about nodes over it.
  RateLimiter store_bytes_;
  common::LogBudget store_bytes_log_{5};
  /// Buffers of parts by kind of sender: [0] operators (mesh.api.*), [1] enrolment, [2] nodes.
  std::array<protocol::parts::Reassembler, 3> intake_;
  /// Where a request admitted by a batch of nonces, and a report's answer, are handled
  /// (set_post). Before the batchers: destroyed after them.
  std::function<bool(std::function<void()>)> post_;
  /// Group commit of reports (report_batcher.h); its thread answers through this Service.
  std::unique_ptr<ReportBatcher> reports_;
  /// Group commit of nonces (nonce_batcher.h); destroyed before what its callbacks use.
  std::unique_ptr<NonceBatcher> nonces_;
  /// push_stranded()'s view of each outstanding node (lease thread only): the revision, when this
  /// instance first saw it outstanding, how often it was pushed again, when it may be next, and
  /// whether a report of it was found (nothing more to do).
  struct Stranded {
    std::uint64_t revision = 0;
    std::int64_t since_ms = 0;
    int pushes = 0;
    std::int64_t next_ms = 0;
    bool reported = false;
  };
  std::unordered_map<std::string, Stranded> stranded_;
  /// NOX_MESH_CONTROL_DROP_PUSHES_FOR_TEST: how many pushes are still to be dropped (tests only).
  std::atomic<long> drop_pushes_{0};
  // Last: destroyed first, so that its threads stop before what they use goes.
  std::unique_ptr<PipelineRunner> pipelines_;
};

}  // namespace mesh::control::detail
