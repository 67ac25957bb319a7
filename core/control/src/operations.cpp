// The operator API's one table of operations {name, handler, role, mutating} (decision record
// 46) and what is derived from it: the routing of `mesh.api.<name>` (on_api), the role check
// (role_needed, role_allows, used by authenticate_operator), which requests are idempotent on
// their nonce, which are logged as operations, and the table docs/protocol.md shows.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "service.h"
#include "service_util.h"
#include "mesh/common/json.h"
#include "mesh/common/logging.h"
#include "mesh/common/protocol.h"

namespace mesh::control {
namespace detail {

using sdk::ErrorCode;
using sdk::Value;

std::span<const Operation> operations() {
  // In the order of the table in docs/protocol.md "API". Roles: docs/security.md "Operators and
  // roles". Mutating: mesh/control/operations.h.
  static constexpr Operation kOperations[] = {
      {"token.issue", &Service::api_token_issue, Role::admin, Mutating::yes},
      {"token.list", &Service::api_token_list, Role::admin, Mutating::no},
      {"token.revoke", &Service::api_token_revoke, Role::admin, Mutating::yes},
      {"operator.add", &Service::api_operator_add, Role::admin, Mutating::yes},
      {"operator.list", &Service::api_operator_list, Role::admin, Mutating::no},
      {"operator.remove", &Service::api_operator_remove, Role::admin, Mutating::yes},
      {"nodes", &Service::api_nodes, Role::reader, Mutating::no},
      {"node.remove", &Service::api_node_remove, Role::admin, Mutating::yes},
      {"node.show", &Service::api_node_show, Role::reader, Mutating::no},
      {"declare", &Service::api_declare, Role::deployer, Mutating::idempotent},
      {"report", &Service::api_report, Role::reader, Mutating::no},
      {"history", &Service::api_history, Role::reader, Mutating::no},
      {"rollback", &Service::api_rollback, Role::deployer, Mutating::idempotent},
      {"module.push", &Service::api_module_push, Role::deployer, Mutating::yes},
      {"module.list", &Service::api_module_list, Role::reader, Mutating::no},
      {"module.show", &Service::api_module_show, Role::reader, Mutating::no},
      {"node.label", &Service::api_node_label, Role::deployer, Mutating::yes},
      {"assign", &Service::api_assign, Role::deployer, Mutating::yes},
      {"unassign", &Service::api_unassign, Role::admin, Mutating::yes},
      {"assignments", &Service::api_assignments, Role::reader, Mutating::no},
      {"deploy", &Service::api_deploy, Role::deployer, Mutating::idempotent},
      {"deploy.show", &Service::api_deploy_show, Role::reader, Mutating::no},
      {"publish.part", &Service::api_publish_part, Role::deployer, Mutating::yes},
      {"publish", &Service::api_publish, Role::deployer, Mutating::yes},
      {"repository.key", &Service::api_repository_key, Role::reader, Mutating::no},
      {"content.put", &Service::api_content_put, Role::deployer, Mutating::yes},
      {"pipeline.run", &Service::api_pipeline_run, Role::deployer, Mutating::idempotent},
      {"pipeline.show", &Service::api_pipeline_show, Role::reader, Mutating::no},
  };
  return kOperations;
}

const Operation* find_operation(std::string_view name) {
  const auto ops = operations();
  auto it = std::find_if(ops.begin(), ops.end(), [&](const Operation& o) { return o.name == name; });
  return it == ops.end() ? nullptr : &*it;
}

void Service::on_api(const sdk::Message& m, std::string_view op, const Value& params,
                     std::int64_t now_ms, const OperatorRecord& who, const Admission& request) {
  const Operation* operation = find_operation(op);
  if (!operation)
    return refuse(m, sdk::Error{ErrorCode::Unsupported, "unknown operation '" + shown(op) + "'", "operation"});
  Value refusal = Value::object();
  sdk::Result<Value> result = (this->*(operation->handler))(ApiCall{params, now_ms, who, request, &refusal});
  if (!result) {
    // A retry of a refused idempotent request gets the same refusal (its ticket says it is one).
    // Not for a store that is unavailable or busy: that refusal says "try again", and the retry
    // may then succeed.
    const auto c = result.error().code;
    if (request.ticket && c != ErrorCode::Transient && c != ErrorCode::Unavailable && c != ErrorCode::Timeout)
      if (auto kept = store_->answer_request(request.signer, request.nonce, error_answer(result.error(), &refusal)); !kept)
        common::logger()->warn("api operation={} operator={}: its refusal is not kept for a retry: {}", op, who.name,
                               kept.error().describe());
    // Operators' mistakes (unknown node, bad file) are normal; only the rest is a warning.
    bool quiet = c == ErrorCode::InvalidArgument || c == ErrorCode::NotFound ||
                 c == ErrorCode::AlreadyExists;
    return refuse(m, result.error(), quiet, &refusal);
  }
  if (operation->mutating != Mutating::no) common::logger()->info("api operation={} operator={}", op, who.name);
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
  Value detail = Value::object();
  if (err && err->is_object()) {
    e = sdk::Error{protocol::error_code_from_string(err->get_string("code")), err->get_string("message", "refused"),
                   err->get_string("path")};
    if (const Value* d = err->find("diagnostics")) detail.set("diagnostics", *d);
  }
  refuse(m, e, /*quiet=*/true, &detail);
}

}  // namespace detail

std::string_view to_string(Role role) noexcept {
  switch (role) {
    case Role::reader: return "reader";
    case Role::deployer: return "deployer";
    case Role::admin: return "admin";
  }
  return "admin";
}

std::optional<Role> parse_role(std::string_view name) noexcept {
  for (Role r : {Role::reader, Role::deployer, Role::admin})
    if (name == to_string(r)) return r;
  return std::nullopt;
}

std::string_view to_string(Mutating mutating) noexcept {
  switch (mutating) {
    case Mutating::no: return "no";
    case Mutating::yes: return "yes";
    case Mutating::idempotent: return "idempotent";
  }
  return "yes";
}

std::vector<OperationInfo> api_operations() {
  std::vector<OperationInfo> out;
  for (const auto& o : detail::operations()) out.push_back(OperationInfo{o.name, o.role, o.mutating});
  return out;
}

std::optional<OperationInfo> find_api_operation(std::string_view name) {
  const detail::Operation* o = detail::find_operation(name);
  if (!o) return std::nullopt;
  return OperationInfo{o->name, o->role, o->mutating};
}

std::string api_operations_markdown() {
  std::string out = "| operation | least role | mutating |\n|---|---|---|\n";
  for (const auto& o : detail::operations())
    out += "| `" + std::string(o.name) + "` | " + std::string(to_string(o.role)) + " | " +
           std::string(to_string(o.mutating)) + " |\n";
  return out;
}

// trust.h: the role check, from the table. An operation not in the table needs admin, as it did
// before the table: a reader or deployer is refused by role, an admin is answered `unsupported`.
std::string_view role_needed(std::string_view op) {
  const detail::Operation* o = detail::find_operation(op);
  return to_string(o ? o->role : Role::admin);
}

bool role_allows(std::string_view role, std::string_view op) {
  const std::optional<Role> r = parse_role(role);
  const detail::Operation* o = detail::find_operation(op);
  return r && static_cast<int>(*r) >= static_cast<int>(o ? o->role : Role::admin);
}

}  // namespace mesh::control
