#include "mesh/common/trust.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "mesh/common/fs.h"
#include "mesh/common/json.h"
#include "mesh/common/protocol.h"
#include "mesh/sdk/value.h"

namespace mesh::trust {
namespace {

using sdk::ErrorCode;

std::string denied_text(const sdk::Message& m, const std::string& what) {
  return what + " (" + m.subject + ")";
}

sdk::Result<std::string> signature_of(const sdk::Message& m, const char* what) {
  const std::string* sig = m.header(kHeaderSignature);
  if (!sig || sig->empty())
    return sdk::fail(ErrorCode::PermissionDenied, std::string("unsigned ") + what + ": no " + kHeaderSignature + " header");
  auto raw = common::from_hex(*sig);
  if (!raw || raw->size() != 64)
    return sdk::fail(ErrorCode::PermissionDenied,
                     std::string(what) + " signature is malformed (" + kHeaderSignature + " must be 128 hex characters)");
  return std::move(*raw);
}

std::optional<std::int64_t> parse_int(std::string_view s) {
  std::int64_t v = 0;
  if (s.empty() || s.size() > 19) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

std::string declaration_text(std::string_view node, std::uint64_t revision, std::string_view body) {
  std::string s = "nox-mesh declaration v1\n";
  s.append(node).append("\n").append(std::to_string(revision)).append("\n").append(body);
  return s;
}

std::string report_text(std::string_view subject, std::string_view body) {
  std::string s = "nox-mesh report v1\n";
  s.append(subject).append("\n").append(body);
  return s;
}

std::string request_text(std::string_view subject, std::string_view signer, std::string_view timestamp,
                         std::string_view nonce, std::string_view body) {
  std::string s = "nox-mesh request v1\n";
  s.append(subject).append("\n").append(signer).append("\n").append(timestamp).append("\n");
  s.append(nonce).append("\n").append(body);
  return s;
}

std::string heartbeat_text(std::string_view node, std::string_view timestamp, std::string_view body) {
  std::string s = "nox-mesh heartbeat v1\n";
  s.append(node).append("\n").append(timestamp).append("\n").append(body);
  return s;
}

std::string enrol_reply_text(std::string_view node, std::string_view body) {
  std::string s = "nox-mesh enrolment v1\n";
  s.append(node).append("\n").append(body);
  return s;
}

std::string ack_text(std::string_view subject, std::string_view request_digest_hex, std::string_view status,
                     std::string_view body) {
  std::string s = "nox-mesh ack v1\n";
  s.append(subject).append("\n").append(request_digest_hex).append("\n").append(status).append("\n").append(body);
  return s;
}

std::string reply_text(std::string_view subject, std::string_view nonce, std::string_view request_digest_hex,
                       std::string_view status, std::string_view body) {
  std::string s = "nox-mesh reply v1\n";
  s.append(subject).append("\n").append(nonce).append("\n").append(request_digest_hex).append("\n");
  s.append(status).append("\n").append(body);
  return s;
}

std::string time_text(std::string_view subject, std::string_view nonce, std::int64_t time_ms) {
  std::string s = "nox-mesh time v1\n";
  s.append(subject).append("\n").append(nonce).append("\n").append(std::to_string(time_ms));
  return s;
}

std::string heartbeat_key(const std::string& master, std::string_view node, std::uint64_t generation,
                          std::string_view public_key_hex) {
  std::string info = "nox-mesh heartbeat key v1\n";
  info.append(node).append("\n").append(std::to_string(generation)).append("\n").append(public_key_hex);
  return common::mac(info, master);
}

void sign_declaration(sdk::Message& m, std::string_view node, std::uint64_t revision,
                      const std::string& secret_key) {
  m.set_header(kHeaderSignature, common::to_hex(common::sign(declaration_text(node, revision, m.body), secret_key)));
}

sdk::Result<void> verify_declaration(const sdk::Message& m, std::string_view node, std::uint64_t revision,
                                     const std::string& public_key) {
  auto sig = signature_of(m, "declaration");
  if (!sig) return sdk::fail(sig.error());
  if (!common::verify(declaration_text(node, revision, m.body), *sig, public_key))
    return sdk::fail(ErrorCode::PermissionDenied,
                     "declaration signature does not verify with the pinned control plane key");
  return {};
}

void sign_report(sdk::Message& m, const std::string& secret_key) {
  m.set_header(kHeaderSignature, common::to_hex(common::sign(report_text(m.subject, m.body), secret_key)));
}

sdk::Result<void> verify_report(const sdk::Message& m, const std::string& public_key) {
  auto sig = signature_of(m, "message");
  if (!sig) return sdk::fail(sig.error());
  if (!common::verify(report_text(m.subject, m.body), *sig, public_key))
    return sdk::fail(ErrorCode::PermissionDenied, denied_text(m, "signature does not verify with the node's key"));
  return {};
}

void sign_request(sdk::Message& m, std::string_view signer_header, std::string_view signer,
                  const std::string& secret_key, std::int64_t now_ms) {
  const std::string ts = std::to_string(now_ms);
  const std::string nonce = common::random_token(18);
  m.set_header(std::string(signer_header), std::string(signer));
  m.set_header(kHeaderTimestamp, ts);
  m.set_header(kHeaderNonce, nonce);
  m.set_header(kHeaderSignature,
               common::to_hex(common::sign(request_text(m.subject, signer, ts, nonce, m.body), secret_key)));
}

sdk::Result<RequestProof> read_request_proof(const sdk::Message& m, std::string_view signer_header) {
  RequestProof p;
  const std::string* signer = m.header(signer_header);
  const std::string* sig = m.header(kHeaderSignature);
  if (!sig || !signer || signer->empty())
    return sdk::fail(ErrorCode::PermissionDenied,
                     "unsigned request: no " + std::string(sig ? signer_header : kHeaderSignature) + " header");
  p.signer = *signer;
  auto raw = signature_of(m, "request");
  if (!raw) return sdk::fail(raw.error());
  p.signature = std::move(*raw);
  const std::string* ts = m.header(kHeaderTimestamp);
  const std::string* nonce = m.header(kHeaderNonce);
  if (!ts || !parse_int(*ts))
    return sdk::fail(ErrorCode::PermissionDenied, std::string("signed request without a valid ") + kHeaderTimestamp +
                                                      " header (Unix milliseconds)");
  p.timestamp_ms = *parse_int(*ts);
  if (!nonce || nonce->size() < 16 || nonce->size() > 64)
    return sdk::fail(ErrorCode::PermissionDenied,
                     std::string("signed request without a valid ") + kHeaderNonce + " header (16-64 characters)");
  p.nonce = *nonce;
  return p;
}

bool verify_request(const sdk::Message& m, const RequestProof& p, const std::string& public_key) {
  return common::verify(request_text(m.subject, p.signer, std::to_string(p.timestamp_ms), p.nonce, m.body),
                        p.signature, public_key);
}

namespace {
std::string status_of(const sdk::Message& m) {
  const std::string* s = m.header("Mesh-Status");
  return s ? *s : std::string();
}
}  // namespace

void sign_ack(sdk::Message& reply, const sdk::Message& request, const std::string& secret_key) {
  const std::string text = ack_text(request.subject, common::sha256_hex(request.body), status_of(reply), reply.body);
  reply.set_header(kHeaderSignature, common::to_hex(common::sign(text, secret_key)));
}

sdk::Result<void> verify_ack(const sdk::Message& reply, const sdk::Message& request, const std::string& public_key) {
  auto sig = signature_of(reply, "acknowledgement");
  if (!sig) return sdk::fail(sig.error());
  if (!common::verify(ack_text(request.subject, common::sha256_hex(request.body), status_of(reply), reply.body), *sig,
                      public_key))
    return sdk::fail(ErrorCode::PermissionDenied,
                     "acknowledgement signature does not verify with the pinned control plane key for this report");
  return {};
}

void sign_reply(sdk::Message& reply, const sdk::Message& request, const std::string& secret_key) {
  const std::string* nonce = request.header(kHeaderNonce);
  const std::string text = reply_text(request.subject, nonce ? *nonce : "", common::sha256_hex(request.body),
                                      status_of(reply), reply.body);
  reply.set_header(kHeaderReplySignature, common::to_hex(common::sign(text, secret_key)));
}

sdk::Result<void> verify_reply(const sdk::Message& reply, const sdk::Message& request, const std::string& public_key) {
  const std::string* sig = reply.header(kHeaderReplySignature);
  if (!sig || sig->empty())
    return sdk::fail(ErrorCode::PermissionDenied, std::string("unsigned reply: no ") + kHeaderReplySignature + " header");
  auto raw = common::from_hex(*sig);
  if (!raw || raw->size() != 64)
    return sdk::fail(ErrorCode::PermissionDenied, std::string("reply signature is malformed (") +
                                                      kHeaderReplySignature + " must be 128 hex characters)");
  const std::string* nonce = request.header(kHeaderNonce);
  if (!nonce || nonce->empty())
    return sdk::fail(ErrorCode::PermissionDenied, "reply to a request without a Mesh-Nonce cannot be verified");
  if (!common::verify(reply_text(request.subject, *nonce, common::sha256_hex(request.body), status_of(reply), reply.body),
                      *raw, public_key))
    return sdk::fail(ErrorCode::PermissionDenied,
                     "reply signature does not verify with the pinned control plane key for this request "
                     "(forged, altered, or the answer to another request)");
  return {};
}

void sign_time(sdk::Message& reply, const sdk::Message& request, std::int64_t time_ms, const std::string& secret_key) {
  const std::string* nonce = request.header(kHeaderNonce);
  reply.set_header(kHeaderTime, std::to_string(time_ms));
  reply.set_header(kHeaderSignature,
                   common::to_hex(common::sign(time_text(request.subject, nonce ? *nonce : "", time_ms), secret_key)));
}

sdk::Result<std::int64_t> verify_time(const sdk::Message& reply, const sdk::Message& request,
                                      const std::string& public_key) {
  const std::string* t = reply.header(kHeaderTime);
  if (!t) return sdk::fail(ErrorCode::NotFound, std::string("no ") + kHeaderTime + " header");
  auto ms = parse_int(*t);
  if (!ms) return sdk::fail(ErrorCode::PermissionDenied, std::string(kHeaderTime) + " is not Unix milliseconds");
  auto sig = signature_of(reply, "time");
  if (!sig) return sdk::fail(sig.error());
  const std::string* nonce = request.header(kHeaderNonce);
  if (!nonce || !common::verify(time_text(request.subject, *nonce, *ms), *sig, public_key))
    return sdk::fail(ErrorCode::PermissionDenied,
                     "the control plane's time does not verify with the pinned control plane key for this request");
  return *ms;
}

void mac_heartbeat(sdk::Message& m, std::string_view node, const std::string& key, std::int64_t now_ms) {
  const std::string ts = std::to_string(now_ms);
  m.set_header(kHeaderTimestamp, ts);
  m.set_header(kHeaderMac, common::to_hex(common::mac(heartbeat_text(node, ts, m.body), key)));
}

sdk::Result<std::int64_t> verify_heartbeat(const sdk::Message& m, std::string_view node, const std::string& key) {
  const std::string* tag = m.header(kHeaderMac);
  const std::string* ts = m.header(kHeaderTimestamp);
  if (!tag || !ts) return sdk::fail(ErrorCode::PermissionDenied, "heartbeat without a MAC (Mesh-MAC, Mesh-Timestamp)");
  auto t = parse_int(*ts);
  auto raw = common::from_hex(*tag);
  if (!t || !raw || !common::mac_verify(heartbeat_text(node, *ts, m.body), *raw, key))
    return sdk::fail(ErrorCode::PermissionDenied, "heartbeat MAC does not verify with the node's current key");
  return *t;
}

// --- ReplayCache --------------------------------------------------------------------------------

ReplayCache::ReplayCache(std::size_t capacity, std::chrono::milliseconds window)
    : capacity_(capacity), window_ms_(window.count()) {}

void ReplayCache::expire(std::int64_t now_ms) {
  while (!order_.empty() && order_.front().first <= now_ms) {
    auto it = seen_.find(order_.front().second);
    if (it != seen_.end() && it->second == order_.front().first) seen_.erase(it);
    order_.pop_front();
  }
}

ReplayCache::Outcome ReplayCache::check_and_remember(const std::string& key, std::int64_t now_ms) {
  std::lock_guard lock(mu_);
  expire(now_ms);
  if (seen_.count(key)) return Outcome::Replay;
  if (seen_.size() >= capacity_) return Outcome::Full;
  // Expiries stay in order even if the clock steps back (an entry is then kept a little longer).
  std::int64_t expiry = now_ms + window_ms_;
  if (!order_.empty()) expiry = std::max(expiry, order_.back().first);
  seen_.emplace(key, expiry);
  order_.emplace_back(expiry, key);
  return Outcome::Fresh;
}

std::size_t ReplayCache::size() const {
  std::lock_guard lock(mu_);
  return seen_.size();
}

// --- operator identities -----------------------------------------------------------------------

// Operator names follow the node-name grammar (one subject-safe token of [a-z0-9_-]).
bool valid_operator_name(std::string_view name) { return protocol::valid_node_name(name); }

bool valid_role(std::string_view role) { return role == "admin" || role == "deployer" || role == "reader"; }

std::string operator_identity_json(const OperatorIdentity& id) {
  sdk::Value v = sdk::Value::object();
  v.set("kind", "nox-mesh-operator");
  v.set("version", 1);
  v.set("name", id.name);
  v.set("role", id.role);
  v.set("public_key", common::to_hex(id.public_key));
  v.set("secret_key", common::to_hex(common::seed_of(id.secret_key)));
  if (!id.control_key.empty()) v.set("control_key", common::to_hex(id.control_key));
  return v.to_json();
}

sdk::Result<OperatorIdentity> parse_operator_identity(std::string_view text, const std::string& path) {
  auto bad = [&](const std::string& field, const std::string& why) {
    return sdk::fail(ErrorCode::InvalidArgument, path + ": " + field + ": " + why +
                                                     " (not an operator identity written by mesh-control "
                                                     "or `mesh operator add`)",
                     field);
  };
  auto v = common::parse_json(text, common::JsonLimits{64 * 1024, 4});
  if (!v) return sdk::fail(ErrorCode::InvalidArgument, path + ": not JSON: " + v.error().message);
  if (!v->is_object()) return bad("", "must be a JSON object");
  if (v->get_string("kind") != "nox-mesh-operator") return bad("kind", "must be \"nox-mesh-operator\"");
  if (v->get_int("version", 0) != 1) return bad("version", "must be 1");
  OperatorIdentity id;
  id.name = v->get_string("name");
  if (!valid_operator_name(id.name)) return bad("name", "'" + id.name + "' is not an operator name");
  id.role = v->get_string("role");
  if (!valid_role(id.role)) return bad("role", "must be admin, deployer or reader");
  const sdk::Value* secret = v->find("secret_key");
  if (!secret) return bad("secret_key", "is missing");
  if (!secret->is_string()) return bad("secret_key", "must be a string of 64 hex characters");
  auto seed = common::from_hex(secret->as_string());
  if (!seed || seed->size() != 32) return bad("secret_key", "must be 64 hex characters");
  auto kp = common::keypair_from_seed(*seed);
  auto pk = common::from_hex(v->get_string("public_key"));
  if (!pk || *pk != kp.public_key) return bad("public_key", "does not belong to the secret key");
  id.public_key = kp.public_key;
  id.secret_key = kp.secret_key;
  if (const sdk::Value* ck = v->find("control_key")) {
    auto raw = ck->is_string() ? common::from_hex(ck->as_string()) : sdk::Result<std::string>(sdk::fail(ErrorCode::InvalidArgument, ""));
    if (!raw || raw->size() != 32)
      return bad("control_key", "must be the control plane's public key: 64 hex characters (its control.pub)");
    id.control_key = std::move(*raw);
  }
  return id;
}

sdk::Result<OperatorIdentity> load_operator_identity(const std::string& path) {
  auto text = common::read_file(path, 64 * 1024);
  if (!text) return sdk::fail(text.error().code, "operator identity " + path + ": " + text.error().message);
  return parse_operator_identity(*text, path);
}

}  // namespace mesh::trust
