// Trust of signed requests (docs/security.md, docs/protocol.md "Trust" and "Nonces"): an
// operator's API request or a node's latest/recovery request is verified — known signer,
// signature, clock, nonce (decision records 16, 28, 29) — and an operator's role checked against
// the table of operations; a node's report, drift report or briefing is verified with the key on
// record for the node of its subject.
#include <spdlog/spdlog.h>

#include <chrono>

#include "service.h"
#include "service_util.h"
#include "mesh/common/crypto.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"

namespace mesh::control::detail {
namespace {

using sdk::ErrorCode;

// "60.5 s": whole seconds would print 60 s for a skew of 60.9 s against a tolerance of 60 s.
std::string seconds_text(std::int64_t ms) {
  std::string out = std::to_string(ms / 1000);
  if (ms < 0 && ms > -1000) out = "-" + out;
  if (std::int64_t frac = (ms < 0 ? -ms : ms) % 1000; frac != 0) {
    std::string f = std::to_string(frac);
    f = std::string(3 - f.size(), '0') + f;
    while (f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out + " s";
}

// How long a retried mutating request waits for its first copy still running here.
constexpr auto kRetryWait = std::chrono::seconds(20);

sdk::Error replayed_error() {
  return sdk::Error{ErrorCode::PermissionDenied, "request replayed: its nonce was already used", {}};
}

sdk::Error unchecked_error(const sdk::Error& store_error) {
  sdk::Error e = store_error;
  e.message = "the request's nonce cannot be checked: " + e.message;
  return e;
}

}  // namespace

sdk::Result<sdk::RequestRecord> Service::request_record(const sdk::Message& m, const trust::RequestProof& proof,
                                                        const std::string& public_key, std::int64_t now_ms,
                                                        std::string_view kind, bool idempotent) {
  if (!trust::verify_request(m, proof, public_key))
    return sdk::fail(ErrorCode::PermissionDenied,
                     "request signature of " + shown(proof.signer) + " does not verify (forged, altered, or signed "
                     "with another key)");
  const std::int64_t skew = proof.timestamp_ms - now_ms;
  const std::int64_t tol = options_.clock_tolerance.count();
  if (skew > tol || skew < -tol)
    return sdk::fail(ErrorCode::PermissionDenied,
                     "request expired: its timestamp is " + seconds_text(skew) +
                         " from the control plane's clock (tolerance " + seconds_text(tol) +
                         "); check the clock of the sender",
                     trust::kHeaderTimestamp);
  sdk::RequestRecord record;
  record.signer = std::string(kind) + ":" + proof.signer;
  record.nonce = proof.nonce;
  // First the signer's own cache (memory, bounded per signer: a signer at full rate exhausts only
  // its own quota), then the store, which remembers every nonce across restarts.
  switch (replay_.check_and_remember(record.signer, record.nonce, now_ms)) {
    case SignerReplayCache::Outcome::Fresh: break;
    case SignerReplayCache::Outcome::Replay:
      if (!idempotent) return sdk::fail(replayed_error());
      break;  // perhaps a retry: the store has its answer
    case SignerReplayCache::Outcome::Full:
      return sdk::fail(ErrorCode::Transient, "the control plane is busy for " + std::string(kind) + " " +
                                                 shown(proof.signer) +
                                                 " (its replay cache is full: too many requests within " +
                                                 std::to_string(2 * tol / 1000) + " s); try again later");
  }
  record.digest = common::sha256_hex(trust::request_text(m.subject, proof.signer, std::to_string(proof.timestamp_ms),
                                                         proof.nonce, m.body));
  record.expires_at_ms = now_ms + 2 * tol;
  return record;
}

sdk::Result<Admission> Service::check_signed_request(const sdk::Message& m, const trust::RequestProof& proof,
                                                     const std::string& public_key, std::int64_t now_ms,
                                                     std::string_view kind, bool idempotent) {
  MESH_TRY(record, request_record(m, proof, public_key, now_ms, kind, idempotent));
  Admission a;
  a.signer = record.signer;
  a.nonce = record.nonce;
  const std::string key = a.signer + "\n" + a.nonce;
  if (idempotent) {
    a.ticket = in_flight_.start(key);
    // Its first copy runs here now: wait for it to end, then read its answer below.
    if (!a.ticket) (void)in_flight_.wait(key, kRetryWait);
  }
  // Through the group commit of nonces (one store write for the nonces that arrive together),
  // waiting here for the write to be durable: the request runs only after it.
  auto kept = nonces_->remember(record, now_ms);
  if (!kept) return sdk::fail(unchecked_error(kept.error()));
  if (!*kept) {
    if (idempotent && !a.ticket) a.ticket = in_flight_.start(key);
    return a;
  }
  a.ticket.reset();
  if (!idempotent || (*kept)->digest != record.digest) return sdk::fail(replayed_error());
  if ((*kept)->answer) {
    a.answer = std::move((*kept)->answer);
    return a;
  }
  return sdk::fail(ErrorCode::Transient,
                   "this request (same nonce) was received before and its outcome is not known yet: it is still "
                   "being handled, or was stopped before it wrote anything");
}

void Service::set_post(std::function<bool(std::function<void()>)> post) { post_ = std::move(post); }

void Service::run_posted(std::function<void()> task) noexcept {
  try {
    if (post_ && post_(task)) return;
  } catch (...) {
  }
  try {
    task();
  } catch (const std::exception& e) {
    common::logger()->warn("a signed request's handling failed: {}", e.what());
  } catch (...) {
  }
}

void Service::admit_node_request(const sdk::Message& m, const std::string& node, std::int64_t now_ms,
                                 std::function<void(const sdk::Message&)> then) {
  auto proof = trust::read_request_proof(m, protocol::kHeaderNode);
  if (!proof) return refuse_signed_request(m, proof.error(), now_ms);
  if (proof->signer != node)
    return refuse_signed_request(m, sdk::Error{ErrorCode::PermissionDenied,
                                               "request signed by node " + shown(proof->signer) +
                                                   " on the subject of node " + node,
                                               {}},
                                 now_ms);
  auto pk = node_request_key(node);
  if (!pk) return refuse_signed_request(m, pk.error(), now_ms);
  auto record = request_record(m, *proof, *pk, now_ms, "node", false);
  if (!record) return refuse_signed_request(m, record.error(), now_ms);
  // The request is handled only once the write holding its nonce is durable (a crash then
  // cannot let a replay through) and found it fresh (no other instance, no earlier run took it).
  auto request = std::make_shared<const sdk::Message>(m);
  auto handler = std::make_shared<std::function<void(const sdk::Message&)>>(std::move(then));
  nonces_->submit(PendingNonce{std::move(*record), now_ms, [this, request, handler, now_ms](NonceResult&& kept) {
                                 auto result = std::make_shared<NonceResult>(std::move(kept));
                                 run_posted([this, request, handler, result, now_ms] {
                                   if (!*result) return refuse_signed_request(*request, unchecked_error(result->error()), now_ms);
                                   if (**result) return refuse_signed_request(*request, replayed_error(), now_ms);
                                   (*handler)(*request);
                                 });
                               }});
}

sdk::Result<OperatorRecord> Service::authenticate_operator(const sdk::Message& m, std::string_view op,
                                                           std::int64_t now_ms, Admission* admission) {
  auto proof = trust::read_request_proof(m, trust::kHeaderOperator);
  if (!proof) {
    sdk::Error e = proof.error();
    e.message += " (mesh signs with --identity FILE or NOX_MESH_IDENTITY)";
    return sdk::fail(std::move(e));
  }
  std::optional<OperatorRecord> who = options_.operators ? options_.operators->find(proof->signer) : std::nullopt;
  if (!who) return sdk::fail(ErrorCode::PermissionDenied, "unknown operator '" + shown(proof->signer) + "'");
  // Only the table's idempotent operations (declare, rollback) treat a repeated nonce as a retry.
  const Operation* operation = find_operation(op);
  const bool idempotent = operation && operation->mutating == Mutating::idempotent;
  auto admitted = check_signed_request(m, *proof, who->public_key, now_ms, "operator", idempotent);
  if (!admitted) return sdk::fail(admitted.error());
  if (admission) *admission = std::move(*admitted);
  if (!role_allows(who->role, op)) {
    std::string_view need = role_needed(op);
    return sdk::fail(ErrorCode::PermissionDenied,
                     "operator " + who->name + " (role " + who->role + ") may not run " + std::string(op) +
                         ": it needs role " + std::string(need) + (need == "admin" ? "" : " or higher"));
  }
  return std::move(*who);
}

sdk::Result<std::string> Service::node_request_key(const std::string& node) {
  auto record = store_->node(node);
  if (!record) {
    if (record.error().code == ErrorCode::NotFound)
      return sdk::fail(ErrorCode::PermissionDenied, "node " + node + " is not enrolled");
    return sdk::fail(record.error());
  }
  auto pk = common::from_hex(record->public_key);
  if (!pk || pk->size() != 32)
    return sdk::fail(ErrorCode::PermissionDenied, "node " + node + " has no key on record; re-enrol it");
  return std::move(*pk);
}

sdk::Result<sdk::NodeRecord> Service::authenticate_node_message(const sdk::Message& m, const std::string& node) {
  auto record = store_->node(node);
  if (!record) {
    if (record.error().code == ErrorCode::NotFound)
      return sdk::fail(ErrorCode::PermissionDenied, "node " + node + " is not enrolled", "subject");
    return sdk::fail(record.error());
  }
  if (record->public_key.empty())
    return sdk::fail(ErrorCode::PermissionDenied, "node " + node + " has no key on record; re-enrol it", "subject");
  auto pk = common::from_hex(record->public_key);
  if (!pk) return sdk::fail(ErrorCode::Internal, "stored key of " + node + " is not hex");
  if (auto ok = trust::verify_report(m, *pk); !ok) return sdk::fail(ok.error());
  return record;
}

}  // namespace mesh::control::detail
