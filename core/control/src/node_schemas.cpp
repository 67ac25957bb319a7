// Provider schemas from a node's briefing, and the declaration check against them (decision
// record 48). The JSON shape read here is the one core/host/src/describe.cpp writes.
#include "node_schemas.h"

#include <spdlog/spdlog.h>

#include <set>

#include "mesh/common/json.h"
#include "mesh/common/logging.h"

namespace mesh::control::detail {
namespace {

using sdk::ErrorCode;
using sdk::Value;
using sdk::ValueType;

sdk::Error bad(const std::string& path, std::string message) {
  return sdk::Error{ErrorCode::InvalidArgument, std::move(message), path};
}

std::optional<ValueType> value_type_of(std::string_view s) {
  for (ValueType t : {ValueType::String, ValueType::Bool, ValueType::Int, ValueType::Number, ValueType::StringList,
                      ValueType::StringMap, ValueType::Any, ValueType::Duration, ValueType::Size})
    if (s == sdk::to_string(t)) return t;
  return std::nullopt;
}

std::optional<sdk::IdFormat> id_format_of(std::string_view s) {
  using F = sdk::IdFormat;
  for (F f : {F::Any, F::AbsolutePath, F::UnitName, F::PackageName, F::ContainerName})
    if (s == sdk::to_string(f)) return f;
  return std::nullopt;
}

// Short strings: names, types. Descriptions may be longer but are bounded by the whole.
sdk::Result<std::string> string_at(const Value& o, const std::string& path, std::string_view key, bool required) {
  const Value* v = o.find(key);
  const std::string at = path + "." + std::string(key);
  if (!v || v->is_null()) {
    if (required) return sdk::fail(bad(at, "is required"));
    return std::string();
  }
  if (!v->is_string()) return sdk::fail(bad(at, "must be a string"));
  return v->as_string();
}

sdk::Result<bool> bool_at(const Value& o, const std::string& path, std::string_view key) {
  const Value* v = o.find(key);
  if (!v || v->is_null()) return false;
  if (!v->is_bool()) return sdk::fail(bad(path + "." + std::string(key), "must be true or false"));
  return v->as_bool();
}

sdk::Result<std::optional<double>> number_at(const Value& o, const std::string& path, std::string_view key) {
  const Value* v = o.find(key);
  if (!v || v->is_null()) return std::optional<double>{};
  if (v->is_int()) return std::optional<double>{static_cast<double>(v->as_int())};
  if (v->is_double()) return std::optional<double>{v->as_double()};
  return sdk::fail(bad(path + "." + std::string(key), "must be a number"));
}

sdk::Result<std::vector<std::string>> strings_at(const Value& o, const std::string& path, std::string_view key) {
  std::vector<std::string> out;
  const Value* v = o.find(key);
  if (!v || v->is_null()) return out;
  const std::string at = path + "." + std::string(key);
  if (!v->is_array()) return sdk::fail(bad(at, "must be a list of strings"));
  for (std::size_t i = 0; i < v->as_array().size(); ++i) {
    const Value& e = v->as_array()[i];
    if (!e.is_string()) return sdk::fail(bad(at + "[" + std::to_string(i) + "]", "must be a string"));
    out.push_back(e.as_string());
  }
  return out;
}

sdk::Result<sdk::Attribute> attribute_from(const Value& a, const std::string& path) {
  if (!a.is_object()) return sdk::fail(bad(path, "must be an object"));
  sdk::Attribute out;
  MESH_TRY(name, string_at(a, path, "name", true));
  if (name.empty()) return sdk::fail(bad(path + ".name", "must not be empty"));
  out.name = std::move(name);
  MESH_TRY(type, string_at(a, path, "type", true));
  auto t = value_type_of(type);
  if (!t)
    return sdk::fail(bad(path + ".type", "'" + type.substr(0, 64) +
                                             "' is not one of: string, bool, integer, number, list of strings, "
                                             "map of strings, any, duration, size"));
  out.type = *t;
  MESH_TRY(required, bool_at(a, path, "required"));
  out.required = required;
  MESH_TRY(description, string_at(a, path, "description", false));
  out.description = std::move(description);
  MESH_TRY(allowed, strings_at(a, path, "allowed"));
  out.allowed = std::move(allowed);
  MESH_TRY(min, number_at(a, path, "min"));
  MESH_TRY(max, number_at(a, path, "max"));
  out.min = min;
  out.max = max;
  MESH_TRY(read_only, bool_at(a, path, "read_only"));
  MESH_TRY(sensitive, bool_at(a, path, "sensitive"));
  out.read_only = read_only;
  out.sensitive = sensitive;
  if (const Value* d = a.find("default"); d && !d->is_null() && !out.sensitive) out.default_value = *d;
  return out;
}

}  // namespace

sdk::Result<std::vector<sdk::Schema>> schemas_from_json(const Value& schemas, std::string_view field) {
  const std::string top(field);
  if (!schemas.is_array()) return sdk::fail(bad(top, "must be a list of provider schemas"));
  if (schemas.as_array().size() > kMaxSchemas)
    return sdk::fail(bad(top, std::to_string(schemas.as_array().size()) + " provider schemas, over the limit of " +
                                  std::to_string(kMaxSchemas)));
  std::vector<sdk::Schema> out;
  std::set<std::string> names;
  for (std::size_t i = 0; i < schemas.as_array().size(); ++i) {
    const Value& s = schemas.as_array()[i];
    const std::string path = top + "[" + std::to_string(i) + "]";
    if (!s.is_object()) return sdk::fail(bad(path, "must be an object"));
    sdk::Schema schema;
    MESH_TRY(name, string_at(s, path, "name", true));
    if (name.empty()) return sdk::fail(bad(path + ".name", "must not be empty"));
    if (!names.insert(name).second)
      return sdk::fail(bad(path + ".name", "type '" + name.substr(0, 64) + "' is described twice"));
    schema.name = std::move(name);
    MESH_TRY(description, string_at(s, path, "description", false));
    schema.description = std::move(description);
    MESH_TRY(id_format, string_at(s, path, "id_format", false));
    if (!id_format.empty()) {
      auto f = id_format_of(id_format);
      if (!f)
        return sdk::fail(bad(path + ".id_format", "'" + id_format.substr(0, 64) +
                                                      "' is not one of: any, absolute_path, unit_name, package_name, "
                                                      "container_name"));
      schema.id_format = *f;
    }
    const Value* attrs = s.find("attributes");
    if (!attrs || !attrs->is_array()) return sdk::fail(bad(path + ".attributes", "must be a list of attributes"));
    if (attrs->as_array().size() > kMaxSchemaAttributes)
      return sdk::fail(bad(path + ".attributes", std::to_string(attrs->as_array().size()) +
                                                     " attributes, over the limit of " +
                                                     std::to_string(kMaxSchemaAttributes)));
    for (std::size_t j = 0; j < attrs->as_array().size(); ++j) {
      MESH_TRY(a, attribute_from(attrs->as_array()[j], path + ".attributes[" + std::to_string(j) + "]"));
      schema.attributes.push_back(std::move(a));
    }
    if (const Value* ex = s.find("exclusive"); ex && !ex->is_null()) {
      if (!ex->is_array()) return sdk::fail(bad(path + ".exclusive", "must be a list of lists of attribute names"));
      for (std::size_t j = 0; j < ex->as_array().size(); ++j) {
        const Value& g = ex->as_array()[j];
        const std::string gp = path + ".exclusive[" + std::to_string(j) + "]";
        if (!g.is_array()) return sdk::fail(bad(gp, "must be a list of attribute names"));
        std::vector<std::string> group;
        for (std::size_t k = 0; k < g.as_array().size(); ++k) {
          if (!g.as_array()[k].is_string())
            return sdk::fail(bad(gp + "[" + std::to_string(k) + "]", "must be a string"));
          group.push_back(g.as_array()[k].as_string());
        }
        schema.exclusive.push_back(std::move(group));
      }
    }
    out.push_back(std::move(schema));
  }
  return out;
}

sdk::Result<std::optional<std::string>> briefing_schemas(const Value& body) {
  const Value* v = body.find("schemas");
  if (!v || v->is_null()) return std::optional<std::string>{};
  MESH_TRY(parsed, schemas_from_json(*v));
  (void)parsed;
  std::string text = v->to_json();
  if (text.size() > kMaxSchemasBytes)
    return sdk::fail(bad("schemas", std::to_string(text.size()) + " bytes of JSON, over the limit of " +
                                        std::to_string(kMaxSchemasBytes)));
  return std::optional<std::string>{std::move(text)};
}

sdk::Result<void> store_schemas(sdk::Store& store, const std::string& node, const std::optional<std::string>& schemas) {
  auto ok = store.set_provider_schemas(node, schemas.value_or(std::string()));
  if (!ok && ok.error().code == ErrorCode::Unsupported) {
    common::logger()->warn("briefing node={}: provider schemas not stored ({}); declarations to it are checked for "
                           "shape only",
                           node, ok.error().message);
    return {};
  }
  return ok;
}

sdk::Result<std::optional<std::vector<sdk::Schema>>> node_schemas(sdk::Store& store, const std::string& node) {
  using Out = std::optional<std::vector<sdk::Schema>>;
  MESH_TRY(text, store.provider_schemas(node));
  if (!text) return Out{};
  auto v = common::parse_json(*text, common::JsonLimits{kMaxSchemasBytes, 32});
  auto parsed = v ? schemas_from_json(*v) : sdk::Result<std::vector<sdk::Schema>>(sdk::fail(v.error()));
  if (!parsed) {
    common::logger()->warn("node={}: its stored provider schemas do not read ({}); checking for shape only", node,
                           parsed.error().describe());
    return Out{};
  }
  return Out{std::move(*parsed)};
}

NodeCheck check_for_node(const Value& decl, std::string_view node,
                         const std::optional<std::vector<sdk::Schema>>& schemas) {
  declaration::CheckOptions options;
  options.expected_node = std::string(node);
  options.reader_is_node = false;
  options.allow_revision = false;
  NodeCheck out;
  if (schemas) {
    out.schemas_checked = true;
    std::string known;
    for (const auto& s : *schemas) known += (known.empty() ? "" : ", ") + s.name;
    options.known_types = "node " + std::string(node) + "'s providers: " + (known.empty() ? "(none)" : known);
    options.schema_of = [&schemas](std::string_view type) -> const sdk::Schema* {
      for (const auto& s : *schemas)
        if (s.name == type) return &s;
      return nullptr;
    };
  }
  out.diagnostics = declaration::check(decl, options).diagnostics;
  return out;
}

sdk::Result<bool> checked_for_node(sdk::Store& store, const Value& decl, const std::string& node, Value* refusal,
                                   Value& extra) {
  MESH_TRY(schemas, node_schemas(store, node));
  auto found = check_for_node(decl, node, schemas);
  if (!found.diagnostics.empty()) {
    if (refusal) {
      refusal->set("diagnostics", declaration::to_json(found.diagnostics));
      refusal->set("checked", found.schemas_checked ? "schemas" : "shape");
    }
    return sdk::fail(refusal_of(found.diagnostics));
  }
  extra.set("checked", found.schemas_checked ? "schemas" : "shape");
  if (!found.schemas_checked) {
    Value::Array warnings;
    warnings.emplace_back("node " + node +
                          " has sent no provider schemas (never briefed, or its host predates them): the declaration "
                          "was checked for shape only; its host checks the properties when it applies");
    extra.set("warnings", Value(std::move(warnings)));
  }
  return true;
}

sdk::Error refusal_of(const declaration::Diagnostics& diagnostics) {
  if (diagnostics.empty()) return sdk::Error{ErrorCode::Internal, "no diagnostic", {}};
  const auto& d = diagnostics.front();
  std::string message = d.message;
  if (!d.resource.empty()) message += " (" + d.resource + ")";
  if (diagnostics.size() > 1)
    message += " (and " + std::to_string(diagnostics.size() - 1) + " more problem" +
               (diagnostics.size() > 2 ? "s" : "") + ")";
  return sdk::Error{d.code, std::move(message), d.path};
}

}  // namespace mesh::control::detail
