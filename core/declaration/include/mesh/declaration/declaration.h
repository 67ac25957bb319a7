// The shape of a declaration, checked the same way by `mesh declare`, the control plane and the
// host (issue #12, points 4 and 8). One pass collects every problem it can find as a list of
// diagnostics, each naming its resource (`type:id`), its path (`resources[3].properties.mode`),
// an error code and a message — like Terraform's diagnostics — instead of stopping at the first.
//
// What needs providers (their schemas, their validate()) comes in through CheckOptions: the
// host passes its loaded providers' schemas and validate; the control plane passes the schemas a
// node sent with its briefing, or none (shape only); `mesh` passes none. This library depends on
// mesh_sdk and mesh_common only.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/sdk/result.h"
#include "mesh/sdk/schema.h"
#include "mesh/sdk/value.h"

namespace mesh::declaration {

/// The property, of any resource type, listing resources ("type:id") whose change in the same
/// apply restarts this resource. For ordering (and the cycle check) it counts as `requires`.
inline constexpr const char* kRestartOnProperty = "restart_on";

/// One problem in a declaration.
struct Diagnostic {
  /// The resource concerned as "type:id" (escaped with common::printable, at most 200 bytes),
  /// or "" when the problem is the document's or the resource has no valid type and id yet.
  std::string resource;
  /// JSON path of the offending part: "" (the document), "node", "resources[3].properties.mode".
  std::string path;
  sdk::ErrorCode code = sdk::ErrorCode::InvalidArgument;
  /// What is wrong, without the path: "must be a string".
  std::string message;
  /// The stand-alone line naming position and resource, as the host has always printed it:
  /// "resources[3] (file:/etc/motd): properties.mode: must be a string".
  std::string text;

  /// "path: message" (the SDK's Error::describe shape), with " (resource)" after the path when
  /// the resource is known: "resources[3].properties.mode (file:/etc/motd): must be a string".
  std::string describe() const;
  /// As an sdk::Error: {code, text, path}.
  sdk::Error to_error() const { return sdk::Error{code, text, path}; }
};

using Diagnostics = std::vector<Diagnostic>;

/// `[{"resource","path","code","message"}, ...]`; `code` is sdk::to_string(code). Empty
/// `resource`/`path` are kept as "" (the keys are always present).
sdk::Value to_json(const Diagnostics& diagnostics);

/// Parses what to_json wrote (unknown codes read as invalid_argument; `text` is rebuilt as
/// describe()). Entries that are not objects are skipped.
Diagnostics from_json(const sdk::Value& list);

/// One describe() line per diagnostic, each ending in '\n', each line prefixed by `indent`.
std::string to_text(const Diagnostics& diagnostics, std::string_view indent = "");

/// The first diagnostic as an sdk::Error (the single-error interfaces); Internal "no
/// diagnostic" when the list is empty.
sdk::Error first_error(const Diagnostics& diagnostics);

/// Who reads the declaration: changes only the wording of a `node` mismatch and whether
/// `revision` may appear.
struct CheckOptions {
  /// When set, `node` in the document must be absent or equal to it.
  std::string expected_node;
  /// "this node is" (the host) or "the declaration is declared for" wording; see check().
  bool reader_is_node = true;
  /// Whether `revision` (an integer ≥ 1) may appear: true for pushed declarations only.
  bool allow_revision = false;
  /// The schema of a resource type, or nullptr when the type is unknown. When this function is
  /// empty, types are not checked at all (the shape check of `mesh` and of the control plane for
  /// a node that never sent schemas). The pointer must stay valid during check().
  std::function<const sdk::Schema*(std::string_view type)> schema_of;
  /// For the "unknown resource type" message: "loaded providers: file, package".
  std::string known_types;
  /// Called once, in declaration order, for each resource whose shape and schema check passed
  /// (only when schema_of is set): `index` in `resources`, the resource object as written. It
  /// appends errors (path relative to the resource: "properties.mode") to `out`. The host calls
  /// Provider::validate here. Errors keep their code. Once `validate` has been called for a
  /// resource, the check reads nothing of that resource again (it keeps copies of its name,
  /// `requires` and `restart_on`), so a caller that owns the resource may move anything out of
  /// it during the call (the host does, into its Resource: no second copy of a property).
  std::function<void(std::size_t index, const sdk::Value& resource, std::vector<sdk::Error>& out)>
      validate;
};

/// What check() found.
struct Checked {
  /// Every problem found, in the order of the phases below (within a phase, declaration order).
  Diagnostics diagnostics;
  /// When `diagnostics` is empty: the positions in `resources` in apply order — a topological
  /// order of `requires` and `properties.restart_on`, stable (among resources whose requirements
  /// are met, declaration order is kept). Empty otherwise.
  std::vector<std::size_t> order;

  bool ok() const noexcept { return diagnostics.empty(); }
};

/// Checks a parsed declaration, collecting every problem. Phases, in order:
///  1. the document: an object with `node` (a node name; equal to expected_node when both are
///     set), `revision` (only when allowed; an integer ≥ 1), `resources` (required, an array),
///     no other key. When `resources` is missing or not an array, checking stops here.
///  2. each resource's shape: an object with `type` and `id` (non-empty strings without control,
///     line-separator or bidirectional characters), `properties` (required, an object),
///     `requires` (optional, a list of "type:id" strings), no other key. A resource with a shape
///     problem takes no part in later phases.
///  3. with schema_of: a schema for each type ("unknown resource type", naming known_types).
///  4. unique `type:id` (the later one is reported, naming the first).
///  5. with schema_of: the id against the schema's id_format and the properties against the
///     schema (sdk::validate_all, prefix "properties": every error of every resource), then
///     `validate` for each resource that passed.
///  6. every `requires` entry names a declared resource; every `properties.restart_on` (of any
///     type) is a list of "type:id" strings naming declared resources.
///  7. no cycle among the edges of phase 6, a `restart_on` entry counting as `requires`; one
///     cycle is reported, its members in order from the one declared first ("requires cycle:
///     a:1 -> b:2 -> a:1", with " (restart_on orders like requires)" when a `restart_on` entry
///     is on it).
/// Codes are InvalidArgument except what `validate` returned. Linear or n·log n in the number
/// of resources. Thread-safe if the callbacks are. The same as a Checker fed the document's
/// members in order.
Checked check(const sdk::Value& declaration, const CheckOptions& options);

/// check(), fed one piece of the document at a time, for a reader that never holds the whole
/// document: the host reads `resources` element by element (engine::parse_declaration_all,
/// common::parse_json_members) and builds each Resource while it is checked. Phases 2–5 run for
/// a resource when it is fed (`validate` is called before resource() returns); phases 6 and 7,
/// which need every resource, run in finish(). The diagnostics come out in the order check()
/// gives (by phase, then declaration order), whatever the order of the members in the text.
/// What the checker keeps of a resource after resource() returns: a copy of its type and id,
/// its `requires` and its `properties.restart_on` (the caller may move or drop the rest).
/// Not thread-safe; the callbacks of `options` are called on the feeding thread. Feed either
/// not_an_object(), or the document's members (member(), and for an array `resources`
/// begin_resources() and resource() for each element, in order), then call finish() once.
class Checker {
 public:
  /// `options` must outlive the checker.
  explicit Checker(const CheckOptions& options);
  ~Checker();
  Checker(Checker&&) noexcept;
  Checker& operator=(Checker&&) noexcept;

  /// The document is not a JSON object (phase 1 fails; nothing else may be fed).
  void not_an_object();
  /// A member of the document object: `node`, `revision`, an unknown key, or `resources` — an
  /// array given here is fed element by element as by begin_resources() and resource().
  void member(std::string_view key, const sdk::Value& value);
  /// The document's `resources` is an array; its elements follow through resource().
  void begin_resources();
  /// The next element of `resources` (its index is the number fed before it): phases 2 to 5
  /// for it. `resource` need live only during the call.
  void resource(const sdk::Value& resource);
  /// Phases 6 and 7 and the result (see check()).
  Checked finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace mesh::declaration
