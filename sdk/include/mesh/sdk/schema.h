// Nox Mesh SDK — schemas: declarative descriptions of a resource's properties or of a plugin's
// config table (after fluent-bit's config maps and Terraform's schema-first resources). The host
// validates input against the schema before plugin code sees it, and generates docs from it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::sdk {

/// The JSON shape an attribute accepts.
enum class ValueType {
  String,     ///< JSON string (UTF-8)
  Bool,       ///< JSON true/false
  Int,        ///< JSON integer (int64)
  Number,     ///< JSON number (int or double)
  StringList, ///< JSON array of strings
  StringMap,  ///< JSON object whose values are strings
  Any,        ///< anything; the plugin validates it itself
};

constexpr const char* to_string(ValueType t) noexcept {
  switch (t) {
    case ValueType::String: return "string";
    case ValueType::Bool: return "bool";
    case ValueType::Int: return "integer";
    case ValueType::Number: return "number";
    case ValueType::StringList: return "list of strings";
    case ValueType::StringMap: return "map of strings";
    case ValueType::Any: return "any";
  }
  return "any";
}

/// One property (or config key).
struct Attribute {
  std::string name;
  ValueType type = ValueType::String;
  bool required = false;
  /// What it means, with its unit when it has one ("settle window, in seconds").
  std::string description;
  /// For String attributes: the only accepted values; empty means any string.
  std::vector<std::string> allowed = {};
  /// Value used when absent (documentation and `apply_defaults`); nullopt means "no default".
  std::optional<Value> default_value = std::nullopt;
};

/// A schema: a named set of attributes plus groups of mutually exclusive attributes.
struct Schema {
  /// For providers the resource type ("file"); for configs the table name ("transport").
  std::string name;
  std::string description;
  std::vector<Attribute> attributes;
  /// Each inner list names attributes of which at most one may be given (`content`,
  /// `content_base64`).
  std::vector<std::vector<std::string>> exclusive = {};

  const Attribute* find(std::string_view attr) const noexcept {
    for (const auto& a : attributes)
      if (a.name == attr) return &a;
    return nullptr;
  }
};

/// Checks `object` against `schema`: it must be a JSON object; every member must be a known
/// attribute of the right type (and one of `allowed` when set); every required attribute must be
/// present; at most one of each exclusive group. Errors are InvalidArgument with
/// `path = prefix + "." + name` (prefix is e.g. "properties"). Unknown keys name the valid ones.
/// Pure function; thread-safe.
inline Result<void> validate_against(const Schema& schema, const Value& object,
                                     std::string_view prefix) {
  const std::string pre = prefix.empty() ? std::string() : std::string(prefix) + ".";
  if (!object.is_object())
    return fail(ErrorCode::InvalidArgument, "must be an object", std::string(prefix));
  for (const auto& [key, value] : object.as_object()) {
    const Attribute* a = schema.find(key);
    if (!a) {
      std::string valid;
      for (const auto& at : schema.attributes) valid += (valid.empty() ? "" : ", ") + at.name;
      return fail(ErrorCode::InvalidArgument,
                  "unknown " + std::string(prefix == "properties" ? "property" : "key") + " '" + key +
                      "' (valid: " + (valid.empty() ? "none" : valid) + ")",
                  pre + key);
    }
    bool ok = false;
    switch (a->type) {
      case ValueType::String: ok = value.is_string(); break;
      case ValueType::Bool: ok = value.is_bool(); break;
      case ValueType::Int: ok = value.is_int(); break;
      case ValueType::Number: ok = value.is_number(); break;
      case ValueType::StringList:
        ok = value.is_array();
        if (ok)
          for (const auto& e : value.as_array()) ok = ok && e.is_string();
        break;
      case ValueType::StringMap:
        ok = value.is_object();
        if (ok)
          for (const auto& [k, e] : value.as_object()) ok = ok && e.is_string();
        break;
      case ValueType::Any: ok = true; break;
    }
    if (!ok)
      return fail(ErrorCode::InvalidArgument, std::string("must be a ") + to_string(a->type),
                  pre + key);
    if (a->type == ValueType::String && !a->allowed.empty()) {
      bool found = false;
      std::string list;
      for (const auto& s : a->allowed) {
        found = found || s == value.as_string();
        list += (list.empty() ? "" : ", ") + s;
      }
      if (!found)
        return fail(ErrorCode::InvalidArgument,
                    "'" + value.as_string() + "' is not one of: " + list, pre + key);
    }
  }
  for (const auto& a : schema.attributes)
    if (a.required && !object.find(a.name))
      return fail(ErrorCode::InvalidArgument, "is required", pre + a.name);
  for (const auto& group : schema.exclusive) {
    std::string seen;
    for (const auto& name : group) {
      if (!object.find(name)) continue;
      if (!seen.empty())
        return fail(ErrorCode::InvalidArgument, "cannot be given together with '" + seen + "'",
                    pre + name);
      seen = name;
    }
  }
  return {};
}

/// Returns a copy of `object` with each absent attribute that has a default filled in.
inline Value apply_defaults(const Schema& schema, Value object) {
  if (object.is_null()) object = Value::object();
  for (const auto& a : schema.attributes)
    if (a.default_value && !object.find(a.name)) object.set(a.name, *a.default_value);
  return object;
}

}  // namespace mesh::sdk
