#include "node_facts.h"

#include "mesh/common/clock.h"
#include "mesh/common/json.h"

namespace mesh::control::detail {
namespace {

using sdk::ErrorCode;
using sdk::Value;

sdk::Error bad(const std::string& path, std::string message) {
  return sdk::Error{ErrorCode::InvalidArgument, std::move(message), path};
}

bool key_ok(const std::string& k) {
  if (k.empty() || k.size() > kMaxFactKey) return false;
  for (std::size_t i = 0; i < k.size(); ++i) {
    const char c = k[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) return false;
  }
  return true;
}

// A key as an error message may show it: bounded, control characters replaced.
std::string shown_key(const std::string& k) {
  std::string out;
  for (unsigned char c : k.substr(0, kMaxFactKey)) out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
  return out + (k.size() > kMaxFactKey ? "…" : "");
}

}  // namespace

sdk::Result<Value> briefing_facts(const Value& body) {
  const Value* f = body.find("facts");
  if (!f || f->is_null()) return Value::object();
  if (!f->is_object()) return sdk::fail(bad("facts", "must be an object of fact names to strings"));
  if (f->as_object().size() > kMaxFacts)
    return sdk::fail(bad("facts", std::to_string(f->as_object().size()) + " facts, over the limit of " +
                                      std::to_string(kMaxFacts)));
  Value out = Value::object();
  for (const auto& [key, value] : f->as_object()) {
    if (!key_ok(key))
      return sdk::fail(bad("facts." + shown_key(key),
                           "'" + shown_key(key) + "' is not a fact name (1-" + std::to_string(kMaxFactKey) +
                               " characters of a-z, 0-9, '.', '_', '-', starting with a letter or digit)"));
    if (!value.is_string()) return sdk::fail(bad("facts." + key, "must be a string"));
    const std::string& s = value.as_string();
    if (s.empty() || s.size() > kMaxFactValue)
      return sdk::fail(bad("facts." + key, "must be 1 to " + std::to_string(kMaxFactValue) + " bytes (it is " +
                                               std::to_string(s.size()) + ")"));
    for (unsigned char c : s)
      if (c < 0x20 || c == 0x7f) return sdk::fail(bad("facts." + key, "must not hold control characters"));
    out.set(key, s);
  }
  return out;
}

Value stored_facts(const std::string& briefing_json) {
  if (briefing_json.empty()) return Value::object();
  auto b = common::parse_json(briefing_json);
  if (!b || !b->is_object()) return Value::object();
  const Value* f = b->find("facts");
  return f && f->is_object() ? *f : Value::object();
}

std::optional<std::int64_t> last_contact_ms(const sdk::NodeRecord& node) {
  std::optional<std::int64_t> out = node.last_contact_ms;
  auto newer = [&](std::int64_t ms) {
    if (ms > 0 && (!out || *out < ms)) out = ms;
  };
  if (!node.briefing.empty())
    if (auto b = common::parse_json(node.briefing); b && b->is_object() && !b->get_bool("enrolment", false))
      if (auto at = common::parse_rfc3339(b->get_string("at"))) newer(*at);
  return out;
}

namespace {

Value labels_value(const std::string& json) {
  auto v = common::parse_json(json);
  return v && v->is_object() ? *v : Value::object();
}

}  // namespace

sdk::Result<Value> shown_labels(sdk::Store& store, const std::string& node) {
  auto r = store.record(kLabelsNamespace, node);
  if (!r) {
    if (r.error().code == ErrorCode::Unsupported) return Value::object();
    return sdk::fail(r.error());
  }
  return *r ? labels_value((*r)->value) : Value::object();
}

sdk::Result<std::map<std::string, Value>> all_shown_labels(sdk::Store& store) {
  std::map<std::string, Value> out;
  auto r = store.records(kLabelsNamespace, "");
  if (!r) {
    if (r.error().code == ErrorCode::Unsupported) return out;
    return sdk::fail(r.error());
  }
  for (const auto& rec : *r) out[rec.key] = labels_value(rec.value);
  return out;
}

}  // namespace mesh::control::detail
