// Declaration parsing and validation. The checks run in phases over all resources, in the order
// documented in declaration.h, so the error an operator sees for a declaration with several
// problems is the first one in that order. Everything is linear or n·log n in the number of
// resources (hash maps for uniqueness and `requires` lookups, Kahn's algorithm with a min-heap).
#include "mesh/engine/declaration.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <future>
#include <iterator>
#include <queue>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "mesh/common/crypto.h"
#include "mesh/common/json.h"
#include "mesh/common/protocol.h"
#include "mesh/common/text.h"

namespace mesh::engine {
namespace {

using sdk::ErrorCode;
using sdk::Value;

/// A string as it is shown inside a message: escaped and cut at 200 bytes (common::printable).
std::string shown(std::string_view s) { return common::printable(s, 200); }

/// From this size on the digest is computed in parallel with parsing.
constexpr std::size_t kAsyncDigestBytes = 256 * 1024;

std::string at(std::size_t i) { return "resources[" + std::to_string(i) + "]"; }

/// One resource between the phases.
struct Item {
  sdk::Resource res;  // its "type:id" name is built only for messages
  sdk::Provider* provider = nullptr;
};

/// Resource (type, id) → position in the declaration: open addressing over the ids the items
/// already hold (a std::unordered_map keyed by "type:id" would allocate twice per resource).
/// Since a declared type has a provider, and provider names contain no ':', (type, id) equality
/// is "type:id" equality.
class NameIndex {
 public:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  explicit NameIndex(const std::vector<Item>& items) : items_(items) {
    std::size_t size = 16;
    while (size < items.size() * 2) size *= 2;
    slots_.assign(size, 0);
    mask_ = size - 1;
  }
  /// Adds item `i`; returns the position already holding its (type, id), or npos.
  std::size_t insert(std::size_t i) {
    const sdk::ResourceId& rid = items_[i].res.rid;
    for (std::size_t s = hash(rid) & mask_;; s = (s + 1) & mask_) {
      if (slots_[s] == 0) {
        slots_[s] = static_cast<std::uint32_t>(i + 1);
        return npos;
      }
      if (same(items_[slots_[s] - 1].res.rid, rid)) return slots_[s] - 1;
    }
  }
  /// Position of the resource `rid`, or npos.
  std::size_t find(const sdk::ResourceId& rid) const {
    for (std::size_t s = hash(rid) & mask_;; s = (s + 1) & mask_) {
      if (slots_[s] == 0) return npos;
      if (same(items_[slots_[s] - 1].res.rid, rid)) return slots_[s] - 1;
    }
  }

 private:
  static std::size_t hash(const sdk::ResourceId& rid) {
    const std::size_t h = std::hash<std::string_view>{}(rid.id);
    return h ^ (std::hash<std::string_view>{}(rid.type) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  }
  static bool same(const sdk::ResourceId& a, const sdk::ResourceId& b) {
    return a.id == b.id && a.type == b.type;
  }

  const std::vector<Item>& items_;
  std::vector<std::uint32_t> slots_;  // position + 1; 0 = empty
  std::size_t mask_ = 0;
};

sdk::Result<Declaration> invalid(std::string message, std::string path) {
  return sdk::fail(ErrorCode::InvalidArgument, std::move(message), std::move(path));
}

/// "resources[2] (file:/etc/motd): " — the prefix every per-resource message starts with.
std::string prefix(std::size_t i, const Item& item) {
  return at(i) + " (" + shown(item.res.rid.str()) + "): ";
}

/// Checks one resource's shape and moves its parts into `item`.
sdk::Result<void> check_shape(std::size_t i, Value& v, Item& item) {
  auto bad = [&](std::string msg, std::string sub) {
    return sdk::fail(ErrorCode::InvalidArgument, std::move(msg),
                     sub.empty() ? at(i) : at(i) + "." + sub);
  };
  if (!v.is_object()) return bad(at(i) + ": must be an object", "");
  Value* type = nullptr;
  Value* id = nullptr;
  Value* properties = nullptr;
  Value* requires_ = nullptr;
  for (auto& [key, val] : v.as_object()) {
    if (key == "type") type = &val;
    else if (key == "id") id = &val;
    else if (key == "properties") properties = &val;
    else if (key == "requires") requires_ = &val;
    else
      return bad(at(i) + ": unknown key '" + shown(key) +
                     "' (valid: type, id, properties, requires)",
                 key);
  }
  for (auto [field, val] : {std::pair<const char*, Value*>{"type", type}, {"id", id}}) {
    if (!val) return bad(at(i) + ": " + field + ": is required", field);
    if (!val->is_string() || val->as_string().empty())
      return bad(at(i) + ": " + field + ": must be a non-empty string", field);
    // No control characters (a newline would name a file `new\nline` and split log lines), and
    // no line-separator or bidirectional characters: the same rule as the control plane's.
    if (auto pos = common::first_unprintable(val->as_string()); pos != std::string::npos)
      return bad(at(i) + ": " + field + ": '" + common::printable(val->as_string(), 64) +
                     "' contains a control character (" + common::printable(val->as_string().substr(pos, 1)) +
                     " at byte " + std::to_string(pos) +
                     "); names and ids may not contain control, line-separator or bidirectional characters",
                 field);
  }
  item.res.rid.type = std::move(type->as_string());
  item.res.rid.id = std::move(id->as_string());

  // Required, as `mesh declare` requires it (docs/protocol.md "API", declare): whatever the host
  // accepts in a file, the control plane accepts too. `{}` declares no property.
  if (!properties)
    return bad(prefix(i, item) + "properties: is required (an object; {} when no property is set)", "properties");
  if (!properties->is_object())
    return bad(prefix(i, item) + "properties: must be an object", "properties");
  item.res.properties = std::move(*properties);
  if (requires_) {
    if (!requires_->is_array())
      return bad(prefix(i, item) + "requires: must be a list of \"type:id\" strings", "requires");
    auto& list = requires_->as_array();
    item.res.depends_on.reserve(list.size());
    for (std::size_t j = 0; j < list.size(); ++j) {
      const std::string sub = "requires[" + std::to_string(j) + "]";
      if (!list[j].is_string())
        return bad(prefix(i, item) + sub + ": must be a \"type:id\" string", sub);
      auto rid = sdk::ResourceId::parse(list[j].as_string());
      if (!rid || list[j].as_string().find('\0') != std::string::npos)
        return bad(prefix(i, item) + sub + ": '" + shown(list[j].as_string()) +
                       "' is not a resource name of the form type:id",
                   sub);
      item.res.depends_on.push_back(std::move(*rid));
    }
  }
  return {};
}

/// Re-raises a provider's or schema's error about resource `i`, with the resource in the message
/// and the declaration path in `path`.
sdk::Result<Declaration> about(std::size_t i, const Item& item, const sdk::Error& e,
                               bool keep_code) {
  return sdk::fail(keep_code ? e.code : ErrorCode::InvalidArgument,
                   prefix(i, item) + e.describe(), e.path.empty() ? at(i) : at(i) + "." + e.path);
}

/// sdk::apply_defaults in place, growing the member list at most once (this runs for every
/// resource of a 10,000-resource declaration).
void fill_defaults(const sdk::Schema& schema, Value& object) {
  auto& members = object.as_object();
  const sdk::Attribute* missing[16];
  std::size_t n_missing = 0;
  bool overflow = false;
  for (const auto& a : schema.attributes) {
    if (!a.default_value) continue;
    bool present = false;
    for (const auto& m : members)
      if (m.first == a.name) {
        present = true;
        break;
      }
    if (present) continue;
    if (n_missing == std::size(missing)) {
      overflow = true;
      break;
    }
    missing[n_missing++] = &a;
  }
  if (overflow) {
    object = sdk::apply_defaults(schema, std::move(object));
    return;
  }
  if (n_missing == 0) return;
  members.reserve(members.size() + n_missing);
  for (std::size_t k = 0; k < n_missing; ++k)
    members.emplace_back(missing[k]->name, *missing[k]->default_value);
}

}  // namespace

// --- ProviderRegistry ------------------------------------------------------------------------

sdk::Result<void> ProviderRegistry::add(const std::string& type,
                                        std::shared_ptr<sdk::Provider> provider) {
  if (type.empty() || !provider)
    return sdk::fail(ErrorCode::InvalidArgument, "a provider needs a type name and an object");
  if (providers_.count(type))
    return sdk::fail(ErrorCode::AlreadyExists,
                     "a provider for resource type '" + type + "' is already registered");
  providers_.emplace(type, std::move(provider));
  return {};
}

sdk::Provider* ProviderRegistry::find(std::string_view type) const noexcept {
  auto it = providers_.find(type);
  return it == providers_.end() ? nullptr : it->second.get();
}

std::vector<std::string> ProviderRegistry::types() const {
  std::vector<std::string> out;
  out.reserve(providers_.size());
  for (const auto& [type, p] : providers_) out.push_back(type);
  return out;
}

// --- parse_declaration -----------------------------------------------------------------------

sdk::Result<Declaration> parse_declaration(std::string_view text, const ProviderRegistry& providers,
                                           const ParseOptions& options) {
  // 1. Size, before anything looks at the bytes (an oversize body is reported as such even when
  //    it is also invalid UTF-8).
  if (text.size() > options.max_bytes)
    return invalid("declaration is " + std::to_string(text.size()) +
                       " bytes, over the limit of " + std::to_string(options.max_bytes) + " bytes",
                   "");

  // The digest of a large text is computed on a second thread while the text is parsed:
  // SHA-256 of a 1 MiB declaration costs about as much as parsing it.
  std::future<std::string> digest;
  if (text.size() >= kAsyncDigestBytes) {
    try {
      digest = std::async(std::launch::async, [text] { return common::sha256_hex(text); });
    } catch (const std::system_error&) {
      // No thread to be had: hash inline at the end.
    }
  }

  // 2. UTF-8, syntax, depth, duplicate keys.
  common::JsonLimits limits;
  limits.max_bytes = options.max_bytes;
  limits.max_depth = options.max_depth;
  auto parsed = common::parse_json(text, limits);
  if (!parsed) {
    const auto& e = parsed.error();
    return sdk::fail(e.code, "declaration: " + e.describe(), e.path);
  }
  Value& root = *parsed;

  // 3. Top-level shape.
  if (!root.is_object()) return invalid("declaration: must be a JSON object", "");
  Declaration decl;
  Value* resources = nullptr;
  for (auto& [key, val] : root.as_object()) {
    if (key == "node") {
      if (!val.is_string()) return invalid("node: must be a string", "node");
      decl.node = val.as_string();
      // When present it names a node; "" is not one (mesh declare refuses it too).
      if (!protocol::valid_node_name(decl.node))
        return invalid("node: '" + shown(decl.node) +
                           "' is not a node name (1-64 characters of a-z, 0-9, '-', '_'); omit `node` or name the node",
                       "node");
    } else if (key == "revision") {
      if (!options.allow_revision)
        return invalid("revision: not allowed here (revisions are set by the control plane)",
                       "revision");
      if (!val.is_int() || val.as_int() < 1)
        return invalid("revision: must be an integer ≥ 1", "revision");
      decl.revision = static_cast<std::uint64_t>(val.as_int());
    } else if (key == "resources") {
      if (!val.is_array()) return invalid("resources: must be a list of resources", "resources");
      resources = &val;
    } else {
      return invalid("declaration: unknown key '" + shown(key) + "' (valid: node, " +
                         (options.allow_revision ? "revision, " : "") + "resources)",
                     key);
    }
  }
  if (!resources) return invalid("resources: is required", "resources");
  if (!options.expected_node.empty() && !decl.node.empty() && decl.node != options.expected_node)
    return invalid("node: the declaration is for node '" + shown(decl.node) + "', this node is '" +
                       options.expected_node + "'",
                   "node");

  // 4. Each resource's shape.
  auto& list = resources->as_array();
  const std::size_t n = list.size();
  std::vector<Item> items(n);
  for (std::size_t i = 0; i < n; ++i)
    if (auto ok = check_shape(i, list[i], items[i]); !ok) return sdk::fail(ok.error());

  // 5. A provider for each type.
  {
    std::string_view last_type;
    sdk::Provider* last = nullptr;
    for (std::size_t i = 0; i < n; ++i) {
      const std::string& type = items[i].res.rid.type;
      if (!last || type != last_type) {
        last = providers.find(type);
        last_type = type;
      }
      if (!last) {
        std::string loaded;
        for (const auto& t : providers.types()) loaded += (loaded.empty() ? "" : ", ") + t;
        return invalid(at(i) + ": unknown resource type '" + shown(type) + "' (loaded providers: " +
                           (loaded.empty() ? "none" : loaded) + ")",
                       at(i) + ".type");
      }
      items[i].provider = last;
    }
  }

  // 6. Unique type:id.
  if (n > 0xfffffffeu) return invalid("resources: too many resources", "resources");
  NameIndex index(items);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t first = index.insert(i);
    if (first != NameIndex::npos)
      return invalid(at(i) + ": duplicate resource " + shown(items[i].res.rid.str()) + " (first at " +
                         at(first) + ")",
                     at(i) + ".id");
  }

  // 7. Properties against the provider's schema (defaults filled in) for every resource, then
  //    Provider::validate for every resource (so validate only ever sees well-typed properties).
  for (std::size_t i = 0; i < n; ++i) {
    Item& item = items[i];
    const sdk::Schema& schema = item.provider->schema();
    if (auto ok = sdk::validate_against(schema, item.res.properties, "properties"); !ok)
      return about(i, item, ok.error(), false);
    fill_defaults(schema, item.res.properties);
  }
  for (std::size_t i = 0; i < n; ++i) {
    Item& item = items[i];
    if (auto ok = item.provider->validate(item.res); !ok)
      // A provider's InvalidArgument stays one; an Internal error (an exception in validate) is
      // a bug in the provider, not in the declaration, and keeps its code.
      return about(i, item, ok.error(), true);
  }

  // 8. Every `requires` names a declared resource. Edges run from a requirement to the resources
  //    that need it.
  std::vector<std::uint32_t> indegree(n, 0);
  std::vector<std::vector<std::size_t>> dependents(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& reqs = items[i].res.depends_on;
    for (std::size_t j = 0; j < reqs.size(); ++j) {
      const std::size_t dep = index.find(reqs[j]);
      if (dep == NameIndex::npos)
        return invalid(prefix(i, items[i]) + "requires '" + shown(reqs[j].str()) +
                           "', which is not declared",
                       at(i) + ".requires[" + std::to_string(j) + "]");
      dependents[dep].push_back(i);
      ++indegree[i];
    }
  }

  //    Then `restart_on` (a property of any type: a list of "type:id"): the resource is restarted
  //    after what it names changed, so each entry orders like a `requires` edge; an entry must
  //    name a declared resource. Most resources have none, so these edges are kept apart.
  std::unordered_map<std::size_t, std::vector<std::size_t>> restart_deps;  // resource → entries
  for (std::size_t i = 0; i < n; ++i) {
    const Value* list = items[i].res.properties.find(kRestartOnProperty);
    if (!list) continue;
    const std::string base = at(i) + ".properties." + kRestartOnProperty;
    if (!list->is_array())
      return invalid(prefix(i, items[i]) + "properties." + kRestartOnProperty +
                         ": must be a list of \"type:id\" strings",
                     base);
    const auto& entries = list->as_array();
    for (std::size_t j = 0; j < entries.size(); ++j) {
      const std::string sub = "properties." + std::string(kRestartOnProperty) + "[" + std::to_string(j) + "]";
      if (!entries[j].is_string())
        return invalid(prefix(i, items[i]) + sub + ": must be a \"type:id\" string", at(i) + "." + sub);
      const std::string& text_entry = entries[j].as_string();
      auto rid = sdk::ResourceId::parse(text_entry);
      if (!rid || text_entry.find('\0') != std::string::npos)
        return invalid(prefix(i, items[i]) + sub + ": '" + shown(text_entry) +
                           "' is not a resource name of the form type:id",
                       at(i) + "." + sub);
      const std::size_t dep = index.find(*rid);
      if (dep == NameIndex::npos)
        return invalid(prefix(i, items[i]) + sub + ": restarts on '" + shown(text_entry) +
                           "', which is not declared",
                       at(i) + "." + sub);
      restart_deps[i].push_back(dep);
      dependents[dep].push_back(i);
      ++indegree[i];
    }
  }

  // 9. No cycle; Kahn's algorithm with the ready set ordered by declaration index, so among
  //    resources whose requirements are met the declaration order is kept.
  std::vector<std::size_t> order;
  order.reserve(n);
  //    Resources without requirements are ready from the start and are taken in index order by
  //    a cursor; only those released by a requirement go through the heap.
  {
    std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> released;
    std::size_t cursor = 0;
    for (;;) {
      while (cursor < n && (!items[cursor].res.depends_on.empty() ||
                            (!restart_deps.empty() && restart_deps.count(cursor))))
        ++cursor;
      std::size_t i;
      if (!released.empty() && (cursor == n || released.top() < cursor)) {
        i = released.top();
        released.pop();
      } else if (cursor < n) {
        i = cursor++;
      } else {
        break;
      }
      order.push_back(i);
      for (std::size_t d : dependents[i])
        if (--indegree[d] == 0) released.push(d);
    }
  }
  if (order.size() != n) {
    // Every resource left over has an unmet requirement that is also left over; walking those
    // from the lowest-index one must come back to a resource already on the walk.
    std::vector<bool> done(n, false);
    for (std::size_t i : order) done[i] = true;
    std::size_t start = 0;
    while (done[start]) ++start;
    std::unordered_map<std::size_t, std::size_t> pos;  // resource → position on the walk
    std::vector<std::size_t> walk;
    std::vector<bool> by_restart;  // whether the step from walk[k] is a restart_on edge
    std::size_t cur = start;
    while (!pos.count(cur)) {
      pos.emplace(cur, walk.size());
      walk.push_back(cur);
      std::size_t next = cur;
      bool restart_edge = false;
      bool found = false;
      for (const auto& r : items[cur].res.depends_on) {
        const std::size_t dep = index.find(r);
        if (!done[dep]) {
          next = dep;
          found = true;
          break;
        }
      }
      if (!found) {
        if (auto it = restart_deps.find(cur); it != restart_deps.end())
          for (std::size_t dep : it->second)
            if (!done[dep]) {
              next = dep;
              restart_edge = true;
              break;
            }
      }
      by_restart.push_back(restart_edge);
      cur = next;
    }
    const auto first = static_cast<std::ptrdiff_t>(pos[cur]);
    std::vector<std::size_t> cycle(walk.begin() + first, walk.end());
    std::vector<bool> cycle_restart(by_restart.begin() + first, by_restart.end());
    // Start the cycle at its member declared first, for a stable message.
    const auto lowest = std::min_element(cycle.begin(), cycle.end()) - cycle.begin();
    std::rotate(cycle.begin(), cycle.begin() + lowest, cycle.end());
    std::rotate(cycle_restart.begin(), cycle_restart.begin() + lowest, cycle_restart.end());
    std::string text_cycle;
    for (std::size_t i : cycle) text_cycle += shown(items[i].res.rid.str()) + " -> ";
    text_cycle += shown(items[cycle.front()].res.rid.str());
    const bool any_restart = std::find(cycle_restart.begin(), cycle_restart.end(), true) != cycle_restart.end();
    if (any_restart) text_cycle += " (restart_on orders like requires)";
    return invalid("requires cycle: " + text_cycle,
                   at(cycle.front()) + (cycle_restart.front() ? std::string(".properties.") + kRestartOnProperty
                                                              : std::string(".requires")));
  }

  decl.resources.reserve(n);
  for (std::size_t i : order) decl.resources.push_back(std::move(items[i].res));
  decl.digest = digest.valid() ? digest.get() : common::sha256_hex(text);
  return decl;
}

}  // namespace mesh::engine
