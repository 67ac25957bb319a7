// The shape of an operator's declaration as the control plane sees it: the shared declaration
// check (mesh/declaration/declaration.h) without providers — the document's shape, unique
// resource names, `requires` and `restart_on` naming declared resources without a cycle
// (INTERFACE.md "Declaration"). Properties are checked by the host's providers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "mesh/common/json.h"
#include "mesh/declaration/declaration.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::control {

/// Checks a parsed declaration for `node` with declaration::check (no schemas): an object with
/// only `node` (a node name equal to `node`, optional) and `resources` (an array of objects with
/// non-empty string `type` and `id`, object `properties`, optional `requires` list of "type:id"
/// strings, no other keys); no `revision` (the control plane assigns it); `type:id` unique;
/// every `requires` and `properties.restart_on` entry names a declared resource; no cycle.
/// Returns every problem found (empty when none). Pure; thread-safe.
declaration::Diagnostics check_declaration_all(const sdk::Value& declaration, std::string_view node);

/// check_declaration_all's first diagnostic as an error: InvalidArgument with `path` the JSON
/// path ("resources[2].type") and `message` the diagnostic's message (without the path).
/// Pure; thread-safe.
sdk::Result<void> check_declaration(const sdk::Value& declaration, std::string_view node);

/// parse_json (with `limits`) and then check_declaration. Returns the parsed document.
sdk::Result<sdk::Value> parse_declaration_text(std::string_view text, std::string_view node,
                                               const common::JsonLimits& limits = {});

/// The body the control plane stores and pushes: `{"node","revision","resources"}` with the
/// operator's resources exactly as given (compact JSON via sdk::Value::to_json).
std::string render_declaration(const sdk::Value& resources, std::string_view node,
                               std::uint64_t revision);

}  // namespace mesh::control
