// The operator API's fleet records (docs/protocol.md "API", decision records 63 and 65):
// module.push|list|show (record ns `module`, key NAME/VERSION, immutable once stored),
// node.label (ns `labels`, key NODE), assign|unassign|assignments (ns `assignment`, key MODULE).
// None of them writes a declaration: labels and assignments take effect at the module's next
// deploy; `assign` answers which nodes that deploy adds and drops.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "fleet_state.h"
#include "fleet_view.h"
#include "service.h"
#include "service_util.h"
#include "mesh/common/json.h"
#include "mesh/common/logging.h"
#include "mesh/common/text.h"
#include "mesh/fleet/fleet.h"

namespace mesh::control::detail {

using sdk::ErrorCode;
using sdk::Value;

namespace {

constexpr std::size_t kMaxLabels = 64;
constexpr std::size_t kMaxLabelValue = 256;

sdk::Result<Value> parse_record(const sdk::StoredRecord& r) {
  auto v = common::parse_json(r.value, common::JsonLimits{16 << 20, 64});
  if (!v) return sdk::fail(ErrorCode::Internal, "stored record " + r.ns + "/" + r.key + " is unreadable");
  return std::move(*v);
}

// A label key: what a selector term can name ([A-Za-z0-9][A-Za-z0-9._/-]{0,62}), and not `name`
// or under `facts.` (those terms mean the node's name and its briefing facts).
bool valid_label_key(const std::string& k) {
  if (k.empty() || k.size() > 63 || k == "name" || k.rfind("facts.", 0) == 0 || k == "facts") return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (!alnum(k[0])) return false;
  return std::all_of(k.begin(), k.end(), [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '/' || c == '-'; });
}

bool valid_label_value(const std::string& v) {
  if (v.empty() || v.size() > kMaxLabelValue) return false;
  for (unsigned char c : v)
    if (c < 0x20 || c == 0x7f || c == ',' || c == '=') return false;
  return true;
}

}  // namespace

sdk::Result<fleet::Module> load_module(sdk::Store& store, const std::string& name, const std::string& version) {
  MESH_TRY(rec, store.record(kModuleNs, name + "/" + version));
  if (!rec) {
    MESH_TRY(any, store.records(kModuleNs, name + "/"));
    if (any.empty())
      return sdk::fail(ErrorCode::NotFound, "unknown module '" + shown(name) + "' (mesh module list shows the stored ones)",
                       "module");
    std::string versions;
    for (const auto& r : any) versions += (versions.empty() ? "" : ", ") + r.key.substr(name.size() + 1);
    return sdk::fail(ErrorCode::NotFound,
                     "module " + shown(name) + " has no version '" + shown(version) + "' (stored: " + versions + ")",
                     "version");
  }
  MESH_TRY(v, parse_record(*rec));
  const Value* doc = v.find("document");
  if (!doc) return sdk::fail(ErrorCode::Internal, "stored module " + rec->key + " is unreadable");
  return fleet::parse_module(doc->to_json(), "stored module " + rec->key);
}

sdk::Result<Value> Service::api_module_push(const ApiCall& call) {
  Fields f(call.params);
  MESH_TRY(text, f.string("module"));
  MESH_TRY(m, fleet::parse_module(text, "the pushed module"));
  Value doc = Value::object();
  doc.set("module", m.name);
  doc.set("version", m.version);
  doc.set("resources", m.resources);
  Value stored = Value::object();
  stored.set("module", m.name);
  stored.set("version", m.version);
  stored.set("digest", m.digest);
  stored.set("operator", call.who.name);
  stored.set("at", ts(call.now_ms));
  stored.set("document", doc);
  const std::string key = m.name + "/" + m.version;
  Value answer = Value::object();
  answer.set("module", m.name);
  answer.set("version", m.version);
  answer.set("digest", m.digest);
  answer.set("resources", static_cast<std::int64_t>(m.resources.as_array().size()));
  auto put = store_->put_records({sdk::RecordWrite{kModuleNs, key, stored.to_json(), 0, false, {}}}, call.now_ms);
  if (!put && put.error().code == ErrorCode::FailedPrecondition) {
    // Stored already: the same content is a harmless repeat, other content is refused (a stored
    // version is immutable).
    MESH_TRY(old, store_->record(kModuleNs, key));
    if (old) {
      MESH_TRY(v, parse_record(*old));
      if (v.get_string("digest") == m.digest) {
        answer.set("stored", false);
        answer.set("note", "already stored with the same content");
        return answer;
      }
      return sdk::fail(ErrorCode::AlreadyExists,
                       "module " + m.name + " version " + shown(m.version) +
                           " is already stored with other content (digest " + v.get_string("digest").substr(0, 12) +
                           "…); a stored version is immutable: push it as a new version",
                       "version");
    }
  }
  if (!put) return sdk::fail(put.error());
  common::logger()->info("module pushed module={} version={} digest={} operator={}", m.name, m.version, m.digest,
                         call.who.name);
  answer.set("stored", true);
  return answer;
}

sdk::Result<Value> Service::api_module_list(const ApiCall& call) {
  (void)call;
  MESH_TRY(all, store_->records(kModuleNs, ""));
  Value::Array out;
  std::string current;
  Value entry;
  auto flush = [&] {
    if (!current.empty()) out.push_back(std::move(entry));
  };
  for (const auto& r : all) {
    MESH_TRY(v, parse_record(r));
    const std::string name = v.get_string("module");
    if (name != current) {
      flush();
      current = name;
      entry = Value::object();
      entry.set("module", name);
      entry.set("versions", Value::array());
      MESH_TRY(a, store_->record(kAssignmentNs, name));
      if (a) {
        MESH_TRY(av, parse_record(*a));
        entry.set("selector", av.get_string("selector"));
      } else {
        entry.set("selector", Value(nullptr));
      }
    }
    Value ver = Value::object();
    ver.set("version", v.get_string("version"));
    ver.set("digest", v.get_string("digest"));
    ver.set("at", v.get_string("at"));
    ver.set("operator", v.get_string("operator"));
    const_cast<Value*>(entry.find("versions"))->as_array().push_back(std::move(ver));
  }
  flush();
  return Value(std::move(out));
}

sdk::Result<Value> Service::api_module_show(const ApiCall& call) {
  Fields f(call.params);
  MESH_TRY(name, f.string("module"));
  MESH_TRY(version, f.opt_string("version"));
  if (!fleet::valid_module_name(name)) return sdk::fail(invalid("module", "'" + shown(name) + "' is not a module name"));
  if (version) {
    MESH_TRY(m, load_module(*store_, name, *version));
    MESH_TRY(rec, store_->record(kModuleNs, name + "/" + *version));
    MESH_TRY(v, parse_record(*rec));
    Value out = Value::object();
    out.set("module", m.name);
    out.set("version", m.version);
    out.set("digest", m.digest);
    out.set("at", v.get_string("at"));
    out.set("operator", v.get_string("operator"));
    out.set("resources", m.resources);
    return out;
  }
  MESH_TRY(all, store_->records(kModuleNs, name + "/"));
  if (all.empty())
    return sdk::fail(ErrorCode::NotFound, "unknown module '" + shown(name) + "' (mesh module list shows the stored ones)",
                     "module");
  Value out = Value::object();
  out.set("module", name);
  Value::Array versions;
  for (const auto& r : all) {
    MESH_TRY(v, parse_record(r));
    Value ver = Value::object();
    ver.set("version", v.get_string("version"));
    ver.set("digest", v.get_string("digest"));
    ver.set("at", v.get_string("at"));
    ver.set("operator", v.get_string("operator"));
    versions.push_back(std::move(ver));
  }
  out.set("versions", Value(std::move(versions)));
  MESH_TRY(a, store_->record(kAssignmentNs, name));
  if (a) {
    MESH_TRY(av, parse_record(*a));
    out.set("assignment", av);
  } else {
    out.set("assignment", Value(nullptr));
  }
  return out;
}

sdk::Result<Value> Service::api_node_label(const ApiCall& call) {
  Fields f(call.params);
  MESH_TRY(node, node_param(f));
  MESH_TRY(record, enrolled(node));
  (void)record;
  const Value* set = call.params.find("set");
  if (set && !set->is_object()) return sdk::fail(invalid("set", "must be an object of label → value"));
  std::vector<std::string> remove;
  if (call.params.find("remove")) {
    MESH_TRY(r, f.string_list("remove"));
    remove = std::move(r);
  }
  if (set)
    for (const auto& [k, v] : set->as_object()) {
      if (!valid_label_key(k))
        return sdk::fail(invalid("set." + shown(k), "'" + shown(k) +
                                                        "' is not a label key (1-63 of A-Z a-z 0-9 . _ / -, starting "
                                                        "with a letter or digit; not 'name' nor under 'facts.')"));
      if (!v.is_string() || !valid_label_value(v.as_string()))
        return sdk::fail(invalid("set." + k, "label " + k + ": the value must be 1-256 printable characters without "
                                              "',' or '=' (what a selector can match)"));
    }
  for (const auto& k : remove)
    if (!valid_label_key(k)) return sdk::fail(invalid("remove", "'" + shown(k) + "' is not a label key"));
  for (int attempt = 1;; ++attempt) {
    MESH_TRY(old, store_->record(kLabelsNs, node));
    Value labels = Value::object();
    if (old) {
      MESH_TRY(v, parse_record(*old));
      if (v.is_object()) labels = std::move(v);
    }
    if (set)
      for (const auto& [k, v] : set->as_object()) labels.set(k, v);
    for (const auto& k : remove) labels.erase(k);
    if (labels.as_object().size() > kMaxLabels)
      return sdk::fail(invalid("set", "node " + node + " would have " + std::to_string(labels.as_object().size()) +
                                          " labels, over the limit of " + std::to_string(kMaxLabels)));
    // Sorted by key: what `mesh node show` prints and selectors read.
    std::sort(labels.as_object().begin(), labels.as_object().end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    sdk::RecordWrite w{kLabelsNs, node, labels.to_json(), old ? old->version : 0, false, {}};
    auto put = store_->put_records({w}, call.now_ms);
    if (!put && put.error().code == ErrorCode::FailedPrecondition && attempt < kCasAttempts) continue;
    if (!put) return sdk::fail(put.error());
    common::logger()->info("labels node={} operator={} labels={}", node, call.who.name, labels.to_json());
    Value out = Value::object();
    out.set("node", node);
    out.set("labels", labels);
    return out;
  }
}

sdk::Result<Value> Service::api_assign(const ApiCall& call) {
  Fields f(call.params);
  MESH_TRY(name, f.string("module"));
  MESH_TRY(text, f.string("selector"));
  if (!fleet::valid_module_name(name)) return sdk::fail(invalid("module", "'" + shown(name) + "' is not a module name"));
  MESH_TRY(selector, fleet::parse_selector(text));
  MESH_TRY(versions, store_->records(kModuleNs, name + "/"));
  if (versions.empty())
    return sdk::fail(ErrorCode::NotFound,
                     "unknown module '" + shown(name) + "': push a version first (mesh module push FILE)", "module");
  Value rec = Value::object();
  rec.set("selector", fleet::to_string(selector));
  rec.set("operator", call.who.name);
  rec.set("at", ts(call.now_ms));
  MESH_TRY(put, store_->put_records({sdk::RecordWrite{kAssignmentNs, name, rec.to_json(), std::nullopt, false, {}}},
                                    call.now_ms));
  (void)put;
  common::logger()->info("assign module={} selector={} operator={}", name, fleet::to_string(selector), call.who.name);
  MESH_TRY(plan, membership(*store_, name, &selector, body_limit()));
  Value out = Value::object();
  out.set("module", name);
  out.set("selector", fleet::to_string(selector));
  out.set("add", string_list(plan.add));
  out.set("drop", string_list(plan.drop));
  out.set("keep", string_list(plan.keep));
  out.set("skipped", plan.skipped_value());
  return out;
}

sdk::Result<Value> Service::api_unassign(const ApiCall& call) {
  Fields f(call.params);
  MESH_TRY(name, f.string("module"));
  MESH_TRY(old, store_->record(kAssignmentNs, name));
  if (!old) return sdk::fail(ErrorCode::NotFound, "module '" + shown(name) + "' is not assigned", "module");
  MESH_TRY(put, store_->put_records({sdk::RecordWrite{kAssignmentNs, name, "", old->version, true, {}}}, call.now_ms));
  (void)put;
  common::logger()->info("unassign module={} operator={}", name, call.who.name);
  MESH_TRY(plan, membership(*store_, name, nullptr, body_limit()));
  Value out = Value::object();
  out.set("module", name);
  out.set("add", Value::array());
  out.set("drop", string_list(plan.drop));
  out.set("keep", Value::array());
  out.set("skipped", plan.skipped_value());
  return out;
}

sdk::Result<Value> Service::api_assignments(const ApiCall& call) {
  (void)call;
  MESH_TRY(all, store_->records(kAssignmentNs, ""));
  Value::Array out;
  for (const auto& r : all) {
    MESH_TRY(v, parse_record(r));
    Value e = Value::object();
    e.set("module", r.key);
    e.set("selector", v.get_string("selector"));
    e.set("operator", v.get_string("operator"));
    e.set("at", v.get_string("at"));
    out.push_back(std::move(e));
  }
  return Value(std::move(out));
}

}  // namespace mesh::control::detail
