// Routing (docs/protocol.md "The control plane's handling"): every whole message goes through the
// same checks in the same order — size, protocol version, proof, JSON, the node it names — and
// then to the one handler of its subject. API operations are routed by the table of operations
// (operations.cpp).
#include <spdlog/spdlog.h>

#include "service.h"
#include "service_util.h"
#include "mesh/common/json.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"

namespace mesh::control::detail {

using sdk::ErrorCode;
using sdk::Value;

namespace {

// A body as JSON: an object (an empty body is the empty object), at most `limit` bytes deep 32.
sdk::Result<Value> parse_request_body(const sdk::Message& m, std::size_t limit) {
  if (m.body.find_first_not_of(" \t\r\n") == std::string::npos) return Value::object();
  auto parsed = common::parse_json(m.body, common::JsonLimits{limit, 32});
  if (!parsed) return sdk::fail(parsed.error());
  if (!parsed->is_object()) return sdk::fail(invalid("", "the body must be a JSON object"));
  return std::move(*parsed);
}

}  // namespace

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
  auto parse_body = [&]() -> sdk::Result<Value> { return parse_request_body(m, limit); };

  // latest and recovery carry no body; they are signed by the node (nobody else may read a
  // node's declaration or recovery copy). Handled on a worker once the group commit of nonces
  // made the request's nonce durable (admit_node_request, decision record 119).
  if (starts("mesh.latest.") || starts("mesh.recovery.")) {
    auto node = subject_node(s);
    if (!node) return refuse(m, node.error());
    const bool latest = starts("mesh.latest.");
    return admit_node_request(m, *node, now_ms, [this, node = *node, latest](const sdk::Message& request) {
      latest ? on_latest(request, node) : on_recovery(request, node);
    });
  }

  // A range of content by digest (decision record 111): signed by the node, like latest.
  if (starts("mesh.content.")) {
    auto node = subject_node(s);
    if (!node) return refuse(m, node.error());
    return admit_node_request(m, *node, now_ms, [this, node = *node, limit](const sdk::Message& request) {
      auto body = parse_request_body(request, limit);
      if (!body) return refuse(request, body.error());
      on_content(request, node, *body);
    });
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
    // A cached identity that fails: the node may have been re-enrolled through another instance
    // sharing the store (decision record 90). Read once more, then decide.
    if (!ts && id->cached) {
      id = heartbeat_identity(*node, /*reread=*/true);
      if (!id) return refuse(m, id.error());
      ts = trust::verify_heartbeat(m, *node, id->mac_key);
    }
    if (!ts) return refuse(m, ts.error());
    heartbeat_ts = *ts;
    heartbeat_generation = id->generation;
    // The body every host sends is read without an sdk::Value (decision record 122); any other
    // shape, and any field check that fails, continues below.
    if (take_plain_heartbeat(m, *node, now_ms, heartbeat_ts, heartbeat_generation)) return;
  } else if (starts("mesh.report.")) {
    // A deploy brings one report from every node at once: its signer's key comes from the same
    // cache, read again when a cached key fails (a re-enrolment through another instance). A
    // report verified with a key cached after its identity was revoked is still refused: the
    // store records it only under the node's current generation (Store::record_reports).
    auto id = heartbeat_identity(*node);
    if (!id) return refuse(m, id.error());
    auto ok = trust::verify_report(m, id->public_key);
    if (!ok && id->cached) {
      id = heartbeat_identity(*node, /*reread=*/true);
      if (!id) return refuse(m, id.error());
      ok = trust::verify_report(m, id->public_key);
    }
    if (!ok) return refuse(m, ok.error());
    heartbeat_generation = id->generation;
  } else {
    record = authenticate_node_message(m, *node);
    if (!record) return refuse(m, record.error());
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
  if (starts("mesh.report.")) return on_report(m, *node, body, heartbeat_generation, now_ms);
  if (starts("mesh.drift.")) return on_drift(m, *node, body, now_ms);
  return on_briefing(m, *record, body, now_ms);
}


}  // namespace mesh::control::detail
