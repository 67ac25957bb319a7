#include "service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "fields.h"
#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/json.h"
#include "mesh/common/nkey.h"
#include "mesh/control/broker.h"
#include "mesh/common/logging.h"
#include "mesh/common/protocol.h"
#include "mesh/common/text.h"
#include "mesh/common/trust.h"
#include "mesh/control/declaration.h"
#include "mesh/control/report.h"

namespace mesh::control::detail {
namespace {

using sdk::ErrorCode;
using sdk::Value;

constexpr std::size_t kDefaultBodyLimit = 1024 * 1024;
constexpr std::int64_t kDefaultTokenTtlMs = 24LL * 3600 * 1000;
constexpr std::int64_t kMaxTokenTtlMs = 366LL * 24 * 3600 * 1000;
constexpr std::uint32_t kShowApplies = 10;
// Heartbeat identities cached at most (decision record 17): about 150 bytes each. Beyond it,
// heartbeats of the nodes left out read the store, as they did before the cache.
constexpr std::size_t kHeartbeatIdentityCapacity = 1'000'000;

// What an error message may echo of its input (decision record 22): a node name or a field's
// value arrives from anyone on the broker and may be as large as a message.
constexpr std::size_t kEchoBytes = 64;
// The whole text of a refusal (message, path), in the log and in the reply: a last guard behind
// shown() for messages built elsewhere (declaration checks echo keys).
constexpr std::size_t kMaxRefusalText = 1024;

// `v` escaped and bounded (common::printable): control characters, escape sequences and
// invalid UTF-8 never reach a log line or an error message raw; a long value shows its first
// `max` bytes and its size.
std::string shown(std::string_view v, std::size_t max = kEchoBytes) { return common::printable(v, max); }

Value ts(std::int64_t ms) { return Value(common::format_rfc3339(ms)); }
Value opt_ts(const std::optional<std::int64_t>& ms) { return ms ? ts(*ms) : Value(nullptr); }
Value age_s(const std::optional<std::int64_t>& ms, std::int64_t now_ms) {
  if (!ms) return Value(nullptr);
  return Value(std::max<std::int64_t>(0, (now_ms - *ms) / 1000));
}
Value int_value(std::uint64_t v) { return Value(static_cast<std::int64_t>(v)); }
Value string_list(const std::vector<std::string>& list) {
  Value::Array a;
  for (const auto& s : list) a.emplace_back(s);
  return Value(std::move(a));
}

sdk::Error invalid(std::string path, std::string message) {
  return sdk::Error{ErrorCode::InvalidArgument, std::move(message), std::move(path)};
}

sdk::Result<std::string> node_param(const Fields& f, std::string_view key = "node") {
  MESH_TRY(node, f.string(key));
  if (!protocol::valid_node_name(node))
    return sdk::fail(f.error(key, "'" + shown(node) +
                                      "' is not a valid node name (1-64 characters of a-z, 0-9, "
                                      "'-' and '_', starting with a letter or digit)"));
  return node;
}

// A timestamp field: RFC 3339 text, or `fallback` when absent.
sdk::Result<std::int64_t> time_field(const Fields& f, std::string_view key, std::int64_t fallback) {
  MESH_TRY(text, f.opt_string(key));
  if (!text) return fallback;
  auto ms = common::parse_rfc3339(*text);
  if (!ms) return sdk::fail(f.error(key, "'" + shown(*text) + "' is not an RFC 3339 UTC time"));
  return *ms;
}

// A public secret that never starts with '-' or '_' (so it is never mistaken for a flag).
std::string safe_token(std::size_t bytes) {
  for (;;) {
    std::string t = common::random_token(bytes);
    if (!t.empty() && t[0] != '-' && t[0] != '_') return t;
  }
}

Value node_summary(const sdk::NodeRecord& n, std::int64_t now_ms) {
  Value v = Value::object();
  v.set("name", n.name);
  v.set("last_contact", opt_ts(n.last_contact_ms));
  v.set("age_s", age_s(n.last_contact_ms, now_ms));
  v.set("applied_revision", int_value(n.applied_revision));
  // The pending revision: declared but not (yet) applied when above applied_revision.
  v.set("declared_revision", int_value(n.declared_revision));
  v.set("last_outcome", n.last_outcome);
  // Never briefed: eligibility is unknown, not "yes".
  v.set("eligible", n.briefing.empty() ? Value(nullptr) : Value(n.eligible));
  if (n.removed_at_ms) v.set("removed_at", ts(*n.removed_at_ms));
  // The last heartbeat's state is a past observation: shown with when it was received.
  v.set("state", n.host_state);
  v.set("state_at", opt_ts(n.heartbeat_at_ms));
  v.set("state_age_s", age_s(n.heartbeat_at_ms, now_ms));
  return v;
}

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

// A report's refusal as the host must read it: only what the reporter sent (InvalidArgument) or
// who it is (PermissionDenied) is its fault and lets the report leave its outbox; anything else —
// the store full, failing or busy, a bug here — is answered retryable, so the report is kept
// and sent again until it is recorded.
sdk::Error report_refusal(sdk::Error e) {
  if (e.code == ErrorCode::InvalidArgument || e.code == ErrorCode::PermissionDenied ||
      e.code == ErrorCode::Transient || e.code == ErrorCode::Unavailable || e.code == ErrorCode::Timeout)
    return e;
  e.message = "not recorded (" + std::string(sdk::to_string(e.code)) + "): " + e.message + "; retry later";
  e.code = ErrorCode::Unavailable;
  return e;
}

Value drift_value(const sdk::DriftReport& d) {
  Value v = Value::object();
  v.set("at", ts(d.at_ms));
  v.set("scan", d.scan_id);
  v.set("revision", int_value(d.revision));
  Value::Array items;
  for (const auto& i : d.items) {
    Value e = Value::object();
    e.set("resource", i.resource);
    e.set("found", i.found);
    e.set("action", i.action);
    items.push_back(std::move(e));
  }
  v.set("resources", Value(std::move(items)));
  return v;
}

// "mesh.<kind>.<node>" with exactly three tokens; returns the node or an error on `subject`.
sdk::Result<std::string> subject_node(const std::string& subject) {
  auto node = std::string(protocol::subject_node(subject));
  auto first = subject.find('.');
  auto second = subject.find('.', first + 1);
  if (second == std::string::npos || subject.find('.', second + 1) != std::string::npos ||
      !protocol::valid_node_name(node))
    return sdk::fail(invalid("subject", "subject " + shown(subject) + " does not name a valid node"));
  return node;
}

// A stored answer of a mutating request (Store::remember_request): what its reply said.
std::string ok_answer(const Value& body) {
  Value v = Value::object();
  v.set("status", "ok");
  v.set("body", body);
  return v.to_json();
}
std::string error_answer(const sdk::Error& e) {
  Value err = Value::object();
  err.set("code", sdk::to_string(e.code));
  err.set("message", e.message);
  err.set("path", e.path);
  Value v = Value::object();
  v.set("status", "error");
  v.set("error", std::move(err));
  return v.to_json();
}

// How long a retried mutating request waits for its first copy still running here.
constexpr auto kRetryWait = std::chrono::seconds(20);

}  // namespace

// One buffer of parts per kind of sender (operators, enrolment, nodes), each bounded alone, so a
// flood of junk parts of one kind cannot make another kind's uploads busy (found by an attacker:
// 64 first parts on mesh.api.* made every node's reports in parts busy too).
static protocol::parts::Limits intake_limits(const ControlOptions& options) {
  return protocol::parts::Limits{options.max_assembled, options.max_assembled, 64, 4, std::chrono::seconds(30),
                                 "limits.max_assembled"};
}

Service::Service(std::shared_ptr<sdk::Store> store, std::shared_ptr<sdk::Transport> transport,
                 const ControlOptions& options, ContactSink contacts)
    : store_(std::move(store)),
      transport_(std::move(transport)),
      options_(options),
      contacts_(std::move(contacts)),
      replay_(options.replay_capacity, 2 * options.clock_tolerance),
      intake_{protocol::parts::Reassembler(intake_limits(options)),
              protocol::parts::Reassembler(intake_limits(options)),
              protocol::parts::Reassembler(intake_limits(options))} {}

std::size_t Service::body_limit() const noexcept {
  std::size_t limit = transport_->max_payload_bytes();
  if (limit == 0) limit = kDefaultBodyLimit;
  if (options_.max_message != 0) limit = std::min(limit, options_.max_message);
  return limit;
}

void Service::reply(sdk::Message&& r) noexcept {
  if (r.subject.empty()) return;
  // A reply larger than the broker's limit (a recovery copy, a latest declaration, a node view)
  // goes in parts to the requester's inbox (docs/protocol.md "Messages in parts").
  if (auto ok = protocol::parts::publish(*transport_, r); !ok)
    common::logger()->warn("reply not sent subject={}: {}", shown(r.subject), shown(ok.error().describe(), kMaxRefusalText));
}

void Service::reply_ok(const sdk::Message& request, const Value& body) {
  if (request.reply.empty()) return;
  auto r = protocol::ok_reply(request, body.to_json());
  sign_reply_to(r, request);
  reply(std::move(r));
}

void Service::refuse(const sdk::Message& request, const sdk::Error& error, bool quiet) noexcept {
  try {
    sdk::Error e = error;
    e.message = shown(e.message, kMaxRefusalText);
    e.path = shown(e.path, 2 * kEchoBytes);
    auto level = quiet ? spdlog::level::info : spdlog::level::warn;
    std::uint64_t hidden = 0;
    if (refusal_log_.take(&hidden))
      common::logger()->log(level, "{} subject={}{}{}: {}{}",
                            request.reply.empty() ? "dropped" : "refused", shown(request.subject),
                            e.path.empty() ? "" : " field=", e.path, e.message, common::LogBudget::suffix(hidden));
    if (!request.reply.empty() && reply_allowed(request)) {
      auto r = protocol::error_reply(request, e);
      sign_reply_to(r, request);
      reply(std::move(r));
    }
  } catch (...) {
  }
}

void Service::sign_reply_to(sdk::Message& r, const sdk::Message& request) {
  const std::string& s = request.subject;
  // A refused report is dropped from the host's outbox: only on a signed refusal.
  if (s.rfind("mesh.report.", 0) == 0 || s.rfind("mesh.drift.", 0) == 0)
    trust::sign_ack(r, request, options_.keys.signing.secret_key);
  // What a host does with the answer to latest/recovery (believe it has no declaration, remove
  // orphans) must not be decided by whoever answers first: every such reply is signed for the
  // one request it answers.
  // An operator's answer (a delivery report, a node view, a token) is believed by `mesh` only
  // when it is signed for the one request it answers (decision record 31): the operators'
  // broker user can read and publish into every operator's inbox.
  else if (s.rfind("mesh.latest.", 0) == 0 || s.rfind("mesh.recovery.", 0) == 0 || s.rfind("mesh.api.", 0) == 0)
    trust::sign_reply(r, request, options_.keys.signing.secret_key);
  // An enrolment refusal, signed for the one request it answers (its body names the host's fresh
  // key): `mesh-host enrol` believes no unsigned refusal (a forgery on an open broker).
  else if (s == protocol::kEnrolSubject)
    trust::sign_ack(r, request, options_.keys.signing.secret_key);
}

bool Service::reply_allowed(const sdk::Message& m) const {
  const std::string& to = m.reply;
  if (to.empty()) return true;
  constexpr std::string_view kInbox = "_INBOX.";
  const std::string node_prefix = std::string(protocol::kNodeInboxPrefix) + ".";
  const std::string enrol_prefix = std::string(protocol::kEnrolInboxPrefix) + ".";
  auto under = [&](std::string_view prefix) { return to.size() > prefix.size() && to.rfind(prefix, 0) == 0; };
  if (!under(kInbox)) return false;
  // API replies: anywhere under _INBOX. but the reserved prefixes of the nodes and of
  // enrolment (`mesh` keeps nats.c's default _INBOX.<random>).
  const bool generic = !under(node_prefix) && !under(enrol_prefix);
  // With broker permissions managed by mesh-control, hosts read replies only on their own prefix
  // (runtime.cpp): enrolment and a node's requests are answered only there, so that no client
  // can make the control plane publish into an operator's, an enrolment's or another node's
  // inbox. Without them (an open broker, or permissions kept by hand) a host keeps nats.c's
  // default prefix, or the enrolment one (`mesh-host enrol` sends the first briefing on its
  // enrolment connection): anything under _INBOX. but another node's prefix. Everyone can
  // publish there anyway on such a broker; nothing outside _INBOX. is ever answered.
  const bool strict = options_.broker_credentials;
  if (m.subject == protocol::kEnrolSubject) return under(enrol_prefix) || (!strict && generic);
  const std::string& s = m.subject;
  for (std::string_view kind : {"mesh.latest.", "mesh.recovery.", "mesh.report.", "mesh.drift.", "mesh.briefing.",
                                "mesh.heartbeat."})
    if (s.rfind(kind, 0) == 0) {
      auto node = subject_node(s);
      if (!node) return !strict && generic;
      if (under(protocol::node_inbox_prefix(*node) + ".")) return true;
      return !strict && !under(node_prefix);
    }
  return generic;
}

void Service::warn_reply_refused(const sdk::Message& m) noexcept {
  try {
    // Anyone can send these at any rate: one warning per second at most, with what it hid.
    const auto now = std::chrono::steady_clock::now();
    std::uint64_t hidden = 0;
    {
      std::lock_guard lock(reflection_mu_);
      if (now < reflection_next_log_) {
        ++reflection_hidden_;
        return;
      }
      reflection_next_log_ = now + std::chrono::seconds(1);
      hidden = std::exchange(reflection_hidden_, 0);
    }
    common::logger()->warn("dropped subject={} reply_subject={}: the reply subject is not an inbox this request may "
                           "be answered on (docs/protocol.md \"Reply subjects\"); not answered{}",
                           shown(m.subject), shown(m.reply),
                           hidden ? " (" + std::to_string(hidden) + " more dropped since the last warning)" : "");
  } catch (...) {
  }
}

void Service::refuse_signed_request(const sdk::Message& request, const sdk::Error& e, std::int64_t now_ms) noexcept {
  if (e.path != trust::kHeaderTimestamp || request.reply.empty()) return refuse(request, e);
  try {
    common::logger()->warn("refused subject={} field={}: {} (answered with the control plane's signed time)",
                           shown(request.subject), shown(e.path, 2 * kEchoBytes), shown(e.message, kMaxRefusalText));
    auto r = protocol::error_reply(request, e);
    trust::sign_time(r, request, now_ms, options_.keys.signing.secret_key);
    sign_reply_to(r, request);
    reply(std::move(r));
  } catch (...) {
  }
}

void Service::reply_ack(const sdk::Message& request, const Value& body) {
  if (request.reply.empty()) return;
  auto r = protocol::ok_reply(request, body.to_json());
  trust::sign_ack(r, request, options_.keys.signing.secret_key);
  reply(std::move(r));
}

void Service::handle(const sdk::Message& m, std::int64_t now_ms) noexcept {
  // A request whose reply subject is not its sender's inbox is dropped unanswered and unhandled:
  // NATS does not check reply subjects against permissions, so answering would let any client
  // make the control plane publish where it may not (decision record 22).
  if (!reply_allowed(m)) return warn_reply_refused(m);
  try {
    if (protocol::parts::is_part(m)) return take_part(m, now_ms);
    dispatch(m, now_ms, body_limit());
  } catch (const std::exception& e) {
    refuse(m, sdk::Error{ErrorCode::Internal, std::string("internal error: ") + e.what(), {}});
  } catch (...) {
    refuse(m, sdk::Error{ErrorCode::Internal, "internal error", {}});
  }
}

void Service::dispatch(const sdk::Message& m, std::int64_t now_ms, std::size_t limit) {
  // Order of checks (docs/protocol.md): size, then the protocol version, then the proof
  // (signature or MAC), then the JSON, then the fields.
  if (m.body.size() > limit)
    return refuse(m, invalid("body", "body of " + std::to_string(m.body.size()) +
                                         " bytes is over the limit of " + std::to_string(limit) +
                                         " bytes"));
  if (auto v = protocol::check_version(m); !v) return refuse(m, v.error());

  const std::string& s = m.subject;
  auto starts = [&](std::string_view p) { return s.rfind(p, 0) == 0; };
  auto parse_body = [&]() -> sdk::Result<Value> {
    if (m.body.find_first_not_of(" \t\r\n") == std::string::npos) return Value::object();
    auto parsed = common::parse_json(m.body, common::JsonLimits{limit, 32});
    if (!parsed) return sdk::fail(parsed.error());
    if (!parsed->is_object()) return sdk::fail(invalid("", "the body must be a JSON object"));
    return std::move(*parsed);
  };

  // latest and recovery carry no body; they are signed by the node (nobody else may read a
  // node's declaration or recovery copy).
  if (starts("mesh.latest.") || starts("mesh.recovery.")) {
    auto node = subject_node(s);
    if (!node) return refuse(m, node.error());
    auto who = authenticate_node_request(m, *node, now_ms);
    if (!who) return refuse_signed_request(m, who.error(), now_ms);
    return starts("mesh.latest.") ? on_latest(m, *node) : on_recovery(m, *node);
  }

  if (starts("mesh.api.")) {
    const std::string_view op = std::string_view(s).substr(9);
    if (m.reply.empty())  // an operation's result is its reply: a bare publish is a mistake
      return refuse(m, invalid("reply", "an API operation must be sent as a request"));
    Admission admission;
    auto who = authenticate_operator(m, op, now_ms, &admission);
    if (!who) return refuse_signed_request(m, who.error(), now_ms);
    if (admission.answer) return reply_stored_answer(m, op, *admission.answer, *who);
    auto body = parse_body();
    if (!body) {
      if (admission.ticket) (void)store_->answer_request(admission.signer, admission.nonce, error_answer(body.error()));
      return refuse(m, body.error());
    }
    return on_api(m, op, *body, now_ms, *who, admission);
  }
  if (s == protocol::kEnrolSubject) {
    auto body = parse_body();
    if (!body) return refuse(m, body.error());
    return on_enrol(m, *body, now_ms);
  }

  auto node = subject_node(s);
  if (!node) return refuse(m, node.error());
  const bool heartbeat = starts("mesh.heartbeat.");
  if (!heartbeat && !starts("mesh.report.") && !starts("mesh.drift.") && !starts("mesh.briefing."))
    return refuse(m, sdk::Error{ErrorCode::Unsupported, "no handler for subject " + shown(s), "subject"});
  // A node speaks only for itself, with its current key: the subject names the node, and the
  // proof must verify with the key (or MAC key) the control plane holds for that node.
  std::int64_t heartbeat_ts = 0;
  std::uint64_t heartbeat_generation = 0;
  sdk::Result<sdk::NodeRecord> record = sdk::fail(ErrorCode::Internal, "node record not read");
  if (heartbeat) {
    // The one message a whole fleet sends all the time: its MAC key comes from the identity
    // cache, not a store read per message (decision record 17).
    auto id = heartbeat_identity(*node);
    if (!id) return refuse(m, id.error());
    auto ts = trust::verify_heartbeat(m, *node, id->mac_key);
    if (!ts) return refuse(m, ts.error());
    heartbeat_ts = *ts;
    heartbeat_generation = id->generation;
  } else {
    record = store_->node(*node);
    if (!record) {
      if (record.error().code == ErrorCode::NotFound)
        return refuse(m, sdk::Error{ErrorCode::PermissionDenied, "node " + *node + " is not enrolled", "subject"});
      return refuse(m, record.error());
    }
    if (record->public_key.empty())
      return refuse(m, sdk::Error{ErrorCode::PermissionDenied,
                                  "node " + *node + " has no key on record; re-enrol it", "subject"});
    auto pk = common::from_hex(record->public_key);
    if (!pk) return refuse(m, sdk::Error{ErrorCode::Internal, "stored key of " + *node + " is not hex", {}});
    if (auto ok = trust::verify_report(m, *pk); !ok) return refuse(m, ok.error());
  }

  auto parsed = parse_body();
  if (!parsed) return refuse(m, parsed.error());
  const Value& body = *parsed;
  const Value* body_node = body.find("node");
  if (!body_node || !body_node->is_string())
    return refuse(m, invalid("node", "is required (a string)"));
  if (body_node->as_string() != *node)
    return refuse(m, invalid("node", "body names node '" + shown(body_node->as_string()) +
                                         "' on the subject of node '" + *node + "'"));

  if (heartbeat) {
    if (auto fresh = fresh_heartbeat(*node, heartbeat_generation, heartbeat_ts, now_ms); !fresh)
      return refuse(m, fresh.error(), /*quiet=*/true);
    return on_heartbeat(m, *node, body, now_ms, heartbeat_ts, heartbeat_generation);
  }
  if (starts("mesh.report.")) return on_report(m, *node, body, record->generation, now_ms);
  if (starts("mesh.drift.")) return on_drift(m, *node, body, now_ms);
  return on_briefing(m, *record, body, now_ms);
}

// --- trust ------------------------------------------------------------------------------------

sdk::Result<Service::Admission> Service::check_signed_request(const sdk::Message& m, const trust::RequestProof& proof,
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
  Admission a;
  a.signer = std::string(kind) + ":" + proof.signer;
  a.nonce = proof.nonce;
  auto replayed = [] {
    return sdk::fail(ErrorCode::PermissionDenied, "request replayed: its nonce was already used");
  };
  // First the signer's own cache (memory, bounded per signer: a signer at full rate exhausts only
  // its own quota), then the store, which remembers every nonce across restarts.
  switch (replay_.check_and_remember(a.signer, a.nonce, now_ms)) {
    case SignerReplayCache::Outcome::Fresh: break;
    case SignerReplayCache::Outcome::Replay:
      if (!idempotent) return replayed();
      break;  // perhaps a retry: the store has its answer
    case SignerReplayCache::Outcome::Full:
      return sdk::fail(ErrorCode::Transient, "the control plane is busy for " + std::string(kind) + " " +
                                                 shown(proof.signer) +
                                                 " (its replay cache is full: too many requests within " +
                                                 std::to_string(2 * tol / 1000) + " s); try again later");
  }
  const std::string key = a.signer + "\n" + a.nonce;
  if (idempotent) {
    a.ticket = in_flight_.start(key);
    // Its first copy runs here now: wait for it to end, then read its answer below.
    if (!a.ticket) (void)in_flight_.wait(key, kRetryWait);
  }
  sdk::RequestRecord record;
  record.signer = a.signer;
  record.nonce = a.nonce;
  record.digest = common::sha256_hex(trust::request_text(m.subject, proof.signer, std::to_string(proof.timestamp_ms),
                                                         proof.nonce, m.body));
  record.expires_at_ms = now_ms + 2 * tol;
  auto kept = store_->remember_request(record, now_ms);
  if (!kept) {
    sdk::Error e = kept.error();
    e.message = "the request's nonce cannot be checked: " + e.message;
    return sdk::fail(std::move(e));
  }
  if (!*kept) {
    if (idempotent && !a.ticket) a.ticket = in_flight_.start(key);
    return a;
  }
  a.ticket.reset();
  if (!idempotent || (*kept)->digest != record.digest) return replayed();
  if ((*kept)->answer) {
    a.answer = std::move((*kept)->answer);
    return a;
  }
  return sdk::fail(ErrorCode::Transient,
                   "this request (same nonce) was received before and its outcome is not known yet: it is still "
                   "being handled, or was stopped before it wrote anything");
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
  const bool idempotent = op == "declare" || op == "rollback";
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

sdk::Result<sdk::NodeRecord> Service::authenticate_node_request(const sdk::Message& m, const std::string& node,
                                                                std::int64_t now_ms) {
  auto proof = trust::read_request_proof(m, protocol::kHeaderNode);
  if (!proof) return sdk::fail(proof.error());
  if (proof->signer != node)
    return sdk::fail(ErrorCode::PermissionDenied,
                     "request signed by node " + shown(proof->signer) + " on the subject of node " + node);
  auto record = store_->node(node);
  if (!record) {
    if (record.error().code == ErrorCode::NotFound)
      return sdk::fail(ErrorCode::PermissionDenied, "node " + node + " is not enrolled");
    return sdk::fail(record.error());
  }
  auto pk = common::from_hex(record->public_key);
  if (!pk || pk->size() != 32)
    return sdk::fail(ErrorCode::PermissionDenied, "node " + node + " has no key on record; re-enrol it");
  if (auto ok = check_signed_request(m, *proof, *pk, now_ms, "node", false); !ok) return sdk::fail(ok.error());
  return std::move(*record);
}

sdk::Result<Service::HeartbeatIdentity> Service::heartbeat_identity(const std::string& node) {
  std::uint64_t epoch = 0;
  {
    std::lock_guard lock(identity_mu_);
    if (auto it = identities_.find(node); it != identities_.end()) return it->second;
    epoch = identity_epoch_;
  }
  auto record = store_->node(node);
  if (!record) {
    if (record.error().code == ErrorCode::NotFound)
      return sdk::fail(ErrorCode::PermissionDenied, "node " + node + " is not enrolled", "subject");
    return sdk::fail(record.error());
  }
  if (record->public_key.empty())
    return sdk::fail(ErrorCode::PermissionDenied, "node " + node + " has no key on record; re-enrol it",
                     "subject");
  HeartbeatIdentity id{record->generation, trust::heartbeat_key(options_.keys.heartbeat_master, node,
                                                                record->generation, record->public_key)};
  // The newest heartbeat taken before a restart still orders the ones after it.
  if (record->heartbeat_generation == record->generation && record->heartbeat_ms > 0)
    seed_heartbeat(node, record->generation, record->heartbeat_ms);
  std::lock_guard lock(identity_mu_);
  // An enrolment that committed after our read has bumped the epoch: what we read may be the old
  // identity, good for this message (as without a cache) but not to keep.
  if (identity_epoch_ == epoch && identities_.size() < kHeartbeatIdentityCapacity) identities_.emplace(node, id);
  return id;
}

void Service::forget_heartbeat_identity(const std::string& node) {
  std::lock_guard lock(identity_mu_);
  ++identity_epoch_;
  identities_.erase(node);
}

void Service::seed_heartbeat(const std::string& node, std::uint64_t generation, std::int64_t recorded_ms) {
  std::lock_guard lock(heartbeat_mu_);
  auto& last = last_heartbeat_[node];
  if (last.generation != generation) last = LastHeartbeat{generation, 0};
  last.timestamp_ms = std::max(last.timestamp_ms, recorded_ms);
}

sdk::Result<void> Service::fresh_heartbeat(const std::string& node, std::uint64_t generation, std::int64_t ts,
                                           std::int64_t now_ms) {
  // Time-bound: a heartbeat captured earlier than the tolerance is worthless whatever was recorded.
  const std::int64_t tol = options_.clock_tolerance.count();
  if (ts - now_ms > tol || now_ms - ts > tol)
    return sdk::fail(ErrorCode::PermissionDenied,
                     "heartbeat expired: its timestamp is " + std::to_string((ts - now_ms) / 1000) +
                         " s from the control plane's clock (tolerance " + std::to_string(tol / 1000) + " s)",
                     trust::kHeaderTimestamp);
  // Monotonic per identity: strictly newer than the newest taken (also before a restart: seeded
  // from the store). A host whose clock steps back is not contact until it passes that again —
  // at most the tolerance, since nothing further ahead was taken.
  std::lock_guard lock(heartbeat_mu_);
  auto& last = last_heartbeat_[node];
  if (last.generation != generation) last = LastHeartbeat{generation, 0};
  if (ts <= last.timestamp_ms)
    return sdk::fail(ErrorCode::PermissionDenied,
                     "heartbeat replayed (its timestamp is not newer than one already taken)", trust::kHeaderTimestamp);
  last.timestamp_ms = ts;
  return {};
}

// --- host messages ----------------------------------------------------------------------------

void Service::on_latest(const sdk::Message& m, const std::string& node) {
  auto rev = store_->latest_revision(node);
  if (!rev) return refuse(m, rev.error());
  if (m.reply.empty()) return;
  if (!*rev) {
    auto r = protocol::make_message(m.reply);
    r.set_header(protocol::kHeaderStatus, "none");
    r.set_header(protocol::kHeaderNode, node);
    sign_reply_to(r, m);
    return reply(std::move(r));
  }
  auto r = protocol::ok_reply(m, (*rev)->body);
  r.set_header(protocol::kHeaderNode, node);
  r.set_header(protocol::kHeaderRevision, std::to_string((*rev)->revision));
  r.set_header(protocol::kHeaderDigest, common::sha256_hex(r.body));
  trust::sign_declaration(r, node, (*rev)->revision, options_.keys.signing.secret_key);
  sign_reply_to(r, m);
  reply(std::move(r));
}

void Service::on_report(const sdk::Message& m, const std::string& node, const Value& body,
                        std::uint64_t generation, std::int64_t now_ms) {
  Fields f(body);
  auto run = [&]() -> sdk::Result<Value> {
    sdk::ApplyReport r;
    r.node = node;
    // The identity that signed it and when we received it: last contact is our own clock, and
    // a report signed by an identity revoked meanwhile is refused by the store.
    r.generation = generation;
    r.received_at_ms = now_ms;
    MESH_TRY(revision, f.integer("revision", 1));
    r.revision = static_cast<std::uint64_t>(revision);
    MESH_TRY(at, time_field(f, "at", now_ms));
    r.at_ms = at;
    MESH_TRY(outcome, f.string("outcome"));
    if (outcome != "applied" && outcome != "failed" && outcome != "refused" && outcome != "superseded")
      return sdk::fail(
          f.error("outcome", "'" + shown(outcome) + "' is not one of: applied, failed, refused, superseded"));
    r.outcome = outcome;
    MESH_TRY(resource, f.string_or("resource", ""));
    r.resource = resource;
    MESH_TRY(reason, f.string_or("reason", ""));
    r.reason = reason;
    MESH_TRY(code, f.string_or("code", ""));
    if (!valid_report_code(code))
      return sdk::fail(f.error("code", "'" + shown(code) + "' is not an error code name"));
    r.code = code;
    MESH_TRY(owned, f.string_list("owned"));
    r.owned = std::move(owned);
    MESH_TRY(owned_digests, f.string_list("owned_digests"));
    if (!owned_digests.empty() && owned_digests.size() != r.owned.size())
      return sdk::fail(f.error("owned_digests", "has " + std::to_string(owned_digests.size()) + " entries for " +
                                                    std::to_string(r.owned.size()) + " owned resources"));
    for (std::size_t i = 0; i < owned_digests.size(); ++i)
      if (!owned_digests[i].empty() && (owned_digests[i].size() != 64 ||
                                        owned_digests[i].find_first_not_of("0123456789abcdef") != std::string::npos))
        return sdk::fail(f.error("owned_digests[" + std::to_string(i) + "]", "must be 64 lower-case hex characters"));
    r.owned_digests = std::move(owned_digests);
    if (const Value* res = body.find("resources"); res && !res->is_array())
      return sdk::fail(f.error("resources", "must be an array"));
    MESH_TRY(digest, f.string_or("digest", ""));
    if (r.outcome == "refused") {
      // The host refused a declaration message. It counts as this node's answer to revision R
      // only when what it refused is what the control plane stored as R (same digest) and R is
      // newer than what the node applied; otherwise it was a forgery or a replay seen by the
      // node, and recording it would let whoever sent it decide the delivery's outcome.
      MESH_TRY(n, enrolled(node));
      auto stored = store_->revision(node, r.revision);
      const bool authentic = stored && !digest.empty() && stored->digest == digest;
      if (!authentic || r.revision <= n.applied_revision) {
        if (std::uint64_t hidden = 0; refusal_log_.take(&hidden))
          common::logger()->warn("node {} refused a declaration message it was sent: claimed revision={} "
                                 "authentic={} applied_revision={} reason=\"{}\" (not recorded as its report){}",
                                 node, r.revision, authentic, n.applied_revision, shown(r.reason, 256),
                                 common::LogBudget::suffix(hidden));
        Value ack = Value::object();
        ack.set("recorded", false);
        return ack;
      }
    }
    auto recorded_or = store_->record_apply(r);
    if (!recorded_or) {
      if (recorded_or.error().code == ErrorCode::InvalidArgument || recorded_or.error().code == ErrorCode::PermissionDenied)
        if (std::uint64_t hidden = 0; refusal_log_.take(&hidden))
          common::logger()->warn("report refused node={} revision={} outcome={} generation={} reason=\"{}\"{}", node,
                                 r.revision, r.outcome, generation, shown(recorded_or.error().message, 256),
                                 common::LogBudget::suffix(hidden));
      return sdk::fail(std::move(recorded_or).error());
    }
    const bool recorded = *recorded_or;
    common::logger()->info("report node={} revision={} outcome={} recorded={}{}{}", node,
                           r.revision, r.outcome, recorded,
                           r.resource.empty() ? "" : " resource=", shown(r.resource, common::kPrintableBytes));
    Value ack = Value::object();
    ack.set("recorded", recorded);
    return ack;
  };
  auto ack = run();
  if (!ack) return refuse(m, report_refusal(ack.error()));
  reply_ack(m, *ack);
}

void Service::on_drift(const sdk::Message& m, const std::string& node, const Value& body,
                       std::int64_t now_ms) {
  Fields f(body);
  auto run = [&]() -> sdk::Result<Value> {
    sdk::DriftReport d;
    d.node = node;
    d.received_at_ms = now_ms;  // last contact: our clock, never the claimed `at`
    MESH_TRY(scan, f.string("scan"));
    if (scan.empty() || scan.size() > 128)
      return sdk::fail(f.error("scan", "must be 1-128 characters"));
    d.scan_id = scan;
    MESH_TRY(revision, f.integer_or("revision", 0, 0));
    d.revision = static_cast<std::uint64_t>(revision);
    MESH_TRY(at, time_field(f, "at", now_ms));
    d.at_ms = at;
    if (const Value* res = body.find("resources")) {
      if (!res->is_array()) return sdk::fail(f.error("resources", "must be an array"));
      const auto& list = res->as_array();
      for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string at_path = "resources[" + std::to_string(i) + "]";
        if (!list[i].is_object()) return sdk::fail(f.error(at_path, "must be an object"));
        Fields item(list[i], at_path);
        sdk::DriftItem di;
        MESH_TRY(resource, item.string("resource"));
        MESH_TRY(found, item.string_or("found", ""));
        MESH_TRY(action, item.string_or("action", ""));
        di.resource = resource;
        di.found = found;
        di.action = action;
        d.items.push_back(std::move(di));
      }
    }
    MESH_TRY(recorded, store_->record_drift(d));
    if (!d.items.empty())
      common::logger()->info("drift node={} scan={} resources={} recorded={}", node, d.scan_id,
                             d.items.size(), recorded);
    Value ack = Value::object();
    ack.set("recorded", recorded);
    return ack;
  };
  auto ack = run();
  if (!ack) return refuse(m, report_refusal(ack.error()));
  reply_ack(m, *ack);
}

void Service::on_heartbeat(const sdk::Message& m, const std::string& node, const Value& body,
                           std::int64_t now_ms, std::int64_t heartbeat_ms, std::uint64_t generation) {
  Fields f(body);
  auto run = [&]() -> sdk::Result<sdk::ContactUpdate> {
    sdk::ContactUpdate u;
    u.node = node;
    // Last contact is when the control plane heard the node (its own clock): a node's clock may
    // be wrong, and "last seen" must never move because of it.
    u.at_ms = now_ms;
    u.heartbeat_ms = heartbeat_ms;
    u.generation = generation;
    MESH_TRY(at, time_field(f, "at", now_ms));  // checked for shape only
    (void)at;
    MESH_TRY(applied, f.integer_or("applied_revision", 0, 0));
    u.applied_revision = static_cast<std::uint64_t>(applied);
    MESH_TRY(version, f.string_or("host_version", ""));
    if (version.size() > 64) return sdk::fail(f.error("host_version", "is longer than 64 characters"));
    u.host_version = version;
    MESH_TRY(state, f.string_or("state", ""));
    if (state.size() > 32) return sdk::fail(f.error("state", "is longer than 32 characters"));
    u.host_state = state;
    return u;
  };
  auto u = run();
  if (!u) return refuse(m, u.error());
  contacts_(std::move(*u));
}

void Service::on_recovery(const sdk::Message& m, const std::string& node) {
  auto run = [&]() -> sdk::Result<Value> {
    MESH_TRY(record, enrolled(node));
    MESH_TRY(copy, store_->recovery_copy(node));
    // "digests" is parallel to "owned": the digest of each resource's state as the host read it
    // back after applying it ("" unknown). A host removes an orphan only when it still finds
    // exactly that state (docs/protocol.md, "Recovery copy").
    Value::Array owned, digests;
    for (const auto& o : copy) {
      owned.emplace_back(o.resource);
      digests.emplace_back(o.digest);
    }
    Value v = Value::object();
    v.set("owned", Value(std::move(owned)));
    v.set("digests", Value(std::move(digests)));
    v.set("revision", int_value(record.applied_revision));
    return v;
  };
  auto v = run();
  if (!v) return refuse(m, v.error());
  if (m.reply.empty()) return;
  auto r = protocol::ok_reply(m, v->to_json());
  sign_reply_to(r, m);
  reply(std::move(r));
}

void Service::on_enrol(const sdk::Message& m, const Value& body, std::int64_t now_ms) {
  Fields f(body);
  const std::string node_for_log = shown(body.get_string("node"));
  auto run = [&]() -> sdk::Result<Value> {
    MESH_TRY(node, node_param(f));
    // The token arrives sealed to the control plane's key when the host knew that key (it is part
    // of every token printed by token.issue), so that nobody on the broker sees it in transit.
    std::string token;
    if (const Value* sealed = body.find("token_sealed"); sealed && sealed->is_string()) {
      auto raw = common::from_hex(sealed->as_string());
      auto opened = raw ? common::open_sealed(*raw, options_.keys.signing) : sdk::Result<std::string>(sdk::fail(raw.error()));
      if (!opened)
        return sdk::fail(ErrorCode::PermissionDenied,
                         "the token is sealed to another control plane's key (was it issued by this one?)",
                         "token_sealed");
      token = std::move(*opened);
    } else {
      MESH_TRY(plain, f.string("token"));
      token = std::move(plain);
    }
    if (token.empty() || token.size() > 256)
      return sdk::fail(f.error("token", "must be 1-256 characters"));
    MESH_TRY(public_key, f.string("public_key"));
    auto raw_key = common::from_hex(public_key);
    if (!raw_key || raw_key->size() != 32)
      return sdk::fail(f.error("public_key", "public_key must be an Ed25519 public key: 64 hex characters"));
    // 64 hex characters are not enough: the reply seals the heartbeat key to the key's X25519
    // form, which only a valid point has. Checked before the token is spent, so a host that sent
    // a bad key can enrol again with the same token.
    if (!common::seal_to("", *raw_key))
      return sdk::fail(f.error("public_key", "public_key is not a valid Ed25519 public key (64 hex characters, "
                                             "but not a point of the curve's prime-order subgroup)"));
    if (options_.keys.signing.secret_key.empty())
      return sdk::fail(ErrorCode::FailedPrecondition, "the control plane has no signing key");
    MESH_TRY(host_version, f.string_or("host_version", ""));
    if (host_version.size() > 64)
      return sdk::fail(f.error("host_version", "is longer than 64 characters"));
    // Only the hash of the token is ever compared or stored; the token is never logged or echoed.
    MESH_TRY(record, store_->enrol(common::sha256_hex(token), node, public_key, now_ms));
    forget_heartbeat_identity(node);  // a re-enrolled node's old heartbeat key stops here
    common::logger()->info("node enrolled node={} generation={} host_version={}", node,
                           record.generation, host_version.empty() ? "-" : host_version);
    // The node's heartbeat MAC key, sealed to the node's own key: the reply crosses the broker,
    // and only the enrolling host can open it.
    const std::string mac_key =
        trust::heartbeat_key(options_.keys.heartbeat_master, node, record.generation, record.public_key);
    MESH_TRY(sealed, common::seal_to(mac_key, *raw_key));
    Value v = Value::object();
    v.set("node", node);
    v.set("generation", int_value(record.generation));
    v.set("control_key", common::to_hex(options_.keys.signing.public_key));
    v.set("heartbeat_key", common::to_hex(sealed));
    v.set("time", ts(common::now_ms()));
    v.set("time_ms", common::now_ms());
    v.set("clock_tolerance_ms", static_cast<std::int64_t>(options_.clock_tolerance.count()));
    if (options_.broker_credentials) {
      // The node's own broker user: an nkey allowed to publish only under its name.
      const std::string seed = common::nkey_user_seed(
          node_broker_seed(options_.keys, node, record.generation, record.public_key));
      MESH_TRY(sealed_nkey, common::seal_to(seed, *raw_key));
      v.set("broker_nkey", common::to_hex(sealed_nkey));
    }
    return v;
  };
  auto v = run();
  if (!v) {
    sdk::Error e = v.error();
    if (e.code == ErrorCode::PermissionDenied)
      common::logger()->warn("enrolment refused node={}: {}", node_for_log, shown(e.message, kMaxRefusalText));
    return refuse(m, e, e.code == ErrorCode::PermissionDenied);
  }
  if (m.reply.empty()) return;
  auto r = protocol::ok_reply(m, v->to_json());
  r.set_header(trust::kHeaderSignature,
               common::to_hex(common::sign(trust::enrol_reply_text(v->get_string("node"), r.body),
                                           options_.keys.signing.secret_key)));
  // The broker must know the new nkey before the node connects with it.
  if (options_.nodes_changed) options_.nodes_changed();
  reply(std::move(r));
}

// A node's briefing (docs/protocol.md "Briefing"): its check lines, plus the clock line the
// control plane computes itself from the signed timestamp, so that a wrong host clock cannot
// vouch for itself. A briefing older than the one on record is a replay and is refused.
void Service::on_briefing(const sdk::Message& m, const sdk::NodeRecord& node, const Value& body,
                          std::int64_t now_ms) {
  Fields f(body);
  auto run = [&]() -> sdk::Result<Value> {
    MESH_TRY(at_ms, f.integer("at_ms", 0));
    if (!node.briefing.empty()) {
      auto old = common::parse_json(node.briefing, common::JsonLimits{body_limit(), 32});
      if (old && old->get_int("at_ms", 0) >= at_ms)
        return sdk::fail(ErrorCode::PermissionDenied,
                         "briefing is not newer than the one on record (replayed?)", "at_ms");
    }
    const Value* lines = body.find("lines");
    if (!lines || !lines->is_array()) return sdk::fail(f.error("lines", "must be a list of check lines"));
    Value::Array out;
    bool failed = false;
    for (std::size_t i = 0; i < lines->as_array().size(); ++i) {
      const Value& l = lines->as_array()[i];
      const std::string at_path = "lines[" + std::to_string(i) + "]";
      if (!l.is_object()) return sdk::fail(f.error(at_path, "must be an object"));
      Fields lf(l, at_path);
      MESH_TRY(check, lf.string("check"));
      MESH_TRY(outcome, lf.string("outcome"));
      MESH_TRY(detail, lf.string_or("detail", ""));
      if (outcome != "pass" && outcome != "fail" && outcome != "info")
        return sdk::fail(lf.error("outcome", "'" + shown(outcome) + "' is not one of: pass, fail, info"));
      if (check == "clock") continue;  // ours, below
      failed = failed || outcome == "fail";
      Value e = Value::object();
      e.set("check", check);
      e.set("outcome", outcome);
      e.set("detail", detail);
      out.push_back(std::move(e));
    }
    const std::int64_t offset = at_ms - now_ms;
    const std::int64_t tol = options_.clock_tolerance.count();
    const bool clock_ok = offset <= tol && offset >= -tol;
    failed = failed || !clock_ok;
    Value clock = Value::object();
    clock.set("check", "clock");
    clock.set("outcome", clock_ok ? "pass" : "fail");
    clock.set("detail", "offset " + std::to_string(offset) + " ms from the control plane's clock (tolerance " +
                            std::to_string(tol / 1000) + " s)");
    out.push_back(std::move(clock));

    Value b = Value::object();
    b.set("node", node.name);
    b.set("at", ts(now_ms));
    b.set("at_ms", at_ms);
    b.set("host_version", body.get_string("host_version"));
    b.set("outcome", failed ? "fail" : "pass");
    b.set("lines", Value(std::move(out)));
    if (auto ok = store_->set_briefing(node.name, b.to_json(), !failed); !ok) return sdk::fail(ok.error());
    common::logger()->info("briefing node={} outcome={} eligible={}", node.name, failed ? "fail" : "pass", !failed);
    return b;
  };
  auto v = run();
  if (!v) return refuse(m, v.error());
  reply_ok(m, *v);
}

// --- operator API -----------------------------------------------------------------------------

void Service::on_api(const sdk::Message& m, std::string_view op, const Value& params,
                     std::int64_t now_ms, const OperatorRecord& who, const Admission& request) {
  using Handler = sdk::Result<Value> (Service::*)(const Value&, std::int64_t);
  static const std::map<std::string_view, Handler> kOps = {
      {"token.issue", &Service::api_token_issue}, {"token.list", &Service::api_token_list},
      {"token.revoke", &Service::api_token_revoke}, {"nodes", &Service::api_nodes},
      {"node.show", &Service::api_node_show},       {"report", &Service::api_report},
      {"history", &Service::api_history},           {"operator.list", &Service::api_operator_list},
      {"node.remove", &Service::api_node_remove},
  };
  sdk::Result<Value> result = sdk::fail(ErrorCode::Internal, "unreached");
  if (op == "operator.add") {
    result = api_operator_add(params, now_ms, who);
  } else if (op == "operator.remove") {
    result = api_operator_remove(params, who);
  } else if (op == "declare") {
    result = api_declare(params, now_ms, request);
  } else if (op == "rollback") {
    result = api_rollback(params, now_ms, request);
  } else {
    auto it = kOps.find(op);
    if (it == kOps.end())
      return refuse(m, sdk::Error{ErrorCode::Unsupported,
                                  "unknown operation '" + shown(op) + "'", "operation"});
    result = (this->*(it->second))(params, now_ms);
  }
  if (!result) {
    // A retry of a refused declare or rollback gets the same refusal. Not for a store that is
    // unavailable or busy: that refusal says "try again", and the retry may then succeed.
    const auto c = result.error().code;
    if (request.ticket && c != ErrorCode::Transient && c != ErrorCode::Unavailable && c != ErrorCode::Timeout)
      if (auto kept = store_->answer_request(request.signer, request.nonce, error_answer(result.error())); !kept)
        common::logger()->warn("api operation={} operator={}: its refusal is not kept for a retry: {}", op, who.name,
                               kept.error().describe());
    // Operators' mistakes (unknown node, bad file) are normal; only the rest is a warning.
    bool quiet = c == ErrorCode::InvalidArgument || c == ErrorCode::NotFound ||
                 c == ErrorCode::AlreadyExists;
    return refuse(m, result.error(), quiet);
  }
  if (op != "nodes" && op != "node.show" && op != "report" && op != "history" && op != "token.list" &&
      op != "operator.list")
    common::logger()->info("api operation={} operator={}", op, who.name);
  reply_ok(m, *result);
}

void Service::reply_stored_answer(const sdk::Message& m, std::string_view op, const std::string& answer,
                                  const OperatorRecord& who) {
  auto v = common::parse_json(answer, common::JsonLimits{64 << 20, 64});
  if (!v || !v->is_object())
    return refuse(m, sdk::Error{ErrorCode::Internal, "the stored answer of this request is unreadable", {}});
  common::logger()->info("api operation={} operator={} retried: answered as the first time (nothing written)", op,
                         who.name);
  if (v->get_string("status") == "ok" && v->find("body")) return reply_ok(m, *v->find("body"));
  const Value* err = v->find("error");
  sdk::Error e{ErrorCode::Internal, "refused", {}};
  if (err && err->is_object())
    e = sdk::Error{protocol::error_code_from_string(err->get_string("code")), err->get_string("message", "refused"),
                   err->get_string("path")};
  refuse(m, e, /*quiet=*/true);
}

sdk::Result<Value> Service::api_operator_add(const Value& p, std::int64_t now_ms, const OperatorRecord& who) {
  Fields f(p);
  MESH_TRY(name, f.string("name"));
  MESH_TRY(role, f.string("role"));
  MESH_TRY(public_key, f.string("public_key"));
  auto pk = common::from_hex(public_key);
  if (!pk || pk->size() != 32)
    return sdk::fail(f.error("public_key", "must be an Ed25519 public key: 64 hex characters"));
  if (!options_.operators) return sdk::fail(ErrorCode::FailedPrecondition, "no operator registry");
  // Only the public key travels: `mesh operator add` made the key pair and keeps the secret.
  if (auto ok = options_.operators->add(OperatorRecord{name, role, *pk, now_ms, who.name}); !ok)
    return sdk::fail(ok.error());
  common::logger()->info("operator added name={} role={} by={}", name, role, who.name);
  Value v = Value::object();
  v.set("name", name);
  v.set("role", role);
  v.set("public_key", public_key);
  // The new identity pins this key, to verify the replies it gets (decision record 31).
  v.set("control_key", common::to_hex(options_.keys.signing.public_key));
  return v;
}

sdk::Result<Value> Service::api_operator_list(const Value&, std::int64_t) {
  Value::Array out;
  if (options_.operators)
    for (const auto& o : options_.operators->list()) {
      Value v = Value::object();
      v.set("name", o.name);
      v.set("role", o.role);
      v.set("public_key", common::to_hex(o.public_key));
      v.set("added_at", o.added_at_ms ? ts(o.added_at_ms) : Value(nullptr));
      v.set("added_by", o.added_by);
      out.push_back(std::move(v));
    }
  return Value(std::move(out));
}

sdk::Result<Value> Service::api_operator_remove(const Value& p, const OperatorRecord& who) {
  Fields f(p);
  MESH_TRY(name, f.string("name"));
  if (!options_.operators) return sdk::fail(ErrorCode::FailedPrecondition, "no operator registry");
  if (auto ok = options_.operators->remove(name); !ok) return sdk::fail(ok.error());
  common::logger()->info("operator removed name={} by={}", name, who.name);
  Value v = Value::object();
  v.set("name", name);
  v.set("removed", true);
  return v;
}

sdk::Result<sdk::NodeRecord> Service::enrolled(const std::string& node) {
  auto r = store_->node(node);
  if (!r && r.error().code == ErrorCode::NotFound)
    return sdk::fail(ErrorCode::NotFound,
                     "node " + node + " is not enrolled (issue a token with: mesh token issue " +
                         node + ")",
                     "node");
  return r;
}

sdk::Result<Value> Service::api_token_issue(const Value& p, std::int64_t now_ms) {
  Fields f(p);
  MESH_TRY(node, node_param(f));
  MESH_TRY(ttl_ms, f.integer_or("ttl_ms", kDefaultTokenTtlMs, 1000, kMaxTokenTtlMs));
  MESH_TRY(reenrol, f.bool_or("reenrol", false));
  MESH_TRY(reply_key_hex, f.opt_string("reply_key"));
  std::optional<std::string> reply_key;
  if (reply_key_hex) {
    auto k = common::from_hex(*reply_key_hex);
    if (!k || k->size() != 32)
      return sdk::fail(f.error("reply_key", "must be an Ed25519 public key: 64 hex characters"));
    reply_key = *k;
  }
  auto existing = store_->node(node);
  if (existing && !reenrol)
    return sdk::fail(ErrorCode::AlreadyExists,
                     "node " + node +
                         " is already enrolled; issue with --reenrol to replace its identity",
                     "node");
  if (!existing && existing.error().code != ErrorCode::NotFound) return sdk::fail(existing.error());

  sdk::TokenRecord rec;
  std::string token;
  for (int attempt = 0;; ++attempt) {
    // "<secret>.<control key>": the host learns from the token itself which control plane key to
    // expect (no trust on first use), and seals the token to it when it enrols.
    token = safe_token(32) + "." + common::base64url_encode(options_.keys.signing.public_key);
    rec.id = safe_token(6);
    rec.node = node;
    rec.hash = common::sha256_hex(token);
    rec.created_at_ms = now_ms;
    rec.expires_at_ms = now_ms + ttl_ms;
    rec.reenrol = reenrol;
    auto added = store_->add_token(rec);
    if (added) break;
    if (added.error().code != ErrorCode::AlreadyExists || attempt == 3) return sdk::fail(added.error());
  }
  common::logger()->info("token issued id={} node={} expires_at={} reenrol={}", rec.id, node,
                         common::format_rfc3339(rec.expires_at_ms), reenrol);
  Value v = Value::object();
  v.set("node", node);
  if (reply_key) {
    // The reply crosses the broker: only the operator's `mesh`, which holds the ephemeral key's
    // secret, can read the token.
    MESH_TRY(sealed, common::seal_to(token, *reply_key));
    v.set("token_sealed", common::to_hex(sealed));
  } else {
    v.set("token", token);
  }
  v.set("id", rec.id);
  v.set("expires_at", ts(rec.expires_at_ms));
  v.set("reenrol", reenrol);
  return v;
}

sdk::Result<Value> Service::api_token_list(const Value&, std::int64_t now_ms) {
  MESH_TRY(tokens, store_->tokens(now_ms));
  Value::Array out;
  for (const auto& t : tokens) {
    Value v = Value::object();
    v.set("id", t.id);
    v.set("node", t.node);
    v.set("created_at", ts(t.created_at_ms));
    v.set("expires_at", ts(t.expires_at_ms));
    v.set("reenrol", t.reenrol);
    out.push_back(std::move(v));
  }
  return Value(std::move(out));
}

sdk::Result<Value> Service::api_token_revoke(const Value& p, std::int64_t) {
  Fields f(p);
  MESH_TRY(id, f.string("id"));
  auto ok = store_->revoke_token(id);
  if (!ok) {
    if (ok.error().code == ErrorCode::NotFound)
      return sdk::fail(ErrorCode::NotFound, "no token with id " + id, "id");
    return sdk::fail(ok.error());
  }
  common::logger()->info("token revoked id={}", id);
  Value v = Value::object();
  v.set("id", id);
  v.set("revoked", true);
  return v;
}

sdk::Result<Value> Service::api_nodes(const Value& p, std::int64_t now_ms) {
  MESH_TRY(nodes, listed_nodes(p));
  Value::Array out;
  for (const auto& n : nodes) out.push_back(node_summary(n, now_ms));
  return Value(std::move(out));
}

sdk::Result<Value> Service::api_node_show(const Value& p, std::int64_t now_ms) {
  Fields f(p);
  MESH_TRY(name, node_param(f));
  MESH_TRY(n, enrolled(name));
  MESH_TRY(owned, store_->owned(name));
  MESH_TRY(applies, store_->apply_reports(name, kShowApplies));
  MESH_TRY(drift, store_->last_drift(name, true));
  MESH_TRY(scan, store_->last_drift(name, false));

  Value v = node_summary(n, now_ms);
  v.set("enrolled_at", ts(n.enrolled_at_ms));
  v.set("generation", int_value(n.generation));
  v.set("host_version", n.host_version);
  v.set("owned", string_list(owned));
  Value::Array list;
  for (const auto& a : applies) {
    Value e = Value::object();
    e.set("revision", int_value(a.revision));
    e.set("outcome", a.outcome);
    e.set("at", ts(a.at_ms));
    e.set("resource", a.resource);
    e.set("reason", a.reason);
    e.set("code", report_code_value(a.code));
    list.push_back(std::move(e));
  }
  v.set("applies", Value(std::move(list)));
  v.set("last_drift", drift ? drift_value(*drift) : Value(nullptr));
  v.set("last_scan_at", scan ? ts(scan->at_ms) : Value(nullptr));
  Value briefing(nullptr);
  if (!n.briefing.empty()) {
    auto b = common::parse_json(n.briefing, common::JsonLimits{body_limit(), 32});
    if (b) briefing = std::move(*b);
  }
  v.set("briefing", std::move(briefing));
  return v;
}

sdk::Result<Value> Service::declare(const std::string& node, const Value& resources,
                                    std::int64_t now_ms, const Admission* request, const Value* extra) {
  // The pushed body (in parts when larger than the broker's limit) must fit what a host
  // reassembles, whatever revision it gets.
  const std::size_t limit = options_.max_assembled;
  const std::size_t size = render_declaration(resources, node, 9223372036854775807ULL).size();
  if (size > limit)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "the declaration is " + std::to_string(size) +
                         " bytes as pushed, over the limit of " + std::to_string(limit) +
                         " bytes of a message in parts (limits.max_assembled)",
                     "declaration");

  std::map<std::uint64_t, std::string> rendered;
  sdk::DeclarationWrite write{node, [&](std::uint64_t revision) {
                                std::string body = render_declaration(resources, node, revision);
                                rendered[revision] = body;
                                return body;
                              }};
  // What the operator is answered: also stored, inside the write's transaction, as the answer of
  // the request that asked for it, so that a retry of that request returns it (docs/protocol.md
  // "Nonces").
  auto answer_of = [&](const sdk::DeliveryRecord& d) {
    Value v = Value::object();
    v.set("delivery", int_value(d.id));
    Value::Array nodes;
    for (const auto& t : d.targets) nodes.emplace_back(t.node);
    v.set("nodes", Value(std::move(nodes)));
    v.set("revision", int_value(d.targets.empty() ? 0 : d.targets.front().revision));
    if (extra && extra->is_object())
      for (const auto& [k, value] : extra->as_object()) v.set(k, value);
    return v;
  };
  sdk::Result<sdk::DeliveryRecord> written = sdk::fail(ErrorCode::Internal, "not written");
  if (request && !request->nonce.empty())
    written = store_->declare_answered(
        {write}, now_ms, options_.retain,
        sdk::RequestAnswer{request->signer, request->nonce, [&](const sdk::DeliveryRecord& d) { return ok_answer(answer_of(d)); }});
  else
    written = store_->declare({write}, now_ms, options_.retain);
  MESH_TRY(delivery, std::move(written));
  if (delivery.targets.empty())
    return sdk::fail(ErrorCode::Internal, "the store returned a delivery without targets");
  const std::uint64_t revision = delivery.targets.front().revision;
  common::logger()->info("declared node={} revision={} delivery={}", node, revision, delivery.id);

  auto body = rendered.find(revision);
  if (body != rendered.end()) {
    auto msg = protocol::make_message(protocol::decl_subject(node), body->second);
    msg.set_header(protocol::kHeaderNode, node);
    msg.set_header(protocol::kHeaderRevision, std::to_string(revision));
    msg.set_header(protocol::kHeaderDigest, common::sha256_hex(body->second));
    trust::sign_declaration(msg, node, revision, options_.keys.signing.secret_key);
    if (auto ok = protocol::parts::publish(*transport_, msg); !ok)
      common::logger()->warn(
          "declaration not pushed node={} revision={}: {}; the node fetches it when it reconnects",
          node, revision, ok.error().describe());
  }

  return answer_of(delivery);
}

sdk::Result<Value> Service::api_declare(const Value& p, std::int64_t now_ms, const Admission& request) {
  Fields f(p);
  MESH_TRY(node, node_param(f));
  MESH_TRY(text, f.string("declaration"));
  MESH_TRY(decl, parse_declaration_text(text, node, common::JsonLimits{options_.max_assembled, 32}));
  MESH_TRY(record, enrolled(node));
  // Declaring to an ineligible node still works (the operator decides); the result says why it
  // is ineligible so that `mesh declare` can warn.
  Value extra = Value::object();
  extra.set("eligible", record.eligible);
  if (!record.eligible) {
    Value::Array failing;
    if (auto b = common::parse_json(record.briefing, common::JsonLimits{body_limit(), 32}); b && b->find("lines"))
      for (const auto& l : b->find("lines")->as_array())
        if (l.get_string("outcome") == "fail") failing.push_back(l);
    extra.set("briefing_failures", Value(std::move(failing)));
  }
  return declare(node, *decl.find("resources"), now_ms, &request, &extra);
}

sdk::Result<Value> Service::api_report(const Value& p, std::int64_t now_ms) {
  Fields f(p);
  MESH_TRY(id, f.opt_int("delivery", 1));
  sdk::DeliveryRecord delivery;
  if (id) {
    auto d = store_->delivery(static_cast<std::uint64_t>(*id));
    if (!d) {
      if (d.error().code == ErrorCode::NotFound)
        return sdk::fail(ErrorCode::NotFound, "delivery " + std::to_string(*id) + " does not exist",
                         "delivery");
      return sdk::fail(d.error());
    }
    delivery = std::move(*d);
  } else {
    MESH_TRY(latest, store_->latest_delivery());
    if (!latest)
      return sdk::fail(ErrorCode::NotFound, "there is no delivery yet (nothing was declared)",
                       "delivery");
    delivery = std::move(*latest);
  }
  std::vector<TargetStatus> targets;
  for (const auto& t : delivery.targets) {
    TargetStatus s;
    s.target = t;
    MESH_TRY(report, store_->apply_report(t.node, t.revision));
    s.report = std::move(report);
    if (!s.report || s.report->outcome == "superseded") {
      MESH_TRY(next, store_->next_revision(t.node, t.revision));
      s.next = next;
      if (next) {
        MESH_TRY(next_report, store_->apply_report(t.node, next->revision));
        s.next_report = std::move(next_report);
        if (!s.next_report) {
          MESH_TRY(after, store_->next_revision(t.node, next->revision));
          s.next_superseded = after.has_value();
        }
      }
    }
    auto n = store_->node(t.node);
    if (n)
      s.node = std::move(*n);
    else if (n.error().code != ErrorCode::NotFound)
      return sdk::fail(n.error());
    targets.push_back(std::move(s));
  }
  return build_delivery_report(delivery, targets, now_ms);
}

sdk::Result<Value> Service::api_history(const Value& p, std::int64_t) {
  Fields f(p);
  MESH_TRY(node, node_param(f));
  MESH_TRY(limit, f.integer_or("limit", 50, 1, 1000));
  MESH_TRY(record, enrolled(node));
  (void)record;
  MESH_TRY(revisions, store_->history(node, static_cast<std::uint32_t>(limit)));
  Value::Array out;
  for (const auto& r : revisions) {
    Value v = Value::object();
    v.set("revision", int_value(r.revision));
    v.set("at", ts(r.created_at_ms));
    v.set("delivery", int_value(r.delivery));
    v.set("digest", r.digest);
    out.push_back(std::move(v));
  }
  return Value(std::move(out));
}

sdk::Result<Value> Service::api_rollback(const Value& p, std::int64_t now_ms, const Admission& request) {
  Fields f(p);
  MESH_TRY(node, node_param(f));
  MESH_TRY(to, f.integer("to", 1));
  MESH_TRY(record, enrolled(node));
  (void)record;
  auto old = store_->revision(node, static_cast<std::uint64_t>(to));
  if (!old) {
    if (old.error().code == ErrorCode::NotFound)
      return sdk::fail(ErrorCode::NotFound,
                       "revision " + std::to_string(to) + " of " + node +
                           " is not retained (never written, or pruned; see mesh history " + node +
                           ")",
                       "to");
    return sdk::fail(old.error());
  }
  // Stored bodies were written by us, but are read back as untrusted input all the same.
  auto parsed = common::parse_json(old->body, common::JsonLimits{64 << 20, 32});
  if (!parsed || !parsed->find("resources"))
    return sdk::fail(ErrorCode::Internal, "stored revision " + std::to_string(to) + " of " + node +
                                              " is unreadable");
  Value extra = Value::object();
  extra.set("to", static_cast<std::int64_t>(to));
  MESH_TRY(result, declare(node, *parsed->find("resources"), now_ms, &request, &extra));
  common::logger()->info("rollback node={} to={} revision={}", node, to,
                         result.get_int("revision", 0));
  return result;
}

}  // namespace mesh::control::detail
