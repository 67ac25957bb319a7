// The deploy operation (docs/protocol.md "API", decision records 64-66): a module version to the
// nodes its assignment selects, as ONE store write. For each concerned node (fleet_view.h): its
// new composition (the module at the version; a node no longer selected loses the module's
// resources), rendered for the node (mesh::fleet), composed with its own part and its other
// modules, checked against the node's provider schemas — any problem refuses the whole deploy,
// naming the node, before anything is written. Then one Store::declare_with of every changed
// node with a compare-and-swap on the revision it was computed from (lost: computed again), the
// deploy record and the request's answer, then the pushes. `deploy.show` is the deploy report:
// the deploy record with the delivery report of its delivery.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "fleet_state.h"
#include "fleet_view.h"
#include "node_facts.h"
#include "node_schemas.h"
#include "parallel.h"
#include "service.h"
#include "service_util.h"
#include "mesh/common/duration.h"
#include "mesh/common/json.h"
#include "mesh/common/logging.h"
#include "mesh/control/report.h"
#include "mesh/declaration/declaration.h"
#include "mesh/fleet/fleet.h"

namespace mesh::control::detail {

using sdk::ErrorCode;
using sdk::Value;

sdk::Result<Value> Service::delivery_report(const sdk::DeliveryRecord& delivery, std::int64_t now_ms) {
  std::vector<TargetStatus> targets;
  targets.reserve(delivery.targets.size());
  // One read per answered target, up to five for the others: through Store::read_many (decision
  // record 101), so that a store whose every read is a round trip (jetstream-kv) makes one for
  // the whole report, and the sqlite store one read transaction.
  auto collect = [&](sdk::Store& store) -> sdk::Result<void> {
    for (const auto& t : delivery.targets) {
      TargetStatus s;
      s.target = t;
      MESH_TRY(report, store.apply_report(t.node, t.revision));
      s.report = std::move(report);
      if (!s.report || s.report->outcome == "superseded") {
        MESH_TRY(next, store.next_revision(t.node, t.revision));
        s.next = next;
        if (next) {
          MESH_TRY(next_report, store.apply_report(t.node, next->revision));
          s.next_report = std::move(next_report);
          if (!s.next_report) {
            MESH_TRY(after, store.next_revision(t.node, next->revision));
            s.next_superseded = after.has_value();
          }
        }
      }
      // The node record (its last contact, its applied revision) is shown only for a target
      // that has no answer of its own yet (outstanding, superseded): a finished deploy of 50,000
      // nodes reads no node record at all.
      const bool answered = s.report && s.report->revision == t.revision && s.report->outcome != "superseded";
      if (!answered) {
        auto n = store.node(t.node);
        if (n)
          s.node = std::move(*n);
        else if (n.error().code != ErrorCode::NotFound)
          return sdk::fail(n.error());
      }
      targets.push_back(std::move(s));
    }
    return {};
  };
  if (options_.store_abi_minor >= 3) {
    MESH_TRY(store_->read_many(collect));
  } else {
    MESH_TRY(collect(*store_));
  }
  return build_delivery_report(delivery, targets, now_ms);
}

sdk::Result<Value> Service::held_outcomes(const Value& held, std::int64_t now_ms) {
  sdk::DeliveryRecord d;
  if (held.is_array())
    for (const auto& h : held.as_array())
      if (h.is_object() && !h.get_string("node").empty() && h.get_int("revision", 0) > 0)
        d.targets.push_back(sdk::DeliveryTarget{h.get_string("node"), static_cast<std::uint64_t>(h.get_int("revision", 0))});
  MESH_TRY(report, delivery_report(d, now_ms));
  Value out = Value::object();
  for (const char* k : {"applied", "failed", "outstanding", "superseded"}) {
    Value::Array entries;
    if (const Value* l = report.find(k); l && l->is_array())
      for (Value e : l->as_array()) {
        e.set("unchanged", true);
        entries.push_back(std::move(e));
      }
    out.set(k, Value(std::move(entries)));
  }
  return out;
}

namespace {

// Appends the outcome lists of `from` (applied, failed, outstanding, superseded) to `into`'s.
void append_outcomes(const Value& from, Value& into) {
  for (const char* k : {"applied", "failed", "outstanding", "superseded"}) {
    const Value* l = from.find(k);
    if (!l || !l->is_array() || l->as_array().empty()) continue;
    Value list = into.find(k) && into.find(k)->is_array() ? *into.find(k) : Value::array();
    for (const auto& e : l->as_array()) list.as_array().push_back(e);
    into.set(k, std::move(list));
  }
}

Value changes_value(const fleet::Changes& c) {
  Value v = Value::object();
  v.set("added", string_list(c.added));
  v.set("changed", string_list(c.changed));
  v.set("removed", string_list(c.removed));
  return v;
}

// The deploy report's lists that a delivery report does not have, from the deploy record.
void copy_deploy_fields(const Value& record, Value& out) {
  for (const char* k : {"deploy", "module", "version", "operator", "at", "selector", "state", "staged", "superseded_by"})
    if (const Value* v = record.find(k)) out.set(k, *v);
  for (const char* k : {"skipped", "unchanged", "dropped", "waves"}) {
    const Value* v = record.find(k);
    out.set(k, v ? *v : Value::array());
  }
  const Value* h = record.find("halted");
  out.set("halted", h ? *h : Value(nullptr));
}

}  // namespace

sdk::Result<Value> Service::api_deploy(const ApiCall& call) {
  Fields f(call.params);
  MESH_TRY(name, f.string("module"));
  MESH_TRY(version, f.string("version"));
  MESH_TRY(dry_run, f.bool_or("dry_run", false));
  std::optional<StagedOptions> staged;
  if (const Value* w = call.params.find("waves"); w && !w->is_null()) {
    StagedOptions o;
    MESH_TRY(waves, f.string("waves"));
    MESH_TRY(check, wave_sizes(waves, 100));
    (void)check;
    o.waves = waves;
    MESH_TRY(min, f.string_or("min_applied", ""));
    if (!min.empty()) {
      MESH_TRY(m, min_applied_of(min, 100));
      (void)m;
    }
    o.min_applied = min;
    MESH_TRY(timeout, f.string_or("wave_timeout", "10m"));
    auto d = common::parse_duration(timeout);
    if (!d || d->count() <= 0)
      return sdk::fail(invalid("wave_timeout", "'" + shown(timeout) + "' is not a positive duration (500ms, 15s, 2m, 1h)"));
    o.wave_timeout_ms = d->count();
    staged = o;
  } else if (call.params.find("min_applied") || call.params.find("wave_timeout")) {
    return sdk::fail(invalid("waves", "min_applied and wave_timeout are for a staged deploy (waves)"));
  }
  MESH_TRY(result, deploy_module(name, version, dry_run, call.who.name, call.now_ms,
                                 call.request.ticket ? &call.request : nullptr, call.refusal,
                                 staged ? &*staged : nullptr));
  // A dry run writes nothing, so no write stored its answer: kept now, for a retry of the request.
  if (dry_run && call.request.ticket && !call.request.nonce.empty())
    if (auto kept = store_->answer_request(call.request.signer, call.request.nonce, ok_answer(result)); !kept)
      common::logger()->warn("deploy dry run: its answer is not kept for a retry: {}", kept.error().describe());
  return result;
}

namespace {

// What planning one node gave (plan_deploy); merged in the nodes' order.
struct NodeOutcome {
  enum class Kind { Skipped, Unchanged, Planned, Refused } kind = Kind::Refused;
  NodePlan plan;
  sdk::Error error{ErrorCode::Internal, "not planned", {}};
  Value refusal = Value::object();  // the refusal's details (diagnostics), when Refused
  Value planned;                    // dry run: its entry of `nodes`
};

// Provider schemas parsed once per distinct stored text: a fleet's nodes mostly send the same
// list, and parsing it was a part of every node's check. Thread-safe.
class SchemaCache {
 public:
  using Parsed = std::shared_ptr<const std::optional<std::vector<sdk::Schema>>>;
  Parsed get(const std::string& node, const std::optional<std::string>& text) {
    static const Parsed none = std::make_shared<const std::optional<std::vector<sdk::Schema>>>();
    if (!text) return none;
    {
      std::lock_guard lock(mu_);
      if (auto it = parsed_.find(*text); it != parsed_.end()) return it->second;
    }
    // Parsed outside the lock (two threads may parse one text; either result is the same).
    auto v = common::parse_json(*text, common::JsonLimits{kMaxSchemasBytes, 32});
    auto list = v ? schemas_from_json(*v) : sdk::Result<std::vector<sdk::Schema>>(sdk::fail(v.error()));
    Parsed out = none;
    if (list)
      out = std::make_shared<const std::optional<std::vector<sdk::Schema>>>(std::move(*list));
    else
      common::logger()->warn("node={}: its stored provider schemas do not read ({}); checking for shape only", node,
                             list.error().describe());
    std::lock_guard lock(mu_);
    return parsed_.emplace(*text, out).first->second;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, Parsed> parsed_;
};

// newuser N9: a diagnostic's path is the composed declaration's ("resources[1].type" when the
// module's own one resource came second); the operator wrote the module (or the node's own
// declaration): the path is made that source's own, and `label` set to the source's label.
std::string source_path(const std::vector<fleet::Source>& sources, const std::string& path, std::string* label) {
  static constexpr std::string_view kPrefix = "resources[";
  if (path.rfind(kPrefix, 0) != 0) return path;
  const auto close = path.find(']');
  if (close == std::string::npos) return path;
  std::size_t k = 0;
  for (std::size_t i = kPrefix.size(); i < close; ++i) {
    if (path[i] < '0' || path[i] > '9' || k > (std::size_t{1} << 40)) return path;
    k = k * 10 + static_cast<std::size_t>(path[i] - '0');
  }
  for (const auto& source : sources) {
    const std::size_t n = source.resources.is_array() ? source.resources.as_array().size() : 0;
    if (k < n) {
      *label = source.label == "own" ? "the node's own declaration" : source.label;
      return std::string(kPrefix) + std::to_string(k) + path.substr(close);
    }
    k -= n;
  }
  return path;
}

}  // namespace

sdk::Result<DeployPlan> Service::plan_deploy(const fleet::Module& module, const fleet::Selector* selector,
                                             const std::string& operator_name, bool dry_run,
                                             const std::vector<std::string>* only, Value* refusal) {
  const std::string& name = module.name;
  const std::string label = "module " + module.name + "@" + module.version;
  DeployPlan out;
  // Every read of the plan from one state, through one catch-up with jetstream-kv (decision
  // records 101, 120): the fleet's nodes and the provider schemas of each one to plan.
  std::vector<FleetNode> nodes;
  std::vector<std::optional<std::string>> schema_texts;
  auto reads = [&](sdk::Store& view) -> sdk::Result<void> {
    MESH_TRY(found, fleet_nodes(view, name, selector, body_limit(), fan_out_threads(options_.workers)));
    nodes = std::move(found);
    schema_texts.assign(nodes.size(), std::nullopt);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const FleetNode& n = nodes[i];
      if (!n.skip_reason.empty()) continue;
      if (only && std::find(only->begin(), only->end(), n.record.name) == only->end()) continue;
      MESH_TRY(text, view.provider_schemas(n.record.name));
      schema_texts[i] = std::move(text);
    }
    return {};
  };
  if (options_.store_abi_minor >= 3) {
    MESH_TRY(store_->read_many(reads));
  } else {
    MESH_TRY(reads(*store_));
  }
  if (!selector && nodes.empty()) {
    MESH_TRY(again, assigned_selector(*store_, name));  // the NotFound that says how to assign
    (void)again;
  }
  // An assignment that selects no node is a mistake (a typo in a label) far more often than an
  // intent: refused, dry run or not, before anything is written (decision record 68). A wave
  // planned again (`only`) is not a new selection.
  if (selector && !only && std::none_of(nodes.begin(), nodes.end(), [](const FleetNode& n) { return n.selected; })) {
    MESH_TRY(enrolled, store_->nodes());
    std::string message = label + ": its assignment `" + fleet::to_string(*selector) + "` selects no node (" +
                          std::to_string(enrolled.size()) + (enrolled.size() == 1 ? " node" : " nodes") +
                          " enrolled); nothing written";
    if (!nodes.empty())
      message += " (it would take the module off " + std::to_string(nodes.size()) +
                 (nodes.size() == 1 ? " node" : " nodes") + " that carry it: to do that, mesh unassign " + name +
                 " and deploy again)";
    return sdk::fail(ErrorCode::InvalidArgument, std::move(message));
  }

  // Each node's composition, render and schema check on a few threads (decision record 120):
  // pure work on what was read above, one slot per node.
  std::vector<char> wanted(nodes.size(), 1);
  if (only)
    for (std::size_t i = 0; i < nodes.size(); ++i)
      wanted[i] = std::find(only->begin(), only->end(), nodes[i].record.name) != only->end();
  std::vector<NodeOutcome> outcomes(nodes.size());
  SchemaCache schemas;
  auto plan_one = [&](std::size_t i) {
    NodeOutcome& o = outcomes[i];
    if (!wanted[i]) return;
    try {
      const FleetNode& n = nodes[i];
      const std::string& node = n.record.name;
      if (!n.skip_reason.empty()) {
        o.kind = NodeOutcome::Kind::Skipped;
        return;
      }
      const Composition& old = n.state.composition;
      NodePlan plan;
      plan.node = node;
      plan.expected_revision = n.state.revision;
      plan.composition = old;
      plan.composition.operator_name = operator_name;
      plan.composition.cause = "deploy";
      std::vector<fleet::Source> sources{fleet::Source{"own", pick_resources(n.state.resources, old.own)}};
      for (const auto& [other, part] : old.modules)
        if (other != name)
          sources.push_back(fleet::Source{"module " + other + "@" + part.version,
                                          pick_resources(n.state.resources, part.resources)});
      if (n.selected) {
        auto rendered = fleet::render_module(module, n.context);
        if (!rendered) {
          o.error = rendered.error();
          return;
        }
        plan.composition.modules[name] = ModulePart{module.version, resource_keys(*rendered)};
        sources.push_back(fleet::Source{label, std::move(*rendered)});
      } else {
        plan.composition.modules.erase(name);
      }
      auto composed = fleet::compose(sources);
      if (!composed) {
        o.error = composed.error();
        o.error.message = "node " + node + ": " + o.error.message;
        return;
      }
      plan.resources = std::move(*composed);
      if (plan.resources == n.state.resources && plan.composition.modules == old.modules && n.state.revision != 0) {
        o.kind = NodeOutcome::Kind::Unchanged;
        return;
      }
      // Every module resource against this node's provider schemas, before any write.
      Value doc = Value::object();
      doc.set("node", node);
      doc.set("resources", plan.resources);
      auto found = check_for_node(doc, node, *schemas.get(node, schema_texts[i]));
      if (!found.diagnostics.empty()) {
        // Each problem named by its source and that source's own index, not the composed one.
        std::string first_label;
        std::vector<std::string> from(found.diagnostics.size());
        for (std::size_t k = 0; k < found.diagnostics.size(); ++k) {
          auto& d = found.diagnostics[k];
          const std::string own = source_path(sources, d.path, &from[k]);
          if (from[k].empty()) continue;
          const std::string composed = d.path.substr(0, d.path.find(']') + 1);
          if (d.text.rfind(composed, 0) == 0)
            d.text = from[k] + " " + own.substr(0, own.find(']') + 1) + d.text.substr(composed.size());
          d.path = own;
          if (k == 0) first_label = from[k];
        }
        Value diagnostics = declaration::to_json(found.diagnostics);
        if (diagnostics.is_array())
          for (std::size_t k = 0; k < diagnostics.as_array().size() && k < from.size(); ++k)
            if (!from[k].empty()) diagnostics.as_array()[k].set("source", from[k]);  // where its path is
        o.refusal.set("diagnostics", std::move(diagnostics));
        o.refusal.set("checked", found.schemas_checked ? "schemas" : "shape");
        o.refusal.set("node", node);
        o.error = refusal_of(found.diagnostics);
        o.error.message = "node " + node + ": " + (first_label.empty() ? label : first_label) + ": " + o.error.message;
        return;
      }
      if (dry_run) {
        Value p = Value::object();
        p.set("node", node);
        p.set("revision", int_value(n.state.revision));
        p.set("action", n.selected ? (n.carries ? "update" : "add") : "drop");
        const Value changes = changes_value(fleet::diff(n.state.resources, plan.resources));
        for (const auto& [k, v] : changes.as_object()) p.set(k, v);
        o.planned = std::move(p);
      }
      o.plan = std::move(plan);
      o.kind = NodeOutcome::Kind::Planned;
    } catch (const std::exception& e) {
      o.kind = NodeOutcome::Kind::Refused;
      o.error = sdk::Error{ErrorCode::Internal, "node " + nodes[i].record.name + ": " + e.what(), {}};
    }
  };
  parallel_for(nodes.size(), fan_out_threads(options_.workers), plan_one);

  // In the nodes' order, as one thread would have: the first refusal refuses the whole deploy.
  std::vector<NodePlan>& plans = out.plans;
  Value &skipped = out.skipped, &unchanged = out.unchanged, &dropped = out.dropped, &planned = out.planned;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!wanted[i]) continue;
    const FleetNode& n = nodes[i];
    const std::string& node = n.record.name;
    NodeOutcome& o = outcomes[i];
    out.contacts[node] = last_contact_ms(n.record);
    switch (o.kind) {
      case NodeOutcome::Kind::Skipped: {
        Value s = Value::object();
        s.set("node", node);
        s.set("reason", n.skip_reason);
        skipped.as_array().push_back(std::move(s));
        break;
      }
      case NodeOutcome::Kind::Unchanged: {
        unchanged.as_array().emplace_back(node);
        Value h = Value::object();
        h.set("node", node);
        h.set("revision", int_value(n.state.revision));
        out.held.as_array().push_back(std::move(h));
        break;
      }
      case NodeOutcome::Kind::Refused:
        if (refusal && refusal->is_object())
          for (const auto& [k, v] : o.refusal.as_object()) refusal->set(k, v);
        return sdk::fail(std::move(o.error));
      case NodeOutcome::Kind::Planned:
        if (!n.selected) dropped.as_array().emplace_back(node);
        if (dry_run) planned.as_array().push_back(std::move(o.planned));
        plans.push_back(std::move(o.plan));
        break;
    }
  }
  return out;
}

sdk::Result<Value> Service::deploy_module(const std::string& name, const std::string& version, bool dry_run,
                                          const std::string& operator_name, std::int64_t now_ms,
                                          const Admission* request, Value* refusal, const StagedOptions* staged) {
  if (!fleet::valid_module_name(name)) return sdk::fail(invalid("module", "'" + shown(name) + "' is not a module name"));
  MESH_TRY(module, load_module(*store_, name, version));

  std::optional<fleet::Selector> selector;
  std::string selector_text;
  if (auto s = assigned_selector(*store_, name); s) {
    selector = std::move(*s);
    selector_text = fleet::to_string(*selector);
  } else if (s.error().code != ErrorCode::NotFound) {
    return sdk::fail(s.error());
  }

  std::uint64_t id = 0;
  for (int attempt = 1;; ++attempt) {
    MESH_TRY(planned_all, plan_deploy(module, selector ? &*selector : nullptr, operator_name, dry_run, nullptr, refusal));
    std::vector<NodePlan>& plans = planned_all.plans;
    Value &skipped = planned_all.skipped, &unchanged = planned_all.unchanged, &dropped = planned_all.dropped,
          &planned = planned_all.planned;
    if (dry_run) {
      Value out = Value::object();
      out.set("dry_run", true);
      out.set("deploy", Value(nullptr));
      out.set("module", module.name);
      out.set("version", module.version);
      out.set("selector", selector ? Value(selector_text) : Value(nullptr));
      out.set("nodes", std::move(planned));
      out.set("unchanged", std::move(unchanged));
      out.set("dropped", std::move(dropped));
      out.set("skipped", std::move(skipped));
      // Each unchanged node as the revision it holds stands, as the deploy would report it.
      MESH_TRY(held, held_outcomes(planned_all.held, now_ms));
      for (const char* k : {"applied", "failed", "outstanding", "superseded"}) out.set(k, Value::array());
      append_outcomes(held, out);
      return out;
    }

    if (id == 0) {
      MESH_TRY(next, store_->next_sequence("deploy"));
      id = next;
    }
    for (auto& p : plans) p.composition.deploy = id;
    // A staged deploy writes its first wave now; the others are written by advance_deploys.
    std::vector<std::vector<std::string>> groups;
    if (staged && !plans.empty()) {
      MESH_TRY(sizes, wave_sizes(staged->waves, plans.size()));
      std::size_t from = 0;
      for (std::size_t to : sizes) {
        std::vector<std::string> g;
        for (std::size_t i = from; i < to; ++i) g.push_back(plans[i].node);
        groups.push_back(std::move(g));
        from = to;
      }
      plans.resize(sizes.front());
    }

    Value record = Value::object();
    record.set("deploy", int_value(id));
    record.set("module", module.name);
    record.set("version", module.version);
    record.set("digest", module.digest);
    record.set("operator", operator_name);
    record.set("at", ts(now_ms));
    record.set("selector", selector ? Value(selector_text) : Value(nullptr));
    record.set("skipped", skipped);
    record.set("unchanged", unchanged);
    record.set("held", planned_all.held);
    record.set("dropped", dropped);
    record.set("halted", Value(nullptr));
    record.set("state", groups.size() > 1 ? "running" : "done");
    if (staged) {
      Value st = Value::object();
      st.set("waves", staged->waves);
      st.set("min_applied", staged->min_applied.empty() ? Value(nullptr) : Value(staged->min_applied));
      st.set("wave_timeout_ms", staged->wave_timeout_ms);
      record.set("staged", std::move(st));
    }
    auto record_with = [record, &groups, now_ms](const sdk::DeliveryRecord& d) {
      Value r = record;
      Value::Array waves;
      if (groups.size() > 1) {
        for (std::size_t i = 0; i < groups.size(); ++i) {
          Value w = Value::object();
          w.set("wave", static_cast<std::int64_t>(i + 1));
          w.set("delivery", i == 0 && d.id ? int_value(d.id) : Value(nullptr));
          w.set("nodes", string_list(groups[i]));
          if (i == 0) {
            w.set("started_at", ts(now_ms));
            w.set("started_at_ms", now_ms);
          }
          waves.push_back(std::move(w));
        }
      } else if (d.id != 0) {
        Value w = Value::object();
        w.set("wave", 1);
        w.set("delivery", int_value(d.id));
        w.set("nodes", delivery_nodes(d));
        waves.push_back(std::move(w));
      }
      r.set("waves", Value(std::move(waves)));
      return r;
    };
    // The unchanged nodes' outcomes: those of the revisions they hold, read before the write.
    MESH_TRY(held_now, held_outcomes(planned_all.held, now_ms));
    // The answer: the deploy report as the write leaves it (every written node outstanding,
    // each unchanged one as its revision stands).
    auto answer_of = [&](const sdk::DeliveryRecord& d) {
      Value out = Value::object();
      copy_deploy_fields(record_with(d), out);
      out.set("delivery", d.id ? Value(int_value(d.id)) : Value(nullptr));
      out.set("declared", static_cast<std::int64_t>(d.targets.size()));
      out.set("applied", Value::array());
      out.set("failed", Value::array());
      Value::Array outstanding;
      for (const auto& t : d.targets) {
        Value o = Value::object();
        o.set("node", t.node);
        o.set("revision", int_value(t.revision));
        std::optional<std::int64_t> contact;
        if (auto c = planned_all.contacts.find(t.node); c != planned_all.contacts.end()) contact = c->second;
        o.set("last_contact", opt_ts(contact));
        o.set("age_s", age_s(contact, now_ms));
        outstanding.push_back(std::move(o));
      }
      out.set("outstanding", Value(std::move(outstanding)));
      out.set("superseded", Value::array());
      append_outcomes(held_now, out);
      return out;
    };
    sdk::RecordWrite rec;
    rec.ns = kDeployNs;
    rec.key = padded_id(id);
    rec.expected_version = 0;
    rec.render = [&](const sdk::DeliveryRecord& d) { return record_with(d).to_json(); };
    std::vector<sdk::RecordWrite> recs{rec};
    if (groups.size() > 1) recs.push_back(sdk::RecordWrite{kDeployActiveNs, padded_id(id), "{}", 0, false, {}});
    // This deploy is now the module's newest (a staged one still running stops at its next round).
    MESH_TRY(latest, store_->record(kDeployLatestNs, name));
    Value newest = Value::object();
    newest.set("deploy", int_value(id));
    recs.push_back(sdk::RecordWrite{kDeployLatestNs, name, newest.to_json(), latest ? latest->version : 0, false, {}});
    sdk::Result<sdk::DeliveryRecord> written = sdk::fail(ErrorCode::Internal, "not written");
    if (plans.empty()) {
      // Nothing changes on any node: the deploy record (and the answer) alone.
      if (!request || request->nonce.empty())
        written = store_->declare_with({}, recs, now_ms, options_.retain, std::nullopt);
      else
        written = store_->declare_with(
            {}, recs, now_ms, options_.retain,
            sdk::RequestAnswer{request->signer, request->nonce,
                               [&](const sdk::DeliveryRecord& d) { return ok_answer(answer_of(d)); }});
    } else {
      written = write_plans(plans, recs, now_ms, request, answer_of);
    }
    if (!written && written.error().code == ErrorCode::FailedPrecondition && attempt < kCasAttempts) {
      common::logger()->info("deploy {} module={} version={}: a node's revision moved on meanwhile; composed again "
                             "(attempt {})",
                             id, name, version, attempt + 1);
      continue;
    }
    if (!written && written.error().code == ErrorCode::FailedPrecondition)
      return sdk::fail(ErrorCode::Transient, "deploy " + std::to_string(id) + ": other writes to the same nodes kept "
                                                 "winning (" + written.error().message + "); nothing written, try again");
    MESH_TRY(delivery, std::move(written));
    common::logger()->info("deploy {} module={} version={} operator={} delivery={} nodes={} skipped={} unchanged={}", id,
                           name, version, operator_name, delivery.id, delivery.targets.size(),
                           skipped.as_array().size(), unchanged.as_array().size());
    if (groups.size() > 1) wake_stages(nullptr);  // its first wave is to be watched (decision record 71)
    return answer_of(delivery);
  }
}

sdk::Result<Value> Service::api_deploy_show(const ApiCall& call) {
  Fields f(call.params);
  MESH_TRY(id, f.integer("deploy", 1));
  return deploy_report(static_cast<std::uint64_t>(id), call.now_ms);
}

sdk::Result<Value> Service::deploy_report(std::uint64_t id, std::int64_t now_ms) {
  MESH_TRY(rec, store_->record(kDeployNs, padded_id(id)));
  if (!rec) return sdk::fail(ErrorCode::NotFound, "deploy " + std::to_string(id) + " does not exist", "deploy");
  auto record = common::parse_json(rec->value, common::JsonLimits{64 << 20, 32});
  if (!record) return sdk::fail(ErrorCode::Internal, "deploy " + std::to_string(id) + " is unreadable");
  Value out = Value::object();
  copy_deploy_fields(*record, out);
  Value::Array applied, failed, outstanding, superseded;
  std::int64_t declared = 0;
  Value last_delivery(nullptr);
  for (auto& w : const_cast<Value*>(out.find("waves"))->as_array()) {
    const std::int64_t d = w.get_int("delivery", 0);
    if (d <= 0) continue;
    MESH_TRY(delivery, store_->delivery(static_cast<std::uint64_t>(d)));
    MESH_TRY(report, delivery_report(delivery, now_ms));
    // When the wave's delivery was written: what its nodes' answer times count from (JUnit).
    w.set("at", report.get_string("at"));
    w.set("at_ms", report.get_int("at_ms", 0));
    declared += report.get_int("declared", 0);
    auto append = [&](const char* key, Value::Array& into) {
      if (const Value* l = report.find(key); l && l->is_array())
        for (const auto& e : l->as_array()) into.push_back(e);
    };
    append("applied", applied);
    append("failed", failed);
    append("outstanding", outstanding);
    append("superseded", superseded);
    last_delivery = int_value(static_cast<std::uint64_t>(d));
  }
  out.set("delivery", last_delivery);
  out.set("declared", declared);
  out.set("applied", Value(std::move(applied)));
  out.set("failed", Value(std::move(failed)));
  out.set("outstanding", Value(std::move(outstanding)));
  out.set("superseded", Value(std::move(superseded)));
  // Each unchanged node as the revision it held stands now (a record from before `held` was
  // kept has none: its unchanged nodes are listed only by name).
  if (const Value* held = record->find("held"); held && held->is_array() && !held->as_array().empty()) {
    MESH_TRY(outcomes, held_outcomes(*held, now_ms));
    append_outcomes(outcomes, out);
  }
  return out;
}

}  // namespace mesh::control::detail
