// Nox Mesh SDK — resources, observed state and plans: the data a provider works on.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::sdk {

/// A resource's name: `type:id` (`file:/etc/motd`, `package:nginx`). Unique in a declaration.
struct ResourceId {
  std::string type;  ///< provider name, [a-z0-9_-]+
  std::string id;    ///< provider-specific identity (a path, a package name, a unit name)

  std::string str() const { return type + ":" + id; }
  /// Splits "type:id" at the first ':'. InvalidArgument when either side is empty.
  static Result<ResourceId> parse(std::string_view text) {
    auto colon = text.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size())
      return fail(ErrorCode::InvalidArgument,
                  "'" + std::string(text) + "' is not a resource name of the form type:id");
    return ResourceId{std::string(text.substr(0, colon)), std::string(text.substr(colon + 1))};
  }
  friend auto operator<=>(const ResourceId&, const ResourceId&) = default;
};

/// One declared resource, as the engine hands it to a provider (already schema-validated).
struct Resource {
  ResourceId rid;
  /// JSON object of the declared properties, with schema defaults filled in.
  Value properties = Value::object();
  /// Resources this one is applied after (`requires` in the declaration; `requires` is a C++20
  /// keyword, hence the name).
  std::vector<ResourceId> depends_on = {};
};

/// What a provider observed of a resource: an object with the same property names as the schema
/// (plus read-only facts such as `sha256`). Plans compare declared properties with it.
struct State {
  Value properties = Value::object();
};

/// What a plan will do.
enum class PlanAction { None, Create, Update, Remove };

constexpr const char* to_string(PlanAction a) noexcept {
  switch (a) {
    case PlanAction::None: return "none";
    case PlanAction::Create: return "create";
    case PlanAction::Update: return "update";
    case PlanAction::Remove: return "remove";
  }
  return "none";
}

/// One property that differs: `path` is `properties.<name>`; `observed` is null when absent.
/// A provider's own change for a notification (provider.h, "Notification") has a path without
/// the "properties." prefix ("restart", "refresh_index"), null `observed` and a `declared` of the
/// provider's choosing (null or true).
struct Change {
  std::string path;
  Value observed;
  Value declared;
};

/// The difference between declared and observed, as data (it is printed by `--dry-run` and
/// carried into apply unchanged). A plan with action None must have no changes. A plan is made
/// by the provider that applies it (PlanResponse::plan) and handed back to it unchanged
/// (ApplyRequest::plan); the engine reads it (action, changes) but never edits it.
struct Plan {
  ResourceId rid;
  PlanAction action = PlanAction::None;
  std::vector<Change> changes = {};
  /// The declared resource the plan was made for (apply needs its full properties).
  Resource desired = {};

  bool empty() const noexcept { return action == PlanAction::None; }
};

}  // namespace mesh::sdk
