// The provider schemas a node sends with its briefing (docs/protocol.md "Briefing", decision
// record 48), and the check of a declaration against them before it is stored.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/declaration/declaration.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/schema.h"
#include "mesh/sdk/store.h"
#include "mesh/sdk/value.h"

namespace mesh::control::detail {

/// Bounds of a briefing's `schemas`: providers, attributes per provider, JSON text.
inline constexpr std::size_t kMaxSchemas = 64;
inline constexpr std::size_t kMaxSchemaAttributes = 256;
inline constexpr std::size_t kMaxSchemasBytes = 1u << 20;

/// Reads `schemas` — a list of provider schemas as `mesh-host plugins describe --output json`
/// prints them: {"name","description","id_format","attributes":[{"name","type","required",
/// "description","allowed","default","min","max","read_only","sensitive"}],"exclusive"} — into
/// sdk::Schema. Unknown keys are ignored (a newer host may send more); a missing key takes its
/// default except `name` and each attribute's `name` and `type`. Errors: InvalidArgument with
/// the path of the first bad part ("schemas[1].attributes[2].type") and what is wrong; also
/// beyond kMaxSchemas, kMaxSchemaAttributes, or a type named twice. A sensitive attribute's
/// default is not kept (the host sends "(sensitive value)" in its place). Pure; thread-safe.
sdk::Result<std::vector<sdk::Schema>> schemas_from_json(const sdk::Value& schemas,
                                                        std::string_view field = "schemas");

/// The `schemas` field of a briefing body: nullopt when absent or null (a host that predates
/// it), else its compact JSON text after schemas_from_json accepted it and within
/// kMaxSchemasBytes. Errors: those of schemas_from_json, naming the field ("schemas[0].name").
sdk::Result<std::optional<std::string>> briefing_schemas(const sdk::Value& body);

/// Stores what briefing_schemas returned as the node's schemas (nullopt: clears them, so that
/// an older host's briefing leaves only the shape check). A store without the methods
/// (Unsupported) is logged once per briefing as a warning and is not an error.
sdk::Result<void> store_schemas(sdk::Store& store, const std::string& node, const std::optional<std::string>& schemas);

/// The node's schemas on record: nullopt when it has none (never briefed, an older host, or a
/// store without them). A stored list that no longer reads (it was checked when stored) is
/// logged and treated as none.
sdk::Result<std::optional<std::vector<sdk::Schema>>> node_schemas(sdk::Store& store, const std::string& node);

/// What check_for_node found.
struct NodeCheck {
  declaration::Diagnostics diagnostics;
  /// False when the node has no schemas on record: only the shape was checked.
  bool schemas_checked = false;
};

/// Checks a parsed declaration for `node` with declaration::check: with `schemas` (the node's,
/// nullopt when it sent none) each resource's type must be one of them ("node N has no provider
/// for type T; its providers: …"), its id must match the type's id format and its properties
/// the type's schema; without, the shape only. Every problem is returned. Pure; thread-safe.
NodeCheck check_for_node(const sdk::Value& declaration, std::string_view node,
                         const std::optional<std::vector<sdk::Schema>>& schemas);

/// The refusal of a declaration that check_for_node found problems in: InvalidArgument, path and
/// message of the first diagnostic, with " (and N more problems)" when there are more.
sdk::Error refusal_of(const declaration::Diagnostics& diagnostics);

/// The check of api_declare and api_rollback before anything is stored: check_for_node with the
/// node's schemas on record (node_schemas). On problems: the refusal (refusal_of), with
/// {"diagnostics": declaration::to_json(...), "checked": "schemas"|"shape"} set in `refusal`
/// (when not null). On success: true, and `extra` (the answer) gets "checked" and, when only the
/// shape was checked, "warnings": ["node N has sent no provider schemas …"]. Errors also: the
/// store's.
sdk::Result<bool> checked_for_node(sdk::Store& store, const sdk::Value& decl, const std::string& node,
                                   sdk::Value* refusal, sdk::Value& extra);

}  // namespace mesh::control::detail
