#include "service_util.h"

#include <algorithm>

#include "mesh/common/clock.h"
#include "mesh/common/logging.h"
#include "mesh/common/protocol.h"
#include "mesh/common/text.h"

namespace mesh::control::detail {

using sdk::ErrorCode;
using sdk::Value;

std::string shown(std::string_view v, std::size_t max) { return common::printable(v, max); }

Value ts(std::int64_t ms) { return Value(common::format_rfc3339(ms)); }
Value opt_ts(const std::optional<std::int64_t>& ms) { return ms ? ts(*ms) : Value(nullptr); }
Value age_s(const std::optional<std::int64_t>& ms, std::int64_t now_ms) {
  if (!ms) return Value(nullptr);
  return Value(std::max<std::int64_t>(0, (now_ms - *ms) / 1000));
}
Value int_value(std::uint64_t v) { return Value(static_cast<std::int64_t>(v)); }
Value string_list(const std::vector<std::string>& list) {
  Value::Array a;
  for (const auto& s : list) a.emplace_back(s);
  return Value(std::move(a));
}

Value delivery_nodes(const sdk::DeliveryRecord& delivery) {
  Value::Array nodes;
  for (const auto& t : delivery.targets) nodes.emplace_back(t.node);
  return Value(std::move(nodes));
}

Value delivery_answer(const sdk::DeliveryRecord& delivery, const Value* extra) {
  Value v = Value::object();
  v.set("delivery", int_value(delivery.id));
  v.set("nodes", delivery_nodes(delivery));
  v.set("revision", int_value(delivery.targets.empty() ? 0 : delivery.targets.front().revision));
  if (extra && extra->is_object())
    for (const auto& [k, value] : extra->as_object()) v.set(k, value);
  return v;
}

sdk::Error invalid(std::string path, std::string message) {
  return sdk::Error{ErrorCode::InvalidArgument, std::move(message), std::move(path)};
}

sdk::Result<std::string> node_param(const Fields& f, std::string_view key) {
  MESH_TRY(node, f.string(key));
  if (!protocol::valid_node_name(node))
    return sdk::fail(f.error(key, "'" + shown(node) +
                                      "' is not a valid node name (1-64 characters of a-z, 0-9, "
                                      "'-' and '_', starting with a letter or digit)"));
  return node;
}

sdk::Result<std::int64_t> time_field(const Fields& f, std::string_view key, std::int64_t fallback) {
  MESH_TRY(text, f.opt_string(key));
  if (!text) return fallback;
  auto ms = common::parse_rfc3339(*text);
  if (!ms) return sdk::fail(f.error(key, "'" + shown(*text) + "' is not an RFC 3339 UTC time"));
  return *ms;
}

sdk::Result<std::string> subject_node(const std::string& subject) {
  auto node = std::string(protocol::subject_node(subject));
  auto first = subject.find('.');
  auto second = subject.find('.', first + 1);
  if (second == std::string::npos || subject.find('.', second + 1) != std::string::npos ||
      !protocol::valid_node_name(node))
    return sdk::fail(invalid("subject", "subject " + shown(subject) + " does not name a valid node"));
  return node;
}

std::string ok_answer(const Value& body) {
  Value v = Value::object();
  v.set("status", "ok");
  v.set("body", body);
  return v.to_json();
}
std::string error_answer(const sdk::Error& e, const Value* detail) {
  Value err = Value::object();
  err.set("code", sdk::to_string(e.code));
  err.set("message", e.message);
  err.set("path", e.path);
  if (detail && detail->is_object())
    for (const auto& [k, v] : detail->as_object())
      if (k != "code" && k != "message" && k != "path") err.set(k, v);
  Value v = Value::object();
  v.set("status", "error");
  v.set("error", std::move(err));
  return v.to_json();
}

}  // namespace mesh::control::detail
