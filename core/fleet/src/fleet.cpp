// Fleet composition: see mesh/fleet/fleet.h, docs/modules.md and decisions 52 and 53.
#include "mesh/fleet/fleet.h"

#include "mesh/common/version_token.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <new>
#include <functional>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include <kainjow/mustache.hpp>

#include "mesh/common/crypto.h"
#include "mesh/common/json.h"
#include "mesh/common/text.h"
#include "mesh/declaration/declaration.h"
#include "mesh/sdk/resource.h"

namespace mesh::fleet {
namespace {

using sdk::ErrorCode;
using sdk::Value;
namespace km = kainjow::mustache;
using Data = km::data;

/// A value as it is shown inside a message: escaped and cut at 200 bytes.
std::string shown(std::string_view s) { return common::printable(s, 200); }

/// What kainjow answers when a variable tag meets a lambda taking a renderer: the probe below
/// relies on it to tell a variable from a section.
constexpr std::string_view kLambda2InVariable =
    "Lambda with render argument is not allowed for regular variables";

/// Largest template, in bytes (a string of a module with a "{{"; strings without one are not
/// templates and are bounded by the module's size only).
constexpr std::size_t kMaxTemplateBytes = 128 * 1024;
/// Most section tags (and delimiter changes) in one template: kainjow parses and renders nested
/// sections recursively and copies each section's text, so nesting costs depth × size.
constexpr std::size_t kMaxSectionTags = 100;

/// How many section (`#`, `^`) and set-delimiter tags kainjow will see in `text`: the tags are
/// found as kainjow's parser finds them (the current delimiters, `{{{` with the default ones,
/// contents trimmed, a set-delimiter tag changing the delimiters for what follows). Stops at a
/// tag kainjow will refuse (unclosed, bad delimiters): the parse fails there anyway.
std::size_t count_section_tags(std::string_view text) {
  auto trim = [](std::string_view v) {
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.remove_prefix(1);
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
    return v;
  };
  std::string begin = "{{", end = "}}";
  std::size_t count = 0;
  for (std::size_t pos = 0;;) {
    const std::size_t start = text.find(begin, pos);
    if (start == std::string_view::npos) break;
    std::size_t contents = start + begin.size();
    std::string_view close = end;
    bool triple = false;
    if (begin == "{{" && end == "}}" && contents < text.size() && text[contents] == '{') {
      close = "}}}";
      triple = true;
      ++contents;
    }
    const std::size_t stop = text.find(close, contents);
    if (stop == std::string_view::npos) break;
    const std::string_view tag = trim(text.substr(contents, stop - contents));
    pos = stop + close.size();
    if (triple || tag.empty()) continue;
    if (tag.front() == '#' || tag.front() == '^') {
      ++count;
    } else if (tag.front() == '=') {
      ++count;
      if (tag.size() < 5 || tag.back() != '=') break;
      const std::string_view inner = trim(tag.substr(1, tag.size() - 2));
      const std::size_t space = inner.find(' ');
      if (space == std::string_view::npos) break;
      const std::size_t next = inner.find_first_not_of(' ', space + 1);
      if (next == std::string_view::npos) break;
      begin = std::string(inner.substr(0, space));
      end = std::string(inner.substr(next));
      if (begin.empty() || end.empty()) break;
    }
  }
  return count;
}

/// The template data of a node: {"node": {"name"}, "labels": {...}, "facts": {...}}, label and
/// fact keys flat ("os.id" is one key of `facts`).
Data make_data(const NodeContext& node) {
  Data root{Data::type::object};
  Data n{Data::type::object};
  n.set("name", Data{node.name});
  root.set("node", n);
  Data labels{Data::type::object};
  for (const auto& [k, v] : node.labels) labels.set(k, Data{v});
  root.set("labels", labels);
  Data facts{Data::type::object};
  for (const auto& [k, v] : node.facts) facts.set(k, Data{v});
  root.set("facts", facts);
  return root;
}

/// `name` in `d`: split at a '.' (left to right) into a key naming an object and the rest
/// looked up in it, else the whole name as one key. So `facts.os.id` finds facts["os.id"] (fact
/// and label keys are flat) and `labels.role` costs two lookups. The top level's keys (node,
/// labels, facts) have no dot, so the order cannot change what a name finds there.
const Data* resolve(const Data* d, std::string_view name) {
  if (!d || !d->is_object()) return nullptr;
  for (std::size_t pos = name.find('.'); pos != std::string_view::npos; pos = name.find('.', pos + 1)) {
    const Data* head = d->get(std::string(name.substr(0, pos)));
    if (head && head->is_object())
      if (const Data* r = resolve(head, name.substr(pos + 1))) return r;
  }
  return d->get(std::string(name));
}

/// The context kainjow renders with: the section stack over the node's data, recording, in
/// order, every lookup that finds nothing or finds more than one value (an object), and any
/// partial. A probe names one such lookup (the `index`-th bad lookup of `name`, from 1), which
/// then answers a lambda taking a renderer: kainjow refuses that in a variable tag
/// (kLambda2InVariable) and calls it (we answer "") in a section. Up to that lookup a probe
/// renders exactly as the first render did, so it is the same tag.
class NodeContextData final : public km::basic_context<std::string> {
 public:
  struct Probe {
    std::string name;
    std::size_t index = 0;
  };

  explicit NodeContextData(const Data* root, std::optional<Probe> probe = std::nullopt)
      : probe_(std::move(probe)),
        sentinel_(km::lambda2{[](const std::string&, const km::renderer&) { return std::string(); }}) {
    items_.push_back(root);
  }
  NodeContextData(const NodeContextData&) = delete;
  NodeContextData& operator=(const NodeContextData&) = delete;

  void push(const Data* data) override { items_.insert(items_.begin(), data); }
  void pop() override { items_.erase(items_.begin()); }

  const Data* get(const std::string& name) const override {
    const Data* found = lookup(name);
    if (found && found->is_string()) return found;
    if (probe_) {
      if (name == probe_->name && ++probe_seen_ == probe_->index) {
        probe_hit_ = true;
        return &sentinel_;
      }
    } else {
      bad_.push_back(name);
    }
    return found && found->is_object() ? found : nullptr;
  }
  const Data* get_partial(const std::string& name) const override {
    if (!partial_) partial_ = name;
    return nullptr;
  }

  /// The lookups that found nothing or an object, in order (not kept in a probe).
  const std::vector<std::string>& bad_lookups() const { return bad_; }
  const std::optional<std::string>& partial() const { return partial_; }
  /// Whether the probed lookup happened.
  bool probe_hit() const { return probe_hit_; }

 private:
  const Data* lookup(const std::string& name) const {
    if (name == ".") return items_.front();
    for (const Data* item : items_)
      if (const Data* r = resolve(item, name)) return r;
    return nullptr;
  }

  std::vector<const Data*> items_;  // front: the innermost section's data
  std::optional<Probe> probe_;
  Data sentinel_;
  mutable std::vector<std::string> bad_;
  mutable std::optional<std::string> partial_;
  mutable std::size_t probe_seen_ = 0;
  mutable bool probe_hit_ = false;
};

/// Why a variable naming `name` cannot be rendered for this node.
std::string why_missing(const std::string& name, const Data& root) {
  if (const Data* found = resolve(&root, name); found && found->is_object())
    return "'" + shown(name) + "' is a group of values, not one value";
  if (name == ".") return "'.' is not one value here (it is inside a section over a label or fact)";
  if (name.rfind("labels.", 0) == 0) return "no label '" + shown(name.substr(7)) + "'";
  if (name.rfind("facts.", 0) == 0) return "no fact '" + shown(name.substr(6)) + "'";
  return "unknown name '" + shown(name) + "' (names: node.name, labels.KEY, facts.KEY)";
}

/// A parsed template with the escaping turned off, or the parse error.
sdk::Result<km::mustache> parse_template(std::string_view text) {
  if (text.size() > kMaxTemplateBytes)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "template: longer than " + std::to_string(kMaxTemplateBytes) + " bytes");
  if (count_section_tags(text) > kMaxSectionTags)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "template: more than " + std::to_string(kMaxSectionTags) +
                         " sections and delimiter changes");
  std::optional<km::mustache> parsed;
  try {
    parsed.emplace(std::string(text));
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    return sdk::fail(ErrorCode::InvalidArgument, std::string("template: ") + shown(e.what()));
  }
  km::mustache& tmpl = *parsed;
  if (!tmpl.is_valid())
    return sdk::fail(ErrorCode::InvalidArgument, "template: " + shown(tmpl.error_message()));
  tmpl.set_custom_escape([](const std::string& s) { return s; });
  return std::move(tmpl);
}

/// Renders `text` (parsed as `tmpl`) over `root`; the message of an error has no prefix.
sdk::Result<std::string> render_checked(km::mustache& tmpl, const Data& root);
sdk::Result<std::string> render_parsed(km::mustache& tmpl, const Data& root) {
  try {
    return render_checked(tmpl, root);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    return sdk::fail(ErrorCode::InvalidArgument, std::string("template: ") + shown(e.what()));
  }
}

sdk::Result<std::string> render_checked(km::mustache& tmpl, const Data& root) {
  std::string out;
  std::vector<std::string> bad;
  {
    NodeContextData ctx{&root};
    out = tmpl.render(ctx);
    if (!tmpl.is_valid())
      return sdk::fail(ErrorCode::InvalidArgument, "template: " + shown(tmpl.error_message()));
    if (ctx.partial())
      return sdk::fail(ErrorCode::InvalidArgument,
                       "template: partials ({{> " + shown(*ctx.partial()) + "}}) are not supported");
    bad = ctx.bad_lookups();
  }
  // Each lookup that found nothing (or a group), in order: render again with that lookup
  // answering a value kainjow refuses in a variable tag. A refusal means it was a variable: the
  // error. A section or an inverted section over it is a presence test and is fine. Each
  // variable tag is looked up at most once per render (there are no lists), and the first bad
  // variable ends the search, so there are at most (section tags + 1) probes.
  std::unordered_map<std::string, std::size_t> seen;
  for (const auto& name : bad) {
    const std::size_t index = ++seen[name];
    km::mustache probe = tmpl;  // a copy: kainjow keeps a render error in the object
    NodeContextData ctx{&root, NodeContextData::Probe{name, index}};
    (void)probe.render(ctx);  // only the error matters
    if (!probe.is_valid()) {
      if (probe.error_message() == kLambda2InVariable && ctx.probe_hit())
        return sdk::fail(ErrorCode::InvalidArgument, why_missing(name, root));
      return sdk::fail(ErrorCode::InvalidArgument, "template: " + shown(probe.error_message()));
    }
  }
  return out;
}

/// Calls `fn(path, string)` for every string in `v` (recursively), `path` relative to `base`.
/// Stops at the first error `fn` returns.
sdk::Result<void> each_string(Value& v, const std::string& base,
                              const std::function<sdk::Result<void>(const std::string&, Value&)>& fn) {
  switch (v.kind()) {
    case Value::Kind::String: return fn(base, v);
    case Value::Kind::Array: {
      auto& a = v.as_array();
      for (std::size_t i = 0; i < a.size(); ++i)
        MESH_TRY(each_string(a[i], base + "[" + std::to_string(i) + "]", fn));
      return {};
    }
    case Value::Kind::Object:
      for (auto& [k, member] : v.as_object())
        MESH_TRY(each_string(member, base.empty() ? k : base + "." + k, fn));
      return {};
    default: return {};
  }
}

/// "type:id" of a resource object with string type and id, or nullopt.
std::optional<std::string> name_of(const Value& r) {
  const Value* t = r.find("type");
  const Value* i = r.find("id");
  if (!t || !i || !t->is_string() || !i->is_string()) return std::nullopt;
  return t->as_string() + ":" + i->as_string();
}

/// Calls fn(path, value) for each template of a resource: id, requires[j], properties strings.
sdk::Result<void> each_template(Value& resource,
                                const std::function<sdk::Result<void>(const std::string&, Value&)>& fn) {
  if (Value* id = const_cast<Value*>(resource.find("id")); id && id->is_string()) MESH_TRY(fn("id", *id));
  if (Value* req = const_cast<Value*>(resource.find("requires")); req && req->is_array()) {
    auto& list = req->as_array();
    for (std::size_t j = 0; j < list.size(); ++j)
      if (list[j].is_string()) MESH_TRY(fn("requires[" + std::to_string(j) + "]", list[j]));
  }
  if (Value* props = const_cast<Value*>(resource.find("properties")); props && props->is_object())
    MESH_TRY(each_string(*props, "properties", fn));
  return {};
}

/// Keeps in a "type:id" list (requires, restart_on) only what the declaration check can judge on
/// the module alone: entries that are malformed, or that name one of the module's resources.
void keep_local_references(Value* list, const std::set<std::string>& declared) {
  if (!list || !list->is_array()) return;
  auto& a = list->as_array();
  a.erase(std::remove_if(a.begin(), a.end(),
                         [&](const Value& e) {
                           return e.is_string() && sdk::ResourceId::parse(e.as_string()) &&
                                  !declared.count(e.as_string());
                         }),
          a.end());
}

bool key_char(char c, bool first) {
  const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  return first ? alnum : alnum || c == '.' || c == '_' || c == '/' || c == '-';
}

}  // namespace

// --- modules ----------------------------------------------------------------------------------

bool valid_module_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 63) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    (i > 0 && (c == '.' || c == '_' || c == '-'));
    if (!ok) return false;
  }
  return true;
}

sdk::Result<Module> parse_module(std::string_view json, std::string_view source) {
  const std::string src(source);
  auto bad = [&](const std::string& path, const std::string& message) {
    return sdk::fail(ErrorCode::InvalidArgument, src + ": " + (path.empty() ? "" : path + ": ") + message,
                     path);
  };
  auto parsed = common::parse_json(json);
  if (!parsed) return bad(parsed.error().path, parsed.error().message);
  Value doc = std::move(*parsed);
  if (!doc.is_object()) return bad("", "a module must be a JSON object {\"module\", \"version\", \"resources\"}");
  for (const auto& [k, v] : doc.as_object()) {
    (void)v;
    if (k != "module" && k != "version" && k != "resources")
      return bad(k, "unknown key '" + shown(k) + "' (valid: module, version, resources)");
  }
  Module m;
  const Value* name = doc.find("module");
  if (!name) return bad("module", "is required (the module's name)");
  if (!name->is_string() || !valid_module_name(name->as_string()))
    return bad("module", (name->is_string() ? "'" + shown(name->as_string()) + "' " : std::string()) +
                             "is not a module name ([a-z0-9][a-z0-9._-]{0,62})");
  m.name = name->as_string();
  const Value* version = doc.find("version");
  if (!version) return bad("version", "is required (an opaque string: \"1.4.2\")");
  if (!version->is_string()) return bad("version", "must be a string");
  m.version = version->as_string();
  if (m.version.empty()) return bad("version", "must not be empty");
  if (m.version.size() > 128) return bad("version", "longer than 128 bytes");
  if (common::first_unprintable(m.version) != std::string_view::npos ||
      m.version.find_first_of(" \t") != std::string::npos)
    return bad("version", "'" + shown(m.version) + "' has a space or an unprintable character");
  // The form a pipeline run's --version has (a pipeline deploys the module at the run's version,
  // so a module version outside it could never be deployed by one): no '/', no leading '-'.
  if (!common::valid_version_token(m.version))
    return bad("version", "'" + shown(m.version) + "' is not a version (" + common::kVersionTokenForm +
                              ": letters, digits and . + ~ : _ -, starting with a letter or digit, at most 128; no space, no '/')");
  const Value* resources = doc.find("resources");
  if (!resources) return bad("resources", "is required (a list of resources; [] for none)");
  if (!resources->is_array()) return bad("resources", "must be a list of resources");

  // The declaration's resource shape, on the module alone: references to other sources'
  // resources are judged once the node's declaration is composed.
  std::set<std::string> declared;
  for (const auto& r : resources->as_array())
    if (auto n = name_of(r)) declared.insert(*n);
  Value local = Value::array();
  for (const auto& r : resources->as_array()) {
    Value copy = r;
    if (copy.is_object()) {
      keep_local_references(const_cast<Value*>(copy.find("requires")), declared);
      if (Value* props = const_cast<Value*>(copy.find("properties")); props && props->is_object())
        keep_local_references(const_cast<Value*>(props->find(declaration::kRestartOnProperty)), declared);
    }
    local.as_array().push_back(std::move(copy));
  }
  Value as_declaration = Value::object();
  as_declaration.set("resources", std::move(local));
  const auto checked = declaration::check(as_declaration, declaration::CheckOptions{});
  if (!checked.ok()) {
    const auto& d = checked.diagnostics.front();
    return bad(d.path, (d.resource.empty() ? "" : "(" + d.resource + ") ") + d.message);
  }

  // A type is a provider's name, never a template.
  for (std::size_t i = 0; i < resources->as_array().size(); ++i) {
    const std::string& type = resources->as_array()[i].get_string("type");
    const bool ok = std::all_of(type.begin(), type.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
    if (!ok)
      return bad("resources[" + std::to_string(i) + "].type",
                 "'" + shown(type) + "' is not a resource type ([a-z0-9_-]+; a type is not a template)");
  }

  // Every template parses (and uses no partial, as far as a render with no data reaches).
  Value walk = *resources;
  auto& list = walk.as_array();
  const Data empty{Data::type::object};
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = "resources[" + std::to_string(i) + "]";
    MESH_TRY(each_template(list[i], [&](const std::string& path, Value& v) -> sdk::Result<void> {
      if (v.as_string().find("{{") == std::string::npos) return {};  // not a template
      auto tmpl = parse_template(v.as_string());
      if (!tmpl) return bad(at + "." + path, tmpl.error().message);
      NodeContextData ctx{&empty};
      try {
        (void)tmpl->render(ctx);  // only the partial matters here
      } catch (const std::bad_alloc&) {
        throw;
      } catch (const std::exception& e) {
        return bad(at + "." + path, std::string("template: ") + shown(e.what()));
      }
      if (ctx.partial())
        return bad(at + "." + path, "template: partials ({{> " + shown(*ctx.partial()) + "}}) are not supported");
      return {};
    }));
  }

  m.resources = *resources;
  Value canonical = Value::object();
  canonical.set("module", m.name);
  canonical.set("version", m.version);
  canonical.set("resources", m.resources);
  m.digest = common::sha256_hex(canonical_json(canonical));
  return m;
}

// --- rendering --------------------------------------------------------------------------------

NodeContext node_context(std::string name, const Value& labels_object, const Value& briefing) {
  NodeContext n;
  n.name = std::move(name);
  if (labels_object.is_object())
    for (const auto& [k, v] : labels_object.as_object())
      if (v.is_string()) n.labels[k] = v.as_string();
  if (const Value* facts = briefing.find("facts"); facts && facts->is_object())
    for (const auto& [k, v] : facts->as_object())
      if (v.is_string()) n.facts[k] = v.as_string();
  return n;
}

sdk::Result<std::string> render_template(std::string_view text, const NodeContext& node,
                                         std::string_view where) {
  const std::string prefix = where.empty() ? std::string() : std::string(where) + ": ";
  // A string without "{{" renders as itself (and cannot change its delimiters): skip kainjow.
  if (text.find("{{") == std::string_view::npos) return std::string(text);
  auto tmpl = parse_template(text);
  if (!tmpl) return sdk::fail(ErrorCode::InvalidArgument, prefix + tmpl.error().message);
  const Data root = make_data(node);
  auto out = render_parsed(*tmpl, root);
  if (!out) return sdk::fail(ErrorCode::InvalidArgument, prefix + out.error().message);
  return out;
}

struct TemplateCache::Impl {
  std::unordered_map<std::string, km::mustache> parsed;
};

TemplateCache::TemplateCache() : impl_(std::make_unique<Impl>()) {}
TemplateCache::~TemplateCache() = default;
TemplateCache::TemplateCache(TemplateCache&&) noexcept = default;
TemplateCache& TemplateCache::operator=(TemplateCache&&) noexcept = default;
std::size_t TemplateCache::size() const noexcept { return impl_ ? impl_->parsed.size() : 0; }

sdk::Result<Value> render_module(const Module& m, const NodeContext& node, TemplateCache& cache) {
  if (!cache.impl_) cache.impl_ = std::make_unique<TemplateCache::Impl>();
  auto& parsed = cache.impl_->parsed;
  auto who = [&] { return "node " + shown(node.name) + ": module " + shown(m.name) + "@" + shown(m.version); };
  if (!m.resources.is_array())
    return sdk::fail(ErrorCode::InvalidArgument, who() + ": resources must be a list");
  Value out = m.resources;
  const Data root = make_data(node);
  auto& list = out.as_array();
  for (std::size_t i = 0; i < list.size(); ++i) {
    auto where = [&](const std::string& path) {
      const std::string resource =
          name_of(m.resources.as_array()[i]).value_or("resources[" + std::to_string(i) + "]");
      return who() + ": " + shown(resource) + ": " + path + ": ";
    };
    MESH_TRY(each_template(list[i], [&](const std::string& path, Value& v) -> sdk::Result<void> {
      const std::string& text = v.as_string();
      if (text.find("{{") == std::string::npos) return {};
      auto it = parsed.find(text);
      if (it == parsed.end()) {
        auto tmpl = parse_template(text);
        if (!tmpl) return sdk::fail(ErrorCode::InvalidArgument, where(path) + tmpl.error().message, path);
        it = parsed.emplace(text, std::move(*tmpl)).first;
      }
      auto rendered = render_parsed(it->second, root);
      if (!it->second.is_valid()) parsed.erase(it);  // kainjow keeps a render error: parse again next time
      if (!rendered) return sdk::fail(ErrorCode::InvalidArgument, where(path) + rendered.error().message, path);
      v = Value(std::move(*rendered));
      return {};
    }));
  }
  return out;
}

sdk::Result<Value> render_module(const Module& m, const NodeContext& node) {
  TemplateCache cache;
  return render_module(m, node, cache);
}

// --- selectors --------------------------------------------------------------------------------

sdk::Result<Selector> parse_selector(std::string_view text) {
  auto bad = [](std::size_t pos, const std::string& message) {
    return sdk::fail(ErrorCode::InvalidArgument,
                     "selector: at position " + std::to_string(pos + 1) + ": " + message);
  };
  auto is_space = [](char c) { return c == ' ' || c == '\t'; };
  Selector s;
  std::size_t i = 0;
  const std::size_t n = text.size();
  auto skip = [&] {
    while (i < n && is_space(text[i])) ++i;
  };
  skip();
  if (i == n) return bad(i, "empty selector (name=* selects every node)");
  std::set<std::pair<int, std::string>> seen;
  while (true) {
    skip();
    const std::size_t term_start = i;
    std::size_t end = i;
    while (end < n && text[end] != '=' && text[end] != ',') ++end;
    std::size_t key_end = end;
    while (key_end > i && is_space(text[key_end - 1])) --key_end;
    const std::string_view key = text.substr(i, key_end - i);
    if (end == n || text[end] == ',') {
      if (key.empty()) return bad(term_start, "empty term (a term is name=GLOB, KEY=VALUE or facts.KEY=VALUE)");
      return bad(term_start, "term '" + shown(key) + "' has no '=' (a term is name=GLOB, KEY=VALUE or facts.KEY=VALUE)");
    }
    if (key.empty()) return bad(end, "expected a key before '='");
    SelectorTerm term;
    std::string_view k = key;
    std::size_t k_pos = term_start;
    if (key == "name") {
      term.kind = SelectorTerm::Kind::Name;
    } else if (key.rfind("facts.", 0) == 0) {
      term.kind = SelectorTerm::Kind::Fact;
      k = key.substr(6);
      k_pos += 6;
      if (k.empty()) return bad(k_pos, "expected a fact's key after 'facts.'");
    } else if (key == "facts") {
      return bad(term_start, "'facts' needs a key: facts.KEY=VALUE");
    } else {
      term.kind = SelectorTerm::Kind::Label;
    }
    if (term.kind != SelectorTerm::Kind::Name) {
      if (k.size() > 63) return bad(k_pos, "key '" + shown(k) + "' is longer than 63 characters");
      for (std::size_t j = 0; j < k.size(); ++j)
        if (!key_char(k[j], j == 0))
          return bad(k_pos + j, "'" + shown(k.substr(j, 1)) + "' is not allowed in key '" + shown(k) +
                                    "' ([A-Za-z0-9][A-Za-z0-9._/-]*)");
      term.key = std::string(k);
    }
    i = end + 1;  // past '='
    skip();
    const std::size_t value_start = i;
    std::size_t vend = i;
    while (vend < n && text[vend] != ',') ++vend;
    std::size_t value_end = vend;
    while (value_end > i && is_space(text[value_end - 1])) --value_end;
    const std::string_view value = text.substr(i, value_end - i);
    if (value.empty()) return bad(value_start, "expected a value after '" + shown(key) + "='");
    if (auto eq = value.find('='); eq != std::string_view::npos)
      return bad(value_start + eq, "'=' in the value of '" + shown(key) + "' (terms are separated by ',')");
    if (auto u = common::first_unprintable(value); u != std::string_view::npos)
      return bad(value_start + u, "unprintable character in the value of '" + shown(key) + "'");
    term.value = std::string(value);
    if (!seen.insert({static_cast<int>(term.kind), term.key}).second)
      return bad(term_start, "'" + shown(key) + "' is given twice");
    s.terms.push_back(std::move(term));
    i = vend;
    if (i == n) break;
    ++i;  // past ','
    skip();
    if (i == n) return bad(i, "empty term after ','");
  }
  return s;
}

bool glob_match(std::string_view pattern, std::string_view text) noexcept {
  std::size_t p = 0, t = 0;
  std::size_t star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || (pattern[p] != '*' && pattern[p] == text[t]))) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool matches(const Selector& s, const NodeContext& node) {
  for (const auto& term : s.terms) {
    switch (term.kind) {
      case SelectorTerm::Kind::Name:
        if (!glob_match(term.value, node.name)) return false;
        break;
      case SelectorTerm::Kind::Label: {
        auto it = node.labels.find(term.key);
        if (it == node.labels.end() || it->second != term.value) return false;
        break;
      }
      case SelectorTerm::Kind::Fact: {
        auto it = node.facts.find(term.key);
        if (it == node.facts.end() || it->second != term.value) return false;
        break;
      }
    }
  }
  return true;
}

std::string to_string(const Selector& s) {
  std::string out;
  for (const auto& term : s.terms) {
    if (!out.empty()) out += ',';
    switch (term.kind) {
      case SelectorTerm::Kind::Name: out += "name"; break;
      case SelectorTerm::Kind::Label: out += term.key; break;
      case SelectorTerm::Kind::Fact: out += "facts." + term.key; break;
    }
    out += '=';
    out += term.value;
  }
  return out;
}

// --- composition ------------------------------------------------------------------------------

sdk::Result<Value> compose(const std::vector<Source>& sources) {
  Value out = Value::array();
  std::unordered_map<std::string, std::size_t> from;  // "type:id" → index in sources
  for (std::size_t s = 0; s < sources.size(); ++s) {
    const auto& src = sources[s];
    if (!src.resources.is_array())
      return sdk::fail(ErrorCode::InvalidArgument, shown(src.label) + ": resources must be a list");
    const auto& list = src.resources.as_array();
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto name = name_of(list[i]);
      if (!list[i].is_object() || !name)
        return sdk::fail(ErrorCode::InvalidArgument,
                         shown(src.label) + ": resources[" + std::to_string(i) +
                             "] is not a resource with a string type and id");
      auto [it, inserted] = from.emplace(*name, s);
      if (!inserted) {
        if (it->second == s)
          return sdk::fail(ErrorCode::InvalidArgument,
                           shown(*name) + " is declared twice by " + shown(src.label));
        return sdk::fail(ErrorCode::InvalidArgument, shown(*name) + " is declared by both " +
                                                         shown(sources[it->second].label) + " and " +
                                                         shown(src.label));
      }
      out.as_array().push_back(list[i]);
    }
  }
  return out;
}

Changes diff(const Value& old_resources, const Value& new_resources) {
  auto index = [](const Value& list) {
    std::map<std::string, const Value*> m;
    if (!list.is_array()) return m;
    for (const auto& r : list.as_array())
      if (r.is_object())
        if (auto n = name_of(r)) m.emplace(*n, &r);
    return m;
  };
  const auto before = index(old_resources);
  const auto after = index(new_resources);
  Changes c;
  for (const auto& [name, r] : after) {
    auto it = before.find(name);
    if (it == before.end()) c.added.push_back(name);
    else if (!(*it->second == *r)) c.changed.push_back(name);
  }
  for (const auto& [name, r] : before) {
    (void)r;
    if (!after.count(name)) c.removed.push_back(name);
  }
  return c;  // std::map iterates in byte order: each list is sorted
}

}  // namespace mesh::fleet
