#include "fleet_state.h"

#include <algorithm>
#include <cstdio>

#include "mesh/common/json.h"

namespace mesh::control::detail {

using sdk::ErrorCode;
using sdk::Value;

std::string padded_id(std::uint64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%012llu", static_cast<unsigned long long>(id));
  return buf;
}

std::string resource_key(const Value& resource) {
  const std::string type = resource.get_string("type");
  const std::string id = resource.get_string("id");
  if (type.empty() && id.empty()) return {};
  return type + ":" + id;
}

std::vector<std::string> resource_keys(const Value& resources) {
  std::vector<std::string> out;
  if (resources.is_array())
    for (const auto& r : resources.as_array()) out.push_back(resource_key(r));
  return out;
}

Value pick_resources(const Value& all, const std::vector<std::string>& keys) {
  Value out = Value::array();
  if (!all.is_array()) return out;
  for (const auto& r : all.as_array())
    if (std::find(keys.begin(), keys.end(), resource_key(r)) != keys.end()) out.as_array().push_back(r);
  return out;
}

namespace {
std::vector<std::string> strings_of(const Value* v) {
  std::vector<std::string> out;
  if (v && v->is_array())
    for (const auto& s : v->as_array())
      if (s.is_string()) out.push_back(s.as_string());
  return out;
}
}  // namespace

Composition parse_composition(const std::string& text, const Value& resources) {
  Composition c;
  auto v = text.empty() ? sdk::Result<Value>(sdk::fail(ErrorCode::NotFound, "none"))
                        : common::parse_json(text, common::JsonLimits{64 << 20, 16});
  if (!v || !v->is_object()) {
    c.own = resource_keys(resources);
    return c;
  }
  c.own = strings_of(v->find("own"));
  if (const Value* m = v->find("modules"); m && m->is_object())
    for (const auto& [name, part] : m->as_object())
      c.modules[name] = ModulePart{part.get_string("version"), strings_of(part.find("resources"))};
  c.operator_name = v->get_string("operator");
  c.cause = v->get_string("cause");
  c.deploy = static_cast<std::uint64_t>(std::max<std::int64_t>(0, v->get_int("deploy", 0)));
  return c;
}

Value composition_value(const Composition& c) {
  Value v = Value::object();
  Value::Array own;
  for (const auto& k : c.own) own.emplace_back(k);
  v.set("own", Value(std::move(own)));
  Value modules = Value::object();
  for (const auto& [name, part] : c.modules) {
    Value p = Value::object();
    p.set("version", part.version);
    Value::Array keys;
    for (const auto& k : part.resources) keys.emplace_back(k);
    p.set("resources", Value(std::move(keys)));
    modules.set(name, std::move(p));
  }
  v.set("modules", std::move(modules));
  v.set("operator", c.operator_name);
  v.set("cause", c.cause);
  if (c.deploy) v.set("deploy", static_cast<std::int64_t>(c.deploy));
  return v;
}

std::string composition_json(const Composition& c) { return composition_value(c).to_json(); }

sdk::Result<NodeState> node_state(sdk::Store& store, const std::string& node) {
  MESH_TRY(latest, store.latest_revision(node));
  return node_state_of(node, latest);
}

sdk::Result<NodeState> node_state_of(const std::string& node, const std::optional<sdk::RevisionRecord>& latest) {
  NodeState s;
  if (!latest) return s;
  auto body = common::parse_json(latest->body, common::JsonLimits{64 << 20, 32});
  if (!body || !body->find("resources") || !body->find("resources")->is_array())
    return sdk::fail(ErrorCode::Internal,
                     "stored revision " + std::to_string(latest->revision) + " of " + node + " is unreadable");
  s.revision = latest->revision;
  s.resources = *body->find("resources");
  s.composition = parse_composition(latest->composition, s.resources);
  return s;
}

sdk::Result<Value> node_labels(sdk::Store& store, const std::string& node) {
  MESH_TRY(rec, store.record(kLabelsNs, node));
  return node_labels_of(rec);
}

Value node_labels_of(const std::optional<sdk::StoredRecord>& rec) {
  if (!rec) return Value::object();
  auto v = common::parse_json(rec->value, common::JsonLimits{1 << 20, 8});
  if (!v || !v->is_object()) return Value::object();
  return std::move(*v);
}

std::string briefing_failures(const std::string& briefing) {
  std::string out;
  auto b = common::parse_json(briefing, common::JsonLimits{4 << 20, 32});
  if (!b) return out;
  const Value* lines = b->find("lines");
  if (!lines || !lines->is_array()) return out;
  for (const auto& l : lines->as_array())
    if (l.get_string("outcome") == "fail") {
      if (!out.empty()) out += "; ";
      out += l.get_string("check") + ": " + l.get_string("detail");
    }
  return out;
}

}  // namespace mesh::control::detail
