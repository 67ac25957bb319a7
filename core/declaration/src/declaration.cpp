// The one declaration check (see declaration.h for the phases). Each phase runs over all
// resources and appends what it finds; a resource that failed its shape check is left out of the
// later phases, so one mistake is reported once. Everything is linear or n·log n in the number of
// resources (hash maps for uniqueness and lookups, Kahn's algorithm with a min-heap).
#include "mesh/declaration/declaration.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <queue>
#include <unordered_map>
#include <utility>

#include "mesh/common/protocol.h"
#include "mesh/common/text.h"
#include "mesh/sdk/resource.h"

namespace mesh::declaration {
namespace {

using sdk::ErrorCode;
using sdk::Value;

/// A string as it is shown inside a message: escaped and cut at 200 bytes (common::printable).
std::string shown(std::string_view s) { return common::printable(s, 200); }

std::string at(std::size_t i) { return "resources[" + std::to_string(i) + "]"; }

/// One resource between the phases.
struct Item {
  /// The resource as written: set only while Checker::resource() runs for it.
  const Value* v = nullptr;
  // Set when the resource has a valid type and id: during check_shape views of the resource's
  // strings, then of the checker's own copies (NameStore), which live as long as the checker.
  std::string_view type, id;
  std::size_t hash = 0;  // name_hash(type, id), once named
  std::vector<sdk::ResourceId> requires_;
  /// properties.restart_on as written (phase 6 reads it here: once validate() has been called
  /// for a resource, its `properties` are not read again, so a caller may take them).
  std::unique_ptr<Value> restart_on;
  bool shaped = false;          // passed phase 2
  const sdk::Schema* schema = nullptr;
  bool unique = true;
  std::string name() const { return shown(std::string(type) + ":" + std::string(id)); }
};

std::size_t name_hash(std::string_view type, std::string_view id) noexcept {
  const std::size_t h = std::hash<std::string_view>{}(id);
  return h ^ (std::hash<std::string_view>{}(type) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

/// The resources by `type:id`: an open-addressing table of positions in the item list (no
/// allocation per resource; the hashes are kept with the items, so growing rehashes nothing).
class NameIndex {
 public:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  /// The position of the resource named (type, id) with hash `hash`, or npos.
  template <typename Items>
  std::size_t find(std::size_t hash, std::string_view type, std::string_view id, const Items& items) const {
    if (slots_.empty()) return npos;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t at = hash & mask;; at = (at + 1) & mask) {
      const std::uint32_t slot = slots_[at];
      if (slot == 0) return npos;
      const auto& item = items[slot - 1];
      if (item.hash == hash && item.id == id && item.type == type) return slot - 1;
    }
  }

  /// Adds items[i] (named, its hash set) unless its name is there: returns the position of the
  /// one there first, or npos when it was added.
  template <typename Items>
  std::size_t insert(std::size_t i, const Items& items) {
    const auto& item = items[i];
    if (const std::size_t first = find(item.hash, item.type, item.id, items); first != npos) return first;
    if ((count_ + 1) * 2 > slots_.size()) grow(items);
    place(i, item.hash);
    ++count_;
    return npos;
  }

 private:
  void place(std::size_t i, std::size_t hash) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t at = hash & mask;
    while (slots_[at] != 0) at = (at + 1) & mask;
    slots_[at] = static_cast<std::uint32_t>(i + 1);
  }
  template <typename Items>
  void grow(const Items& items) {
    std::vector<std::uint32_t> old(std::max<std::size_t>(slots_.size() * 2, 64), 0);
    old.swap(slots_);
    for (std::uint32_t slot : old)
      if (slot != 0) place(slot - 1, items[slot - 1].hash);
  }

  std::vector<std::uint32_t> slots_;  // 0: empty, else position + 1
  std::size_t count_ = 0;
};

/// Appends diagnostics to one list; Checker points it at the list of the phase running.
class Collector {
 public:
  explicit Collector(Diagnostics& out) : out_(&out) {}
  void target(Diagnostics& out) { out_ = &out; }

  /// A document-level problem: text "label: message" (label = path, or "declaration").
  void document(std::string path, std::string message, std::string label = {}) {
    if (label.empty()) label = path.empty() ? "declaration" : path;
    Diagnostic d;
    d.path = std::move(path);
    d.text = label + ": " + message;
    d.message = std::move(message);
    out_->push_back(std::move(d));
  }
  /// A problem of resource i at `sub` ("properties.mode", or "" for the resource itself). The
  /// text is "resources[i] (type:id): sub: message" ("resources[i]: ..." when the name is not
  /// known); with `sub_in_text` false the sub-path is left out of the text (it is in `path`).
  void resource(std::size_t i, const Item* item, const std::string& sub, std::string message,
                ErrorCode code = ErrorCode::InvalidArgument, bool sub_in_text = true) {
    Diagnostic d;
    d.code = code;
    d.path = sub.empty() ? at(i) : at(i) + "." + sub;
    d.text = at(i);
    if (item) {
      d.resource = item->name();
      d.text += " (" + d.resource + ")";
    }
    d.text += ": ";
    if (sub_in_text && !sub.empty()) d.text += sub + ": ";
    d.text += message;
    d.message = std::move(message);
    out_->push_back(std::move(d));
  }
  /// A problem whose text stands alone (a cycle).
  void standalone(const Item* item, std::string path, std::string message) {
    Diagnostic d;
    if (item) d.resource = item->name();
    d.path = std::move(path);
    d.text = message;
    d.message = std::move(message);
    out_->push_back(std::move(d));
  }
  std::size_t size() const { return out_->size(); }

 private:
  Diagnostics* out_;
};

const char* kNameRule =
    "; names and ids may not contain control, line-separator or bidirectional characters";

/// Phase 2 for one resource; returns whether it is well-shaped.
bool check_shape(std::size_t i, const Value& v, Item& item, Collector& c) {
  item.v = &v;
  if (!v.is_object()) {
    c.resource(i, nullptr, "", "must be an object");
    return false;
  }
  bool ok = true;
  const Value* type = nullptr;
  const Value* id = nullptr;
  const Value* properties = nullptr;
  const Value* requires_ = nullptr;
  for (const auto& [key, val] : v.as_object()) {
    if (key == "type") type = &val;
    else if (key == "id") id = &val;
    else if (key == "properties") properties = &val;
    else if (key == "requires") requires_ = &val;
    else {
      c.resource(i, nullptr, key, "unknown key '" + shown(key) + "' (valid: type, id, properties, requires)",
                 ErrorCode::InvalidArgument, false);
      ok = false;
    }
  }
  bool named = true;
  for (auto [field, val] : {std::pair<const char*, const Value*>{"type", type}, {"id", id}}) {
    if (!val) {
      c.resource(i, nullptr, field, "is required");
      named = false;
    } else if (!val->is_string() || val->as_string().empty()) {
      c.resource(i, nullptr, field, "must be a non-empty string");
      named = false;
    } else if (auto pos = common::first_unprintable(val->as_string()); pos != std::string::npos) {
      // No control characters (a newline would name a file `new\nline` and split log lines),
      // and no line-separator or bidirectional characters.
      c.resource(i, nullptr, field,
                 "'" + common::printable(val->as_string(), 64) + "' contains a control character (" +
                     common::printable(val->as_string().substr(pos, 1)) + " at byte " +
                     std::to_string(pos) + ")" + kNameRule);
      named = false;
    }
  }
  if (!named) return false;
  item.type = type->as_string();
  item.id = id->as_string();

  // Required, as `mesh declare` requires it: whatever the host accepts in a file, the control
  // plane accepts too. `{}` declares no property.
  if (!properties) {
    c.resource(i, &item, "properties", "is required (an object; {} when no property is set)");
    ok = false;
  } else if (!properties->is_object()) {
    c.resource(i, &item, "properties", "must be an object");
    ok = false;
  } else if (const Value* restart_on = properties->find(kRestartOnProperty)) {
    item.restart_on = std::make_unique<Value>(*restart_on);
  }
  if (requires_) {
    if (!requires_->is_array()) {
      c.resource(i, &item, "requires", "must be a list of \"type:id\" strings");
      ok = false;
    } else {
      const auto& list = requires_->as_array();
      item.requires_.reserve(list.size());
      for (std::size_t j = 0; j < list.size(); ++j) {
        const std::string sub = "requires[" + std::to_string(j) + "]";
        if (!list[j].is_string()) {
          c.resource(i, &item, sub, "must be a \"type:id\" string");
          ok = false;
          continue;
        }
        auto rid = sdk::ResourceId::parse(list[j].as_string());
        if (!rid || list[j].as_string().find('\0') != std::string::npos) {
          c.resource(i, &item, sub,
                     "'" + shown(list[j].as_string()) + "' is not a resource name of the form type:id");
          ok = false;
          continue;
        }
        item.requires_.push_back(std::move(*rid));
      }
    }
  }
  return ok;
}

}  // namespace

std::string Diagnostic::describe() const {
  std::string out = path;
  if (!resource.empty()) out += (out.empty() ? "" : " ") + ("(" + resource + ")");
  return out.empty() ? message : out + ": " + message;
}

Value to_json(const Diagnostics& diagnostics) {
  Value::Array list;
  list.reserve(diagnostics.size());
  for (const auto& d : diagnostics) {
    Value o = Value::object();
    o.set("resource", d.resource);
    o.set("path", d.path);
    o.set("code", std::string(sdk::to_string(d.code)));
    o.set("message", d.message);
    list.push_back(std::move(o));
  }
  return Value(std::move(list));
}

Diagnostics from_json(const Value& list) {
  Diagnostics out;
  if (!list.is_array()) return out;
  for (const auto& e : list.as_array()) {
    if (!e.is_object()) continue;
    Diagnostic d;
    d.resource = e.get_string("resource");
    d.path = e.get_string("path");
    d.message = e.get_string("message");
    const std::string code = e.get_string("code");
    d.code = ErrorCode::InvalidArgument;
    for (int k = 0; k <= static_cast<int>(ErrorCode::Internal); ++k)
      if (code == sdk::to_string(static_cast<ErrorCode>(k))) d.code = static_cast<ErrorCode>(k);
    d.text = d.describe();
    out.push_back(std::move(d));
  }
  return out;
}

std::string to_text(const Diagnostics& diagnostics, std::string_view indent) {
  std::string out;
  for (const auto& d : diagnostics) {
    out += indent;
    out += d.describe();
    out += '\n';
  }
  return out;
}

sdk::Error first_error(const Diagnostics& diagnostics) {
  if (diagnostics.empty()) return sdk::Error{ErrorCode::Internal, "no diagnostic", ""};
  return diagnostics.front().to_error();
}

namespace {

/// Copies of the resources' types and ids, in blocks that never move: the index and the later
/// phases keep views of them after the resource itself is gone (a reader that hands the
/// resources over one by one has moved their strings on). ~1 MB at 20,000 file resources.
class NameStore {
 public:
  std::string_view keep(std::string_view s) {
    if (s.size() > kBlock / 4) {  // a long name gets a block of its own
      big_.push_back(std::make_unique<char[]>(s.size()));
      std::copy(s.begin(), s.end(), big_.back().get());
      return {big_.back().get(), s.size()};
    }
    if (blocks_.empty() || used_ + s.size() > kBlock) {
      blocks_.push_back(std::make_unique<char[]>(kBlock));
      used_ = 0;
    }
    char* at = blocks_.back().get() + used_;
    std::copy(s.begin(), s.end(), at);
    used_ += s.size();
    return {at, s.size()};
  }

 private:
  static constexpr std::size_t kBlock = 64 * 1024;
  std::vector<std::unique_ptr<char[]>> blocks_;
  std::vector<std::unique_ptr<char[]>> big_;
  std::size_t used_ = 0;
};

/// The lists the diagnostics of the phases go to while resources come in one at a time; put
/// together in phase order at the end, so the order is the one of a check over the whole tree.
enum Bucket { kDocument, kShape, kTypes, kUnique, kSchema, kValidate, kBuckets };

}  // namespace

struct Checker::State {
  explicit State(const CheckOptions& o) : options(o), c(buckets[kDocument]) {}

  const CheckOptions& options;
  Diagnostics buckets[kBuckets];
  Collector c;
  bool not_object = false;
  bool resources_seen = false;    // a `resources` member, of any kind
  bool resources_usable = false;  // ... that is an array
  bool finished = false;
  std::vector<Item> items;
  NameStore names;
  NameIndex index;
  // Phase 3's last lookup: declarations list many resources of one type in a row.
  std::string_view last_type;
  const sdk::Schema* last_schema = nullptr;
  bool have_last = false;
  std::vector<sdk::Error> errors;  // validate's, reused
};

Checker::Checker(const CheckOptions& options) : s_(std::make_unique<State>(options)) {}
Checker::~Checker() = default;
Checker::Checker(Checker&&) noexcept = default;
Checker& Checker::operator=(Checker&&) noexcept = default;

void Checker::not_an_object() {
  s_->not_object = true;
  s_->c.target(s_->buckets[kDocument]);
  s_->c.document("", "must be a JSON object");
}

void Checker::member(std::string_view key, const Value& val) {
  State& s = *s_;
  const CheckOptions& options = s.options;
  Collector& c = s.c;
  c.target(s.buckets[kDocument]);
  if (key == "node") {
    if (!val.is_string()) {
      c.document("node", "must be a string");
    } else if (!protocol::valid_node_name(val.as_string())) {
      // When present it names a node; "" is not one.
      c.document("node", "'" + shown(val.as_string()) +
                             "' is not a node name (1-64 characters of a-z, 0-9, '-', '_'); omit `node` or name the node");
    } else if (!options.expected_node.empty() && val.as_string() != options.expected_node) {
      c.document("node", options.reader_is_node
                             ? "the declaration is for node '" + shown(val.as_string()) +
                                   "', this node is '" + options.expected_node + "'"
                             : "names '" + shown(val.as_string()) + "', but the declaration is for '" +
                                   options.expected_node + "'");
    }
  } else if (key == "revision") {
    if (!options.allow_revision)
      c.document("revision", "is assigned by the control plane; remove it from the file");
    else if (!val.is_int() || val.as_int() < 1)
      c.document("revision", "must be an integer ≥ 1");
  } else if (key == "resources") {
    s.resources_seen = true;
    if (!val.is_array()) {
      c.document("resources", "must be a list of resources");
    } else {
      begin_resources();
      for (const auto& r : val.as_array()) resource(r);
    }
  } else {
    c.document(std::string(key), "unknown key '" + shown(key) + "' (valid: node, " +
                                     (options.allow_revision ? "revision, " : "") + "resources)",
               "declaration");
  }
}

void Checker::begin_resources() {
  s_->resources_seen = true;
  s_->resources_usable = true;
}

void Checker::resource(const Value& v) {
  State& s = *s_;
  const CheckOptions& options = s.options;
  Collector& c = s.c;
  const std::size_t i = s.items.size();
  Item& item = s.items.emplace_back();

  // 2. Its shape. The name, when it has one, is copied: `v` is gone after this call.
  c.target(s.buckets[kShape]);
  item.shaped = check_shape(i, v, item, c);
  if (!item.type.empty()) {
    item.type = s.names.keep(item.type);
    item.id = s.names.keep(item.id);
  }

  // 3. A schema for its type.
  if (options.schema_of && item.shaped) {
    if (!s.have_last || item.type != s.last_type) {
      s.last_schema = options.schema_of(item.type);
      s.last_type = item.type;
      s.have_last = true;
    }
    if (!s.last_schema) {
      c.target(s.buckets[kTypes]);
      c.resource(i, nullptr, "type",
                 "unknown resource type '" + shown(item.type) + "' (" +
                     (options.known_types.empty() ? "no providers" : options.known_types) + ")",
                 ErrorCode::InvalidArgument, false);
      item.shaped = false;
    } else {
      item.schema = s.last_schema;
    }
  }

  // 4. Unique type:id (among resources that have one; the later one is reported).
  if (!item.type.empty()) {
    item.hash = name_hash(item.type, item.id);
    if (const std::size_t first = s.index.insert(i, s.items); first != NameIndex::npos) {
      c.target(s.buckets[kUnique]);
      c.resource(i, nullptr, "id", "duplicate resource " + item.name() + " (first at " + at(first) + ")",
                 ErrorCode::InvalidArgument, false);
      item.unique = false;
    }
  }

  // 5. Id format and properties against the schema, then the provider's own validation when
  //    they passed (so validate only ever sees well-typed properties).
  if (options.schema_of && item.shaped && item.schema && item.unique) {
    c.target(s.buckets[kSchema]);
    const std::size_t before = c.size();
    if (auto why = sdk::check_id_format(item.schema->id_format, item.id); !why.empty())
      c.resource(i, &item, "id", "'" + shown(item.id) + "' " + why);
    for (auto& e : sdk::validate_all(*item.schema, *v.find("properties"), "properties"))
      c.resource(i, &item, e.path, std::move(e.message));
    if (c.size() == before && options.validate) {
      c.target(s.buckets[kValidate]);
      s.errors.clear();
      options.validate(i, v, s.errors);
      for (auto& e : s.errors) {
        // A provider's InvalidArgument stays one; an Internal error (an exception in
        // validate) is a bug in the provider, not in the declaration, and keeps its code.
        const std::string sub = e.path;
        c.resource(i, &item, sub, e.message, e.code);
      }
    }
  }
  item.v = nullptr;
}

Checked Checker::finish() {
  State& s = *s_;
  s.finished = true;
  Checked result;
  Diagnostics& out = result.diagnostics;
  if (s.not_object) {
    out = std::move(s.buckets[kDocument]);
    return result;
  }
  s.c.target(s.buckets[kDocument]);
  if (!s.resources_seen) s.c.document("resources", "is required");
  if (!s.resources_usable) {
    out = std::move(s.buckets[kDocument]);
    return result;
  }
  auto& items = s.items;
  const std::size_t n = items.size();
  if (n > 0xfffffffeu) {
    s.c.document("resources", "too many resources");
    out = std::move(s.buckets[kDocument]);
    return result;
  }
  {
    std::size_t total = 0;
    for (const auto& b : s.buckets) total += b.size();
    out.reserve(total);
    for (auto& b : s.buckets)
      for (auto& d : b) out.push_back(std::move(d));
  }
  Collector c(out);
  NameIndex& index = s.index;

  // 6. Every `requires` names a declared resource. Edges run from a requirement to the
  //    resources that need it.
  std::vector<std::uint32_t> indegree(n, 0);
  std::vector<std::vector<std::size_t>> dependents(n);
  std::vector<std::vector<std::size_t>> req_deps(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!items[i].shaped) continue;
    const auto& reqs = items[i].requires_;
    for (std::size_t j = 0; j < reqs.size(); ++j) {
      const std::size_t dep = index.find(name_hash(reqs[j].type, reqs[j].id), reqs[j].type, reqs[j].id, items);
      if (dep == NameIndex::npos) {
        c.resource(i, &items[i], "requires[" + std::to_string(j) + "]",
                   "requires '" + shown(reqs[j].str()) + "', which is not declared", ErrorCode::InvalidArgument,
                   false);
        continue;
      }
      req_deps[i].push_back(dep);
      dependents[dep].push_back(i);
      ++indegree[i];
    }
  }

  //    Then `restart_on` (a property of any type: a list of "type:id"): the resource is
  //    restarted after what it names changed, so each entry orders like a `requires` edge.
  std::unordered_map<std::size_t, std::vector<std::size_t>> restart_deps;  // resource → entries
  for (std::size_t i = 0; i < n; ++i) {
    if (!items[i].shaped) continue;
    const Value* entries_v = items[i].restart_on.get();
    if (!entries_v) continue;
    const std::string base = std::string("properties.") + kRestartOnProperty;
    if (!entries_v->is_array()) {
      c.resource(i, &items[i], base, "must be a list of \"type:id\" strings");
      continue;
    }
    const auto& entries = entries_v->as_array();
    for (std::size_t j = 0; j < entries.size(); ++j) {
      const std::string sub = base + "[" + std::to_string(j) + "]";
      if (!entries[j].is_string()) {
        c.resource(i, &items[i], sub, "must be a \"type:id\" string");
        continue;
      }
      const std::string& text_entry = entries[j].as_string();
      auto rid = sdk::ResourceId::parse(text_entry);
      if (!rid || text_entry.find('\0') != std::string::npos) {
        c.resource(i, &items[i], sub, "'" + shown(text_entry) + "' is not a resource name of the form type:id");
        continue;
      }
      const std::size_t dep = index.find(name_hash(rid->type, rid->id), rid->type, rid->id, items);
      if (dep == NameIndex::npos) {
        c.resource(i, &items[i], sub, "restarts on '" + shown(text_entry) + "', which is not declared");
        continue;
      }
      restart_deps[i].push_back(dep);
      dependents[dep].push_back(i);
      ++indegree[i];
    }
  }

  // 7. No cycle; Kahn's algorithm with the ready set ordered by declaration index, so among
  //    resources whose requirements are met the declaration order is kept. Resources without
  //    requirements are ready from the start and are taken in index order by a cursor; only
  //    those released by a requirement go through the heap.
  std::vector<std::size_t> order;
  order.reserve(n);
  {
    std::vector<char> has_deps(n);
    for (std::size_t i = 0; i < n; ++i) has_deps[i] = indegree[i] != 0;
    std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> released;
    std::size_t cursor = 0;
    for (;;) {
      while (cursor < n && has_deps[cursor]) ++cursor;
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
      for (std::size_t dep : req_deps[cur])
        if (!done[dep]) {
          next = dep;
          found = true;
          break;
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
    for (std::size_t i : cycle) text_cycle += items[i].name() + " -> ";
    text_cycle += items[cycle.front()].name();
    if (std::find(cycle_restart.begin(), cycle_restart.end(), true) != cycle_restart.end())
      text_cycle += " (restart_on orders like requires)";
    c.standalone(&items[cycle.front()],
                 at(cycle.front()) + (cycle_restart.front() ? std::string(".properties.") + kRestartOnProperty
                                                            : std::string(".requires")),
                 "requires cycle: " + text_cycle);
  }

  if (result.diagnostics.empty()) result.order = std::move(order);
  return result;
}

Checked check(const Value& root, const CheckOptions& options) {
  Checker checker(options);
  if (!root.is_object()) {
    checker.not_an_object();
    return checker.finish();
  }
  for (const auto& [key, val] : root.as_object()) checker.member(key, val);
  return checker.finish();
}

}  // namespace mesh::declaration
