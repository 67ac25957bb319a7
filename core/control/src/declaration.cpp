#include "mesh/control/declaration.h"

#include <algorithm>
#include <functional>
#include <map>
#include <vector>

#include "mesh/common/text.h"

namespace mesh::control {
namespace {

using sdk::ErrorCode;
using sdk::Value;

sdk::Result<void> bad(std::string path, std::string message) {
  return sdk::fail(ErrorCode::InvalidArgument, std::move(message), std::move(path));
}

// A resource's `type` or `id`: a non-empty string without control characters (a newline in an
// id would name a file `new\nline` and split log lines and text views). The same rule as the
// host's (core/engine/src/declaration.cpp), so what `mesh declare` accepts every host accepts.
sdk::Result<void> check_name_field(const Value* v, const std::string& path) {
  if (!v) return bad(path, "is required");
  if (!v->is_string() || v->as_string().empty()) return bad(path, "must be a non-empty string");
  const std::string& t = v->as_string();
  if (auto at = common::first_unprintable(t); at != std::string::npos)
    return bad(path, "'" + common::printable(t, 64) + "' contains a control character (" +
                         common::printable(t.substr(at, 1)) + " at byte " + std::to_string(at) +
                         "); names and ids may not contain control, line-separator or bidirectional characters");
  return {};
}

}  // namespace

sdk::Result<void> check_declaration(const Value& decl, std::string_view node) {
  if (!decl.is_object()) return bad("", "a declaration must be a JSON object");
  for (const auto& [key, value] : decl.as_object()) {
    if (key == "node") {
      if (!value.is_string()) return bad("node", "must be a string");
      if (value.as_string() != node)
        return bad("node", "names '" + value.as_string() + "', but the declaration is for '" +
                               std::string(node) + "'");
    } else if (key == "revision") {
      return bad("revision", "is assigned by the control plane; remove it from the file");
    } else if (key != "resources") {
      return bad(key, "unknown key '" + key + "' (valid: node, resources)");
    }
  }
  const Value* resources = decl.find("resources");
  if (!resources) return bad("resources", "is required");
  if (!resources->is_array()) return bad("resources", "must be an array");

  const auto& list = resources->as_array();
  std::map<std::string, std::size_t, std::less<>> index;  // "type:id" → position
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = "resources[" + std::to_string(i) + "]";
    const Value& r = list[i];
    if (!r.is_object()) return bad(at, "must be an object");
    for (const auto& [key, value] : r.as_object())
      if (key != "type" && key != "id" && key != "properties" && key != "requires")
        return bad(at + "." + key, "unknown key '" + key + "' (valid: type, id, properties, requires)");
    if (auto ok = check_name_field(r.find("type"), at + ".type"); !ok) return ok;
    if (auto ok = check_name_field(r.find("id"), at + ".id"); !ok) return ok;
    const Value* props = r.find("properties");
    if (!props) return bad(at + ".properties", "is required");
    if (!props->is_object()) return bad(at + ".properties", "must be an object");
    if (const Value* req = r.find("requires")) {
      if (!req->is_array()) return bad(at + ".requires", "must be a list of \"type:id\" strings");
      const auto& reqs = req->as_array();
      for (std::size_t j = 0; j < reqs.size(); ++j)
        if (!reqs[j].is_string() || reqs[j].as_string().find(':') == std::string::npos)
          return bad(at + ".requires[" + std::to_string(j) + "]", "must be a \"type:id\" string");
    }
    std::string name = r.find("type")->as_string() + ":" + r.find("id")->as_string();
    if (auto [it, fresh] = index.emplace(name, i); !fresh)
      return bad(at, name + " is declared twice (also resources[" + std::to_string(it->second) + "])");
  }

  // Every `requires` names a declared resource, and the graph has no cycle.
  std::vector<std::vector<std::size_t>> edges(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Value* req = list[i].find("requires");
    if (!req) continue;
    const auto& reqs = req->as_array();
    for (std::size_t j = 0; j < reqs.size(); ++j) {
      auto it = index.find(reqs[j].as_string());
      if (it == index.end())
        return bad("resources[" + std::to_string(i) + "].requires[" + std::to_string(j) + "]",
                   "requires '" + reqs[j].as_string() + "', which is not declared");
      edges[i].push_back(it->second);
    }
  }
  auto name_of = [&](std::size_t i) {
    return list[i].find("type")->as_string() + ":" + list[i].find("id")->as_string();
  };
  enum : char { kWhite, kGrey, kBlack };
  std::vector<char> colour(list.size(), kWhite);
  std::vector<std::size_t> stack;
  std::string cycle;
  std::size_t cycle_at = 0;
  std::function<bool(std::size_t)> visit = [&](std::size_t v) {
    colour[v] = kGrey;
    stack.push_back(v);
    for (std::size_t w : edges[v]) {
      if (colour[w] == kGrey) {
        auto from = std::find(stack.begin(), stack.end(), w);
        for (auto p = from; p != stack.end(); ++p) cycle += name_of(*p) + " -> ";
        cycle += name_of(w);
        cycle_at = w;
        return false;
      }
      if (colour[w] == kWhite && !visit(w)) return false;
    }
    stack.pop_back();
    colour[v] = kBlack;
    return true;
  };
  for (std::size_t i = 0; i < list.size(); ++i)
    if (colour[i] == kWhite && !visit(i))
      return bad("resources[" + std::to_string(cycle_at) + "].requires", "requires cycle: " + cycle);
  return {};
}

sdk::Result<Value> parse_declaration_text(std::string_view text, std::string_view node,
                                          const common::JsonLimits& limits) {
  auto v = common::parse_json(text, limits);
  if (!v) return sdk::fail(v.error());
  if (auto ok = check_declaration(*v, node); !ok) return sdk::fail(ok.error());
  return v;
}

std::string render_declaration(const Value& resources, std::string_view node,
                               std::uint64_t revision) {
  Value out = Value::object();
  out.set("node", std::string(node));
  out.set("revision", static_cast<std::int64_t>(revision));
  out.set("resources", resources);
  return out.to_json();
}

}  // namespace mesh::control
