// The operator API's writes of revisions (docs/protocol.md "API"): declare and rollback, both by
// one path, declare_composed() (the node's own part and its module parts, decision record 63):
// the store write (its answer stored with the request's nonce in the same transaction, decision
// record 28), then the signed push on mesh.decl.<node>.
#include <spdlog/spdlog.h>

#include <map>

#include "fields.h"
#include "service.h"
#include "service_util.h"
#include "mesh/common/crypto.h"
#include "mesh/common/json.h"
#include "mesh/common/logging.h"
#include "mesh/common/parts.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/control/declaration.h"
#include "node_schemas.h"
#include "fleet_state.h"
#include "mesh/fleet/fleet.h"

namespace mesh::control::detail {

using sdk::ErrorCode;
using sdk::Value;

sdk::Result<Value> Service::declare_composed(const std::string& node,
                                             const std::function<sdk::Result<NodePlan>(const NodeState&)>& build,
                                             std::int64_t now_ms, const Admission* request, const Value* extra) {
  auto answer_of = [&](const sdk::DeliveryRecord& d) { return delivery_answer(d, extra); };
  // Compare-and-swap on the node's latest revision: a deploy writing the node meanwhile makes
  // the store refuse (FailedPrecondition, nothing written); the plan is made again from what it
  // wrote, so that its module part is kept (decision record 64).
  for (int attempt = 1;; ++attempt) {
    MESH_TRY(state, node_state(*store_, node));
    MESH_TRY(plan, build(state));
    plan.node = node;
    plan.expected_revision = state.revision;
    auto written = write_plans({plan}, {}, now_ms, request, answer_of);
    if (!written && written.error().code == ErrorCode::FailedPrecondition && attempt < kCasAttempts) {
      common::logger()->debug("declare node={}: revision {} moved on meanwhile; composed again (attempt {})", node,
                              state.revision, attempt + 1);
      continue;
    }
    MESH_TRY(delivery, std::move(written));
    if (delivery.targets.empty())
      return sdk::fail(ErrorCode::Internal, "the store returned a delivery without targets");
    common::logger()->info("declared node={} revision={} delivery={}", node, delivery.targets.front().revision,
                           delivery.id);
    return answer_of(delivery);
  }
}

sdk::Result<Value> Service::api_declare(const ApiCall& call) {
  const Value& p = call.params;
  const std::int64_t now_ms = call.now_ms;
  const Admission& request = call.request;
  Fields f(p);
  MESH_TRY(node, node_param(f));
  MESH_TRY(text, f.string("declaration"));
  MESH_TRY(decl, common::parse_json(text, common::JsonLimits{options_.max_assembled, 32}));
  // Checked against the node's provider schemas when it sent them with its briefing, for shape
  // only otherwise (decision record 48): every problem in one refusal, nothing stored.
  Value extra = Value::object();
  MESH_TRY(checked, checked_for_node(*store_, decl, node, call.refusal, extra));
  (void)checked;
  MESH_TRY(record, enrolled(node));
  // Declaring to an ineligible node still works (the operator decides); the result says why it
  // is ineligible so that `mesh declare` can warn.
  extra.set("eligible", record.eligible);
  if (!record.eligible) {
    Value::Array failing;
    if (auto b = common::parse_json(record.briefing, common::JsonLimits{body_limit(), 32}); b && b->find("lines"))
      for (const auto& l : b->find("lines")->as_array())
        if (l.get_string("outcome") == "fail") failing.push_back(l);
    extra.set("briefing_failures", Value(std::move(failing)));
  }
  // The file is the node's own part; the module parts of its latest revision are kept (a
  // resource in both is refused, naming both), and the whole is checked again when it has any.
  const Value own = *decl.find("resources");
  const std::string who = call.who.name;
  return declare_composed(
      node,
      [&](const NodeState& state) -> sdk::Result<NodePlan> {
        NodePlan plan;
        plan.composition = state.composition;
        plan.composition.own = resource_keys(own);
        plan.composition.operator_name = who;
        plan.composition.cause = "declare";
        plan.composition.deploy = 0;
        if (state.composition.modules.empty()) {
          plan.resources = own;
          return plan;
        }
        std::vector<fleet::Source> sources{fleet::Source{"own", own}};
        for (const auto& [name, part] : state.composition.modules)
          sources.push_back(fleet::Source{"module " + name + "@" + part.version,
                                          pick_resources(state.resources, part.resources)});
        MESH_TRY(composed, fleet::compose(sources));
        Value doc = Value::object();
        doc.set("node", node);
        doc.set("resources", composed);
        Value more = Value::object();
        MESH_TRY(ok, checked_for_node(*store_, doc, node, call.refusal, more));
        (void)ok;
        plan.resources = std::move(composed);
        return plan;
      },
      now_ms, &request, &extra);
}

sdk::Result<Value> Service::api_rollback(const ApiCall& call) {
  const Value& p = call.params;
  const std::int64_t now_ms = call.now_ms;
  const Admission& request = call.request;
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
  // The old revision was checked when it was declared, perhaps before the node sent its schemas
  // (or with other providers): checked again against what the node has now.
  Value doc = Value::object();
  doc.set("node", node);
  doc.set("resources", *parsed->find("resources"));
  Value extra = Value::object();
  MESH_TRY(checked, checked_for_node(*store_, doc, node, call.refusal, extra));
  (void)checked;
  extra.set("to", static_cast<std::int64_t>(to));
  // R's whole composition comes back: its own part and its module versions (decision record 63).
  const Value resources = *parsed->find("resources");
  Composition restored = parse_composition(old->composition, resources);
  restored.operator_name = call.who.name;
  restored.cause = "rollback";
  restored.deploy = 0;
  {
    Value modules = Value::object();
    for (const auto& [name, part] : restored.modules) modules.set(name, part.version);
    extra.set("modules", std::move(modules));
  }
  MESH_TRY(result, declare_composed(
                       node,
                       [&](const NodeState&) -> sdk::Result<NodePlan> {
                         NodePlan plan;
                         plan.resources = resources;
                         plan.composition = restored;
                         return plan;
                       },
                       now_ms, &request, &extra));
  common::logger()->info("rollback node={} to={} revision={}", node, to,
                         result.get_int("revision", 0));
  return result;
}

}  // namespace mesh::control::detail
