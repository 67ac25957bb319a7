#include "mesh/host/describe.h"

#include <chrono>
#include <cmath>
#include <cstdint>

#include "mesh/sdk/duration.h"

namespace mesh::host {
namespace {

using sdk::Value;
using sdk::ValueType;

std::string bound_text(const sdk::Attribute& a, double b) {
  const auto whole = static_cast<std::int64_t>(b);
  if (a.type == ValueType::Duration && static_cast<double>(whole) == b)
    return sdk::format_duration(std::chrono::milliseconds(whole));
  if (a.type == ValueType::Size && static_cast<double>(whole) == b) return std::to_string(whole) + " bytes";
  if (static_cast<double>(whole) == b) return std::to_string(whole);
  return std::to_string(b);
}

std::string default_text(const sdk::Attribute& a) {
  if (!a.default_value) return "";
  if (a.sensitive) return "(sensitive value)";
  if (a.default_value->is_string()) return a.default_value->as_string();
  return a.default_value->to_json();
}

std::string flags(const sdk::Attribute& a) {
  std::string out;
  auto add = [&](std::string s) { out += (out.empty() ? "" : ", ") + s; };
  if (!a.allowed.empty()) {
    std::string list;
    for (const auto& v : a.allowed) list += (list.empty() ? "" : ", ") + v;
    add("one of: " + list);
  }
  if (a.min) add("at least " + bound_text(a, *a.min));
  if (a.max) add("at most " + bound_text(a, *a.max));
  if (a.read_only) add("read-only (computed)");
  if (a.sensitive) add("sensitive");
  return out;
}

std::string md_escape(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += "<br>";
    else out += c;
  }
  return out;
}

}  // namespace

Value schema_json(const sdk::Schema& schema) {
  Value out = Value::object();
  out.set("name", schema.name);
  out.set("description", schema.description);
  out.set("id_format", std::string(sdk::to_string(schema.id_format)));
  Value::Array attrs;
  for (const auto& a : schema.attributes) {
    Value o = Value::object();
    o.set("name", a.name);
    o.set("type", std::string(sdk::to_string(a.type)));
    o.set("required", a.required);
    o.set("description", a.description);
    if (!a.allowed.empty()) {
      Value::Array list;
      for (const auto& v : a.allowed) list.emplace_back(v);
      o.set("allowed", Value(std::move(list)));
    }
    if (a.default_value) o.set("default", a.sensitive ? Value("(sensitive value)") : *a.default_value);
    if (a.min) o.set("min", *a.min);
    if (a.max) o.set("max", *a.max);
    o.set("read_only", a.read_only);
    o.set("sensitive", a.sensitive);
    attrs.push_back(std::move(o));
  }
  out.set("attributes", Value(std::move(attrs)));
  Value::Array groups;
  for (const auto& g : schema.exclusive) {
    Value::Array names;
    for (const auto& n : g) names.emplace_back(n);
    groups.emplace_back(std::move(names));
  }
  out.set("exclusive", Value(std::move(groups)));
  return out;
}

std::string schema_text(const sdk::Schema& schema) {
  std::string out = schema.name + " (id format: " + sdk::to_string(schema.id_format) + ")\n";
  if (!schema.description.empty()) out += "  " + schema.description + "\n";
  out += "\nproperties:\n";
  if (schema.attributes.empty()) out += "  (none)\n";
  for (const auto& a : schema.attributes) {
    out += "  " + a.name + "  " + sdk::to_string(a.type) + ", " +
           (a.read_only ? "computed" : a.required ? "required" : "optional");
    if (a.default_value) out += ", default " + default_text(a);
    if (auto f = flags(a); !f.empty()) out += ", " + f;
    out += "\n";
    if (!a.description.empty()) out += "      " + a.description + "\n";
  }
  for (const auto& g : schema.exclusive) {
    std::string names;
    for (const auto& n : g) names += (names.empty() ? "" : ", ") + n;
    out += "\nat most one of: " + names + "\n";
  }
  return out;
}

std::string schema_markdown(const sdk::Schema& schema) {
  std::string out = "### " + schema.name + "\n\n";
  if (!schema.description.empty()) out += md_escape(schema.description) + "\n\n";
  out += "Id format: `" + std::string(sdk::to_string(schema.id_format)) + "`.\n\n";
  out += "| Property | Type | Required | Default | Description |\n|---|---|---|---|---|\n";
  for (const auto& a : schema.attributes) {
    std::string desc = a.description;
    if (auto f = flags(a); !f.empty()) desc += (desc.empty() ? "" : " ") + ("(" + f + ")");
    const std::string def = default_text(a);
    out += "| `" + a.name + "` | " + sdk::to_string(a.type) + " | " +
           (a.read_only ? "computed" : a.required ? "yes" : "no") + " | " +
           (def.empty() ? "" : "`" + md_escape(def) + "`") + " | " + md_escape(desc) + " |\n";
  }
  for (const auto& g : schema.exclusive) {
    std::string names;
    for (const auto& n : g) names += (names.empty() ? "" : ", ") + ("`" + n + "`");
    out += "\nAt most one of " + names + ".\n";
  }
  return out;
}

}  // namespace mesh::host
