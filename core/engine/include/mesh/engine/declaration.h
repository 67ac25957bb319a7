// Declarations: parsing (simdjson, via mesh::common::parse_json), validation against each
// provider's schema, and ordering by `requires`.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
inline constexpr const char* kRestartOnProperty = "restart_on";

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

/// Parses and checks a declaration, in this order, before anything is applied:
/// size; UTF-8, syntax, depth and duplicate keys (parse_json); the top-level shape (`node`
/// a node name, `revision` integer ≥ 1 only when allowed, `resources` array, no other keys);
/// each resource's shape (`type`, `id` non-empty strings without NUL, `properties` object,
/// required, `requires` list of "type:id" strings, no other keys); a provider for each type; unique
/// `type:id`; properties against the provider's schema (`validate_against`, prefix
/// "properties") and then `Provider::validate`; every `requires` naming a declared resource;
/// every `properties.restart_on` entry (any type whose properties hold one) a "type:id" string
/// naming a declared resource (path "resources[i].properties.restart_on[j]"); no cycle, where a
/// `restart_on` entry counts as a `requires` edge (a service is applied, and so restarted, after
/// what it restarts on — even when that is declared after it). Each phase runs over all resources before the next starts, so the error reported is
/// the first in that order. Errors are InvalidArgument (except an error other than
/// InvalidArgument from a provider's validate(), e.g. Internal, which keeps its code); `path` is
/// e.g. "resources[3].properties.mode" and the message stands alone, naming the position and the
/// resource ("resources[3] (file:/etc/motd): properties.mode: must be a string",
/// "resources[4]: duplicate resource file:/etc/motd (first at resources[1])"); a cycle names its
/// members in order, starting with the one declared first ("requires cycle: a:1 -> b:2 -> a:1";
/// with " (restart_on orders like requires)" appended when a `restart_on` entry closes it).
/// `node` and `requires` may be omitted; `properties` may not (`{}` declares none), as
/// `mesh declare` requires it: the host accepts no file the control plane would refuse.
/// Print `message`, not describe() (which would repeat the path).
/// Thread-safe if the providers' validate() is.
sdk::Result<Declaration> parse_declaration(std::string_view text, const ProviderRegistry& providers,
                                           const ParseOptions& options = {});

}  // namespace mesh::engine
