// The operator API's reads (docs/protocol.md "API"): nodes, node.show, report (the delivery
// report, report.cpp) and history. Nothing here writes.
#include "fields.h"
#include "fleet_state.h"
#include "service.h"
#include "service_util.h"
#include "mesh/common/json.h"
#include "node_facts.h"
#include "mesh/control/report.h"

namespace mesh::control::detail {
namespace {

using sdk::ErrorCode;
using sdk::Value;

constexpr std::uint32_t kShowApplies = 10;

Value node_summary(const sdk::NodeRecord& n, std::int64_t now_ms) {
  Value v = Value::object();
  v.set("name", n.name);
  // A briefing is contact too (node_facts.h).
  const auto contact = last_contact_ms(n);
  v.set("last_contact", opt_ts(contact));
  v.set("age_s", age_s(contact, now_ms));
  v.set("applied_revision", int_value(n.applied_revision));
  // The pending revision: declared but not (yet) applied when above applied_revision.
  v.set("declared_revision", int_value(n.declared_revision));
  v.set("last_outcome", n.last_outcome);
  // Never briefed: eligibility is unknown, not "yes".
  v.set("eligible", n.briefing.empty() ? Value(nullptr) : Value(n.eligible));
  // The facts of its latest briefing (decision record 54); {} before one with facts.
  v.set("facts", stored_facts(n.briefing));
  if (n.removed_at_ms) v.set("removed_at", ts(*n.removed_at_ms));
  // The last heartbeat's state is a past observation: shown with when it was received.
  v.set("state", n.host_state);
  v.set("state_at", opt_ts(n.heartbeat_at_ms));
  v.set("state_age_s", age_s(n.heartbeat_at_ms, now_ms));
  // The running host's version (its package's, decision 76), from its newest heartbeat or its
  // enrolment; "" before either.
  v.set("host_version", n.host_version);
  return v;
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

}  // namespace

sdk::Result<sdk::NodeRecord> Service::enrolled(const std::string& node) {
  auto r = store_->node(node);
  if (!r && r.error().code == ErrorCode::NotFound)
    return sdk::fail(ErrorCode::NotFound,
                     "node " + node + " is not enrolled (issue a token with: mesh token issue " +
                         node + ")",
                     "node");
  return r;
}

sdk::Result<Value> Service::api_nodes(const ApiCall& call) {
  const Value& p = call.params;
  const std::int64_t now_ms = call.now_ms;
  MESH_TRY(nodes, listed_nodes(p));
  MESH_TRY(labels, all_shown_labels(*store_));
  Value::Array out;
  for (const auto& n : nodes) {
    out.push_back(node_summary(n, now_ms));
    auto l = labels.find(n.name);
    out.back().set("labels", l == labels.end() ? Value::object() : l->second);
  }
  return Value(std::move(out));
}

sdk::Result<Value> Service::api_node_show(const ApiCall& call) {
  const Value& p = call.params;
  const std::int64_t now_ms = call.now_ms;
  Fields f(p);
  MESH_TRY(name, node_param(f));
  MESH_TRY(n, enrolled(name));
  MESH_TRY(owned, store_->owned(name));
  MESH_TRY(applies, store_->apply_reports(name, kShowApplies));
  MESH_TRY(drift, store_->last_drift(name, true));
  MESH_TRY(scan, store_->last_drift(name, false));

  MESH_TRY(labels, shown_labels(*store_, name));

  Value v = node_summary(n, now_ms);
  v.set("labels", std::move(labels));
  v.set("enrolled_at", ts(n.enrolled_at_ms));
  v.set("generation", int_value(n.generation));
  v.set("owned", string_list(owned));
  Value::Array list;
  for (const auto& a : applies) {
    Value e = Value::object();
    e.set("revision", int_value(a.revision));
    e.set("outcome", a.outcome);
    e.set("at", ts(a.at_ms));
    // null when no one resource is meant (applied, or the whole declaration refused).
    e.set("resource", a.resource.empty() ? Value(nullptr) : Value(a.resource));
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

sdk::Result<Value> Service::api_report(const ApiCall& call) {
  const Value& p = call.params;
  const std::int64_t now_ms = call.now_ms;
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
  return delivery_report(delivery, now_ms);
}

sdk::Result<Value> Service::api_history(const ApiCall& call) {
  const Value& p = call.params;
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
    // What the revision carried (decision record 63): its module versions, who asked and why.
    // A revision written before compositions were kept is all own, by nobody known.
    Value parsed_body(nullptr);
    if (auto b = common::parse_json(r.body, common::JsonLimits{64 << 20, 32}); b && b->find("resources"))
      parsed_body = *b->find("resources");
    const Composition c = parse_composition(r.composition, parsed_body);
    Value modules = Value::object();
    for (const auto& [name, part] : c.modules) modules.set(name, part.version);
    v.set("modules", std::move(modules));
    v.set("own", static_cast<std::int64_t>(c.own.size()));
    v.set("operator", c.operator_name.empty() ? Value(nullptr) : Value(c.operator_name));
    v.set("cause", c.cause.empty() ? Value(nullptr) : Value(c.cause));
    v.set("deploy", c.deploy ? int_value(c.deploy) : Value(nullptr));
    out.push_back(std::move(v));
  }
  return Value(std::move(out));
}

}  // namespace mesh::control::detail
