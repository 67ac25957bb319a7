// Declarations: parsing (simdjson's On-Demand API, via mesh::common::parse_json_members: the
// `resources` list element by element, each Resource built while its element is checked),
// validation against each provider's schema, and ordering by `requires`.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/common/fs.h"
#include "mesh/declaration/declaration.h"
#include "mesh/sdk/provider.h"
#include "mesh/sdk/resource.h"
#include "mesh/sdk/result.h"

namespace mesh::engine {

/// Maps a resource type to its provider. Non-owning lookups; the registry owns shared_ptrs
/// (which keep the plugin libraries loaded).
class ProviderRegistry {
 public:
  /// Registers `provider` for `type`. AlreadyExists when the type is taken.
  sdk::Result<void> add(const std::string& type, std::shared_ptr<sdk::Provider> provider);
  /// nullptr when no provider handles `type`.
  sdk::Provider* find(std::string_view type) const noexcept;
  std::vector<std::string> types() const;

 private:
  std::map<std::string, std::shared_ptr<sdk::Provider>, std::less<>> providers_;
};

/// The property, of any resource type, listing resources ("type:id") whose change in the same
/// apply restarts this resource (the `service` provider declares it in its schema; see engine.h
/// for what the engine does with it). For ordering it counts as `requires`.
using declaration::kRestartOnProperty;

/// A parsed, validated and ordered declaration.
struct Declaration {
  std::string node;           ///< "" when the text had no `node`
  std::uint64_t revision = 0; ///< 0 when the text had no `revision`
  /// Resources in apply order (a topological order of `requires` and `properties.restart_on`,
  /// stable: among resources whose requirements are met, declaration order is kept). Properties
  /// have schema defaults applied. `depends_on` holds `requires` only.
  std::vector<sdk::Resource> resources;
  /// SHA-256 (hex) of the exact text parsed.
  std::string digest;
};

struct ParseOptions {
  /// Size limit in bytes, checked first (the broker's max_payload by default: 1 MiB).
  std::size_t max_bytes = 1024 * 1024;
  std::size_t max_depth = 32;
  /// When set, `node` in the text must be absent or equal to it (and when present it must be a
  /// node name either way: `"node": ""` is refused).
  std::string expected_node;
  /// Whether `revision` may appear (true for pushed declarations; false for files given to
  /// `mesh declare` / `mesh-host apply`, where a revision is written by the control plane only).
  bool allow_revision = false;
};

/// What parse_declaration_all found: the declaration, or every problem.
struct Parsed {
  std::optional<Declaration> declaration;  ///< set exactly when `diagnostics` is empty
  declaration::Diagnostics diagnostics;
};

/// Parses and checks a declaration before anything is applied, collecting every problem: size
/// (alone: an oversize text is not parsed); UTF-8, syntax, depth and duplicate keys (as
/// parse_json checks them; alone, even when found late in the text after resources were
/// checked); then declaration::check with this registry, fed element by element
/// (declaration::Checker: no DOM of the text and no Value tree of the whole document exist) — the top-level shape (`node` a node name
/// equal to expected_node when both are set, `revision` integer ≥ 1 only when allowed,
/// `resources` array, no other keys); each resource's shape (`type`, `id` non-empty strings
/// without control characters, `properties` object, required, `requires` list of "type:id"
/// strings, no other keys); a provider for each type; unique `type:id`; the id against the
/// provider schema's id_format and the properties against the schema (`validate_all`, prefix
/// "properties"), then `Provider::validate` (with defaults filled in) for each resource that
/// passed; every `requires` and every `properties.restart_on` entry naming a declared resource;
/// no cycle, where a `restart_on` entry counts as a `requires` edge. See
/// mesh/declaration/declaration.h for the phases and the texts. Diagnostics are InvalidArgument
/// except what a provider's validate() returned (e.g. Internal), which keeps its code; each has
/// `path` ("resources[3].properties.mode") and `text`, a line that stands alone naming the
/// position and the resource ("resources[3] (file:/etc/motd): properties.mode: must be a
/// string", "resources[4]: duplicate resource file:/etc/motd (first at resources[1])"); a cycle
/// names its members in order, starting with the one declared first ("requires cycle: a:1 ->
/// b:2 -> a:1"; with " (restart_on orders like requires)" appended when a `restart_on` entry
/// closes it). Thread-safe if the providers' validate() is.
Parsed parse_declaration_all(std::string_view text, const ProviderRegistry& providers,
                             const ParseOptions& options = {});
/// The same, of a text read with common::read_file_padded: read in place, without the padded copy
/// of the text the string_view overload makes (2.8 MB for 20,000 file resources). Same checks,
/// diagnostics and thread safety.
Parsed parse_declaration_all(const common::PaddedText& text, const ProviderRegistry& providers,
                             const ParseOptions& options = {});

/// parse_declaration_all, returning the first diagnostic as the error (message = its `text`,
/// path = its `path`, code = its code). Print `message`, not describe() (which would repeat the
/// path).
sdk::Result<Declaration> parse_declaration(std::string_view text, const ProviderRegistry& providers,
                                           const ParseOptions& options = {});

}  // namespace mesh::engine
