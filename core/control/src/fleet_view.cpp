#include "fleet_view.h"

#include <algorithm>

#include "parallel.h"
#include "mesh/common/json.h"

namespace mesh::control::detail {

using sdk::ErrorCode;
using sdk::Value;

sdk::Result<std::vector<FleetNode>> fleet_nodes(sdk::Store& store, const std::string& module,
                                                const fleet::Selector* selector, std::size_t body_limit,
                                                std::size_t threads) {
  MESH_TRY(nodes, store.nodes());
  // The reads first, on the caller's thread (from one state when `store` is a read_many view),
  // then what is parsed from them — labels, briefings, latest revisions — on `threads`.
  std::vector<std::optional<sdk::StoredRecord>> labels(nodes.size());
  std::vector<std::optional<sdk::RevisionRecord>> latest(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    MESH_TRY(l, store.record(kLabelsNs, nodes[i].name));
    labels[i] = std::move(l);
    MESH_TRY(r, store.latest_revision(nodes[i].name));
    latest[i] = std::move(r);
  }
  std::vector<std::optional<FleetNode>> built(nodes.size());
  std::vector<std::optional<sdk::Error>> errors(nodes.size());
  parallel_for(nodes.size(), threads, [&](std::size_t i) {
    try {
      sdk::NodeRecord& n = nodes[i];
      FleetNode fn;
      Value briefing(nullptr);
      if (!n.briefing.empty())
        if (auto b = common::parse_json(n.briefing, common::JsonLimits{std::max<std::size_t>(body_limit, 1 << 20), 32}))
          briefing = std::move(*b);
      fn.context = fleet::node_context(n.name, node_labels_of(labels[i]), briefing);
      fn.selected = selector && fleet::matches(*selector, fn.context);
      auto state = node_state_of(n.name, latest[i]);
      if (!state) {
        errors[i] = state.error();
        return;
      }
      fn.carries = state->composition.modules.count(module) > 0;
      if (!fn.selected && !fn.carries) return;
      fn.state = std::move(*state);
      if (n.briefing.empty())
        fn.skip_reason = "never briefed (its eligibility is unknown: start mesh-host on it)";
      else if (!n.eligible) {
        const std::string why = briefing_failures(n.briefing);
        fn.skip_reason = "ineligible: " + (why.empty() ? std::string("its latest briefing failed") : why);
      }
      fn.record = std::move(n);
      built[i] = std::move(fn);
    } catch (const std::exception& e) {
      errors[i] = sdk::Error{ErrorCode::Internal, "node " + nodes[i].name + ": " + e.what(), {}};
    }
  });
  std::vector<FleetNode> out;
  for (std::size_t i = 0; i < built.size(); ++i) {
    if (errors[i]) return sdk::fail(std::move(*errors[i]));
    if (built[i]) out.push_back(std::move(*built[i]));
  }
  return out;
}

Value Membership::skipped_value() const {
  Value::Array out;
  for (const auto& [node, reason] : skipped) {
    Value v = Value::object();
    v.set("node", node);
    v.set("reason", reason);
    out.push_back(std::move(v));
  }
  return Value(std::move(out));
}

sdk::Result<Membership> membership(sdk::Store& store, const std::string& module, const fleet::Selector* selector,
                                   std::size_t body_limit) {
  MESH_TRY(nodes, fleet_nodes(store, module, selector, body_limit));
  Membership m;
  for (const auto& n : nodes) {
    if (!n.skip_reason.empty()) {
      m.skipped.emplace_back(n.record.name, n.skip_reason);
      continue;
    }
    if (n.selected && n.carries)
      m.keep.push_back(n.record.name);
    else if (n.selected)
      m.add.push_back(n.record.name);
    else
      m.drop.push_back(n.record.name);
  }
  return m;
}

sdk::Result<fleet::Selector> assigned_selector(sdk::Store& store, const std::string& module) {
  MESH_TRY(rec, store.record(kAssignmentNs, module));
  if (!rec)
    return sdk::fail(ErrorCode::NotFound,
                     "module " + module + " is not assigned to any node: mesh assign " + module + " SELECTOR first",
                     "module");
  auto v = common::parse_json(rec->value, common::JsonLimits{1 << 20, 8});
  if (!v) return sdk::fail(ErrorCode::Internal, "the assignment of " + module + " is unreadable");
  return fleet::parse_selector(v->get_string("selector"));
}

}  // namespace mesh::control::detail
