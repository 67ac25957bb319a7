// The operator API's operator registry (docs/security.md "Operators and roles", decision record
// 16): operator.add, operator.list, operator.remove. Only public keys travel and are kept.
#include <spdlog/spdlog.h>

#include "fields.h"
#include "service.h"
#include "service_util.h"
#include "mesh/common/crypto.h"
#include "mesh/common/logging.h"

namespace mesh::control::detail {

using sdk::ErrorCode;
using sdk::Value;

sdk::Result<Value> Service::api_operator_add(const ApiCall& call) {
  const Value& p = call.params;
  const std::int64_t now_ms = call.now_ms;
  const OperatorRecord& who = call.who;
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
  v.set("control_key", common::to_hex(options_.keys.current()->pair.public_key));
  return v;
}

sdk::Result<Value> Service::api_operator_list(const ApiCall&) {
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

sdk::Result<Value> Service::api_operator_remove(const ApiCall& call) {
  const Value& p = call.params;
  const OperatorRecord& who = call.who;
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

}  // namespace mesh::control::detail
