// Declaration parsing for the host: size, JSON, then the shared declaration check
// (mesh_declaration: shape, this host's providers' schemas and validate(), `requires`,
// `restart_on`, cycles — every problem collected), then the resources moved into apply order
// with schema defaults filled in.
#include "mesh/engine/declaration.h"

#include <cstdio>
#include <future>
#include <optional>
#include <iterator>
#include <system_error>
#include <utility>

#include "mesh/common/crypto.h"
#include "mesh/common/json.h"

namespace mesh::engine {
namespace {

using sdk::ErrorCode;
using sdk::Value;

/// From this size on the digest is computed in parallel with parsing.
constexpr std::size_t kAsyncDigestBytes = 256 * 1024;

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

namespace {

/// parse_declaration_all of `text`; `padded`, when given, holds it with simdjson's padding after
/// it, so that it is read in place (no padded copy of the text).
Parsed parse_all(std::string_view text, const common::PaddedText* padded, const ProviderRegistry& providers,
                 const ParseOptions& options) {
  Parsed out;
  auto refuse = [&](std::string message, std::string path, ErrorCode code = ErrorCode::InvalidArgument) {
    declaration::Diagnostic d;
    d.code = code;
    d.path = std::move(path);
    d.text = message;
    d.message = std::move(message);
    out.diagnostics.push_back(std::move(d));
    return std::move(out);
  };
  // 1. Size, before anything looks at the bytes (an oversize body is reported as such even when
  //    it is also invalid UTF-8).
  if (text.size() > options.max_bytes)
    return refuse("declaration is " + std::to_string(text.size()) + " bytes, over the limit of " +
                      std::to_string(options.max_bytes) + " bytes",
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

  // 2. The declaration check with this host's providers, fed while the text is read: UTF-8,
  //    syntax, depth and duplicate keys as parse_json checks them, but `resources` element by
  //    element (common::parse_json_members). Each element is checked as it comes; one that
  //    passes its schema is taken apart into its Resource (defaults filled in) and handed to its
  //    provider's validate(); then it is gone. Neither a DOM of the text nor a Value tree of the
  //    whole document exists at any time: at 20,000 resources those were the apply's peak
  //    (docs/benchmarks.md, "Parse without a whole tree").
  declaration::CheckOptions check;
  check.expected_node = options.expected_node;
  check.reader_is_node = true;
  check.allow_revision = options.allow_revision;
  check.schema_of = [&](std::string_view type) -> const sdk::Schema* {
    sdk::Provider* p = providers.find(type);
    return p ? &p->schema() : nullptr;
  };
  {
    std::string loaded;
    for (const auto& t : providers.types()) loaded += (loaded.empty() ? "" : ", ") + t;
    check.known_types = "loaded providers: " + (loaded.empty() ? std::string("none") : loaded);
  }
  // built[i] is resources[i]'s Resource once it passed validate(); empty for one that did not
  // get that far (then the declaration is refused anyway).
  std::vector<sdk::Resource> built;
  Value* current = nullptr;  // the element being checked: ours to take apart in validate
  check.validate = [&](std::size_t i, const Value&, std::vector<sdk::Error>& errors) {
    sdk::Resource& res = built[i];
    // The checker reads nothing of the element once validate() is called for it (it keeps
    // copies of the name and of `requires`): move its strings and properties out.
    for (auto& [key, v] : current->as_object()) {
      if (key == "type") res.rid.type = std::move(v.as_string());
      else if (key == "id") res.rid.id = std::move(v.as_string());
      else if (key == "properties") res.properties = std::move(v);
      else if (key == "requires")
        for (const auto& e : v.as_array())
          if (auto rid = sdk::ResourceId::parse(e.as_string())) res.depends_on.push_back(std::move(*rid));
    }
    sdk::Provider* provider = providers.find(res.rid.type);
    fill_defaults(provider->schema(), res.properties);
    // Every problem the provider finds (ValidateResponse::errors), or the call's own error.
    // The resource is lent to the request and taken back (validate sees it const): no copy of
    // its properties per resource (issue 16 part 6).
    sdk::ValidateRequest vreq;
    vreq.resource = std::move(res);
    sdk::ValidateResponse vresp;
    auto ok = provider->validate(vreq, vresp);
    res = std::move(vreq.resource);
    if (!ok) errors.push_back(ok.error());
    for (auto& e : vresp.errors) errors.push_back(std::move(e));
  };
  // Destroyed once it has finished: what it keeps per resource (its items, ~156 bytes each, and
  // the names) is not held beside the list's shrinking copy below.
  std::optional<declaration::Checker> checker_slot(std::in_place, check);
  declaration::Checker& checker = *checker_slot;
  Declaration decl;
  common::JsonMembers reader;
  reader.list_key = "resources";
  reader.member = [&](std::string_view key, Value v) -> sdk::Result<void> {
    if (key == "node" && v.is_string()) decl.node = v.as_string();
    if (key == "revision" && v.is_int() && v.as_int() > 0) decl.revision = static_cast<std::uint64_t>(v.as_int());
    checker.member(key, v);
    return {};
  };
  // The list is not counted first (JsonMembers::count_list, to reserve the Resources): that
  // pass over its tokens cost 1.6% more instructions for the 10,000-resource parse, for no lower
  // peak RSS of a 20,000-file apply than the shrink below once the checker is gone
  // (docs/benchmarks.md, "The end of an apply, and drift's syncs").
  reader.list_begin = [&](std::size_t) -> sdk::Result<void> {
    checker.begin_resources();
    return {};
  };
  reader.element = [&](std::size_t, Value& v) -> sdk::Result<void> {
    built.emplace_back();
    current = &v;
    checker.resource(v);
    current = nullptr;
    return {};
  };
  reader.other_root = [&](Value) -> sdk::Result<void> {
    checker.not_an_object();
    return {};
  };
  common::JsonLimits limits;
  limits.max_bytes = options.max_bytes;
  limits.max_depth = options.max_depth;
  if (auto read = padded ? common::parse_json_members(*padded, limits, reader)
                         : common::parse_json_members(text, limits, reader);
      !read) {
    // A JSON problem (UTF-8, syntax, depth, duplicate key) is reported alone, as before any
    // other check, even when it was found after some resources were checked.
    const auto& e = read.error();
    return refuse("declaration: " + e.describe(), e.path, e.code);
  }
  auto checked = checker.finish();
  checker_slot.reset();
  if (!checked.ok()) {
    out.diagnostics = std::move(checked.diagnostics);
    return out;
  }

  // 3. Into apply order, in place: position k takes resources[order[k]].
  const auto& order = checked.order;
  {
    std::vector<char> done(built.size(), 0);
    for (std::size_t k = 0; k < built.size(); ++k) {
      if (done[k]) continue;
      sdk::Resource first = std::move(built[k]);
      std::size_t dst = k;
      for (;;) {
        done[dst] = 1;
        const std::size_t src = order[dst];
        if (src == k) {
          built[dst] = std::move(first);
          break;
        }
        built[dst] = std::move(built[src]);
        dst = src;
      }
    }
  }
  // Built one by one, the list grew by doublings: give back the unused part (the declaration
  // is kept for the whole apply; at 20,000 resources of 128 bytes up to 1.6 MB).
  if (built.capacity() - built.size() > built.size() / 8) built.shrink_to_fit();
  decl.resources = std::move(built);
  decl.digest = digest.valid() ? digest.get() : common::sha256_hex(text);
  out.declaration = std::move(decl);
  return out;
}

}  // namespace

Parsed parse_declaration_all(std::string_view text, const ProviderRegistry& providers,
                             const ParseOptions& options) {
  return parse_all(text, nullptr, providers, options);
}

Parsed parse_declaration_all(const common::PaddedText& text, const ProviderRegistry& providers,
                             const ParseOptions& options) {
  return parse_all(text.view(), &text, providers, options);
}

sdk::Result<Declaration> parse_declaration(std::string_view text, const ProviderRegistry& providers,
                                           const ParseOptions& options) {
  auto parsed = parse_declaration_all(text, providers, options);
  if (!parsed.declaration) return sdk::fail(declaration::first_error(parsed.diagnostics));
  return std::move(*parsed.declaration);
}

}  // namespace mesh::engine
