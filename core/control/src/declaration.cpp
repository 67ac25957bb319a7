#include "mesh/control/declaration.h"

#include "mesh/declaration/declaration.h"

namespace mesh::control {

declaration::Diagnostics check_declaration_all(const sdk::Value& decl, std::string_view node) {
  declaration::CheckOptions options;
  options.expected_node = std::string(node);
  options.reader_is_node = false;
  options.allow_revision = false;
  return declaration::check(decl, options).diagnostics;
}

sdk::Result<void> check_declaration(const sdk::Value& decl, std::string_view node) {
  auto diagnostics = check_declaration_all(decl, node);
  if (diagnostics.empty()) return {};
  const auto& d = diagnostics.front();
  return sdk::fail(d.code, d.message, d.path);
}

sdk::Result<sdk::Value> parse_declaration_text(std::string_view text, std::string_view node,
                                          const common::JsonLimits& limits) {
  auto v = common::parse_json(text, limits);
  if (!v) return sdk::fail(v.error());
  if (auto ok = check_declaration(*v, node); !ok) return sdk::fail(ok.error());
  return v;
}

std::string render_declaration(const sdk::Value& resources, std::string_view node,
                               std::uint64_t revision) {
  sdk::Value out = sdk::Value::object();
  out.set("node", std::string(node));
  out.set("revision", static_cast<std::int64_t>(revision));
  out.set("resources", resources);
  return out.to_json();
}

}  // namespace mesh::control
