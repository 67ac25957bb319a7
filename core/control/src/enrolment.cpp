// Enrolment (decision record 10, docs/protocol.md "Enrolment"): the tokens operators issue
// (token.issue, token.list, token.revoke) and their use by a host on mesh.enrol, which gives the
// node its identity — generation, heartbeat key and broker nkey, each sealed to the node's key.
#include <atomic>
#include <cstdlib>
#include <optional>

#include <spdlog/spdlog.h>

#include "fields.h"
#include "service.h"
#include "service_util.h"
#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/logging.h"
#include "mesh/common/nkey.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/control/broker.h"

namespace mesh::control::detail {
namespace {

using sdk::ErrorCode;
using sdk::Value;

constexpr std::int64_t kDefaultTokenTtlMs = 24LL * 3600 * 1000;
constexpr std::int64_t kMaxTokenTtlMs = 366LL * 24 * 3600 * 1000;

// A public secret that never starts with '-' or '_' (so it is never mistaken for a flag).
std::string safe_token(std::size_t bytes) {
  for (;;) {
    std::string t = common::random_token(bytes);
    if (!t.empty() && t[0] != '-' && t[0] != '_') return t;
  }
}

}  // namespace

sdk::Result<Value> Service::api_token_issue(const ApiCall& call) {
  const Value& p = call.params;
  const std::int64_t now_ms = call.now_ms;
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
    token = safe_token(32) + "." + common::base64url_encode(options_.keys.current()->pair.public_key);
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

sdk::Result<Value> Service::api_token_list(const ApiCall& call) {
  const std::int64_t now_ms = call.now_ms;
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

sdk::Result<Value> Service::api_token_revoke(const ApiCall& call) {
  const Value& p = call.params;
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

// How long after an enrolment the same request is answered again (decision record 133): well
// beyond the host's wait for an answer (mesh-host enrol: 10 s; mesh-sim: 20 s).
constexpr std::int64_t kEnrolRepeatWindowMs = 10 * 60 * 1000;

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
      auto opened = raw ? common::open_sealed(*raw, options_.keys.current()->pair) : sdk::Result<std::string>(sdk::fail(raw.error()));
      if (!opened)
        return sdk::fail(ErrorCode::PermissionDenied,
                         "the token is sealed to another control plane's key (was it issued by this one, after its last "
                         "key rotation?)",
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
    if (options_.keys.current()->pair.secret_key.empty())
      return sdk::fail(ErrorCode::FailedPrecondition, "the control plane has no signing key");
    MESH_TRY(host_version, f.string_or("host_version", ""));
    if (host_version.size() > 64)
      return sdk::fail(f.error("host_version", "is longer than 64 characters"));
    // A repeat of an enrolment already made with this very key (decision record 133): its
    // answer was lost and the host sent the same request again. It is answered again and nothing
    // is written — for the node's current key only, within kEnrolRepeatWindowMs of that
    // enrolment. Everything secret in the answer is sealed to that key, so a repeat sent by
    // someone else (the request crossed the broker) tells them nothing.
    std::optional<sdk::NodeRecord> repeat;
    if (auto existing = store_->node(node); existing && !existing->removed_at_ms &&
        now_ms - existing->enrolled_at_ms < kEnrolRepeatWindowMs) {
      auto existing_key = common::from_hex(existing->public_key);
      if (existing_key && *existing_key == *raw_key) repeat = std::move(*existing);
    }
    sdk::NodeRecord record;
    if (repeat) {
      record = std::move(*repeat);
      common::logger()->info("enrolment answered again node={} generation={} (the same key asked again: its first "
                             "answer was not received)",
                             node, record.generation);
    } else {
      // Only the hash of the token is ever compared or stored; the token is never logged or echoed.
      MESH_TRY(enrolled, store_->enrol(common::sha256_hex(token), node, public_key, now_ms));
      record = std::move(enrolled);
      forget_heartbeat_identity(node);  // a re-enrolled node's old heartbeat key stops here
      common::logger()->info("node enrolled node={} generation={} host_version={}", node,
                             record.generation, host_version.empty() ? "-" : host_version);
    }
    // The node's heartbeat MAC key, sealed to the node's own key: the reply crosses the broker,
    // and only the enrolling host can open it.
    const std::string mac_key =
        trust::heartbeat_key(options_.keys.heartbeat_master, node, record.generation, record.public_key);
    MESH_TRY(sealed, common::seal_to(mac_key, *raw_key));
    Value v = Value::object();
    v.set("node", node);
    v.set("generation", int_value(record.generation));
    v.set("control_key", common::to_hex(options_.keys.current()->pair.public_key));
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
                                           options_.keys.current()->pair.secret_key)));
  // The broker must know the new nkey before the node connects with it.
  if (options_.nodes_changed) options_.nodes_changed();
  // Test-only (never set it in production): the first N answers are not sent, as if lost.
  static std::atomic<long> drop_left = [] {
    const char* t = std::getenv("NOX_MESH_CONTROL_DROP_ENROL_ANSWERS_FOR_TEST");
    return t ? std::atol(t) : 0L;
  }();
  if (drop_left.load() > 0 && drop_left.fetch_sub(1) > 0) {
    common::logger()->warn("enrolment answer not sent node={} (NOX_MESH_CONTROL_DROP_ENROL_ANSWERS_FOR_TEST)",
                           v->get_string("node"));
    return;
  }
  reply(std::move(r));
}

}  // namespace mesh::control::detail
