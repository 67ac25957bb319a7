// What hosts send (docs/protocol.md "Subjects", "Bodies"): latest and recovery requests, apply
// reports, drift reports, heartbeats and briefings. Each arrives here authenticated
// (dispatch.cpp, auth.cpp) and with its body's node checked against its subject; its fields are
// checked here, before the store is written.
#include <atomic>
#include <cstdlib>

#include <spdlog/spdlog.h>

#include "fields.h"
#include "node_facts.h"
#include "node_schemas.h"
#include "metrics.h"
#include <chrono>
#include <optional>

#include "service.h"
#include "service_util.h"
#include "mesh/control/report.h"
#include "mesh/common/crypto.h"
#include "mesh/common/json.h"
#include "mesh/common/logging.h"
#include "mesh/common/protocol.h"
#include "mesh/common/text.h"
#include "mesh/common/trust.h"

namespace mesh::control::detail {
namespace {

using sdk::ErrorCode;
using sdk::Value;

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

}  // namespace

std::optional<sdk::Error> Service::charge_store_bytes(const sdk::Message& m, const std::string& node) {
  double wait = 0;
  if (store_bytes_.spend(node, static_cast<double>(m.body.size()), std::chrono::steady_clock::now(), &wait))
    return std::nullopt;
  const auto seconds = static_cast<long long>(wait) + 1;
  if (std::uint64_t hidden = 0; store_bytes_log_.take(&hidden))
    common::logger()->warn("store budget node={} subject={} bytes={}: not recorded (over {} bytes/s, bursts of {}; "
                           "allowed again in {} s){}",
                           node, shown(m.subject), m.body.size(), options_.node_store_rate, options_.node_store_burst,
                           seconds, common::LogBudget::suffix(hidden));
  return sdk::Error{ErrorCode::Transient,
                    "node " + node + " made the store write more than its budget ([limits] node_store_rate " +
                        std::to_string(static_cast<long long>(options_.node_store_rate)) +
                        " bytes/s, node_store_burst " +
                        std::to_string(static_cast<long long>(options_.node_store_burst)) +
                        "): not recorded; try again in " + std::to_string(seconds) + " s",
                    {}};
}

void Service::answer_report(const sdk::Message& m, const sdk::Result<bool>& recorded) {
  if (!recorded) return refuse(m, report_refusal(recorded.error()));
  if (options_.metrics) options_.metrics->report_ingested(m.subject, *recorded);
  Value ack = Value::object();
  ack.set("recorded", *recorded);
  reply_ack(m, ack);
}

void Service::on_latest(const sdk::Message& m, const std::string& node) {
  // Test-only (never set it in production): the first N latest requests are answered "busy", as
  // a full queue answers them, so that a test can watch a host back off and ask again.
  static std::atomic<long> busy_left = [] {
    const char* t = std::getenv("NOX_MESH_CONTROL_BUSY_LATEST_FOR_TEST");
    return t ? std::atol(t) : 0L;
  }();
  if (busy_left.load() > 0 && busy_left.fetch_sub(1) > 0)
    return refuse(m, sdk::Error{ErrorCode::Transient,
                                "the control plane is busy (node_request queue full); try again "
                                "(NOX_MESH_CONTROL_BUSY_LATEST_FOR_TEST)",
                                {}});
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
  trust::sign_declaration(r, node, (*rev)->revision, options_.keys.current()->pair.secret_key);
  sign_reply_to(r, m);
  reply(std::move(r));
}

void Service::on_report(const sdk::Message& m, const std::string& node, const Value& body,
                        std::uint64_t generation, std::int64_t now_ms) {
  Fields f(body);
  auto run = [&]() -> sdk::Result<bool> {
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
        return false;
      }
    }
    // What a node makes the store write is bounded in bytes per second (decision record 186).
    if (auto over = charge_store_bytes(m, node)) return sdk::fail(std::move(*over));
    // Recorded with the reports that arrive with it, in one store write; answered from there
    // once that write is durable (finish_report).
    reports_->submit(PendingReport{m, std::move(r)});
    return true;
  };
  if (auto checked = run(); !checked || !*checked) answer_report(m, checked);
}

void Service::finish_report(PendingReport&& p, const sdk::Result<bool>& recorded) {
  if (const auto* r = std::get_if<sdk::ApplyReport>(&p.report)) {
    if (!recorded) {
      const ErrorCode code = recorded.error().code;
      if (code == ErrorCode::InvalidArgument || code == ErrorCode::PermissionDenied)
        if (std::uint64_t hidden = 0; refusal_log_.take(&hidden))
          common::logger()->warn("report refused node={} revision={} outcome={} generation={} reason=\"{}\"{}",
                                 r->node, r->revision, r->outcome, r->generation,
                                 shown(recorded.error().message, 256), common::LogBudget::suffix(hidden));
    } else {
      wake_stages(&r->node);  // a staged deploy's wave may move on (decision record 71)
      common::logger()->info("report node={} revision={} outcome={} recorded={}{}{}", r->node, r->revision,
                             r->outcome, *recorded, r->resource.empty() ? "" : " resource=",
                             shown(r->resource, common::kPrintableBytes));
    }
  } else if (const auto* d = std::get_if<sdk::DriftReport>(&p.report); d && recorded && !d->items.empty()) {
    common::logger()->info("drift node={} scan={} resources={} recorded={}", d->node, d->scan_id, d->items.size(),
                           *recorded);
  }
  answer_report(p.request, recorded);
}

void Service::drain_reports() noexcept {
  // A request handled after its nonce may hand a report in: nonces first.
  nonces_->drain();
  reports_->drain();
}

void Service::on_drift(const sdk::Message& m, const std::string& node, const Value& body,
                       std::int64_t now_ms) {
  Fields f(body);
  auto run = [&]() -> sdk::Result<bool> {
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
    if (auto over = charge_store_bytes(m, node)) return sdk::fail(std::move(*over));
    // As an apply report: in the next batch, answered once it is durable (finish_report).
    reports_->submit(PendingReport{m, std::move(d)});
    return true;
  };
  if (auto checked = run(); !checked) answer_report(m, checked);
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
  if (options_.metrics) options_.metrics->heartbeat_ingested();
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
    // The briefing `mesh-host enrol` sends is kept as such: it is not contact (node_facts.h).
    if (body.get_bool("enrolment", false)) b.set("enrolment", true);
    // Its facts (decision record 54): checked, kept with the briefing.
    MESH_TRY(facts, briefing_facts(body));
    b.set("facts", std::move(facts));
    // The providers' schemas (decision record 48): checked before anything is stored.
    MESH_TRY(schemas, briefing_schemas(body));
    // Up to 256 KiB each, and a thief may send them at the node's message rate: bounded in bytes
    // per second with the node's reports (decision record 186).
    if (auto over = charge_store_bytes(m, node.name)) return sdk::fail(std::move(*over));
    if (auto ok = store_->set_briefing(node.name, b.to_json(), !failed); !ok) return sdk::fail(ok.error());
    MESH_TRY(store_schemas(*store_, node.name, schemas));
    common::logger()->info("briefing node={} outcome={} eligible={}", node.name, failed ? "fail" : "pass", !failed);
    return b;
  };
  auto v = run();
  if (!v) return refuse(m, v.error());
  reply_ok(m, *v);
}

}  // namespace mesh::control::detail
