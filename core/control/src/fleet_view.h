// Which nodes a module's deploy concerns (api_fleet.cpp, api_deploy.cpp; decision record 65):
// the nodes its assignment selects and the nodes whose latest revision carries it, each with its
// template context, its current state and, when it must be skipped, why. Internal to
// mesh_control; definitions in fleet_view.cpp.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fleet_state.h"
#include "mesh/fleet/fleet.h"
#include "mesh/sdk/store.h"

namespace mesh::control::detail {

/// One node a deploy of a module concerns.
struct FleetNode {
  sdk::NodeRecord record;
  fleet::NodeContext context;
  NodeState state;
  bool selected = false;  ///< the assignment's selector matches it
  bool carries = false;   ///< its latest revision has the module
  /// Why it is left out ("never briefed", "ineligible: disk: …"); "" when it is not.
  std::string skip_reason;
};

/// Every enrolled node that `selector` (nullptr: none, as after unassign) selects or whose latest
/// revision carries `module`, sorted by name. Errors: the store's.
sdk::Result<std::vector<FleetNode>> fleet_nodes(sdk::Store& store, const std::string& module,
                                                const fleet::Selector* selector, std::size_t body_limit);

/// What the module's next deploy does to which node.
struct Membership {
  std::vector<std::string> add, drop, keep;
  std::vector<std::pair<std::string, std::string>> skipped;  ///< node, reason
  /// [{"node","reason"}]
  sdk::Value skipped_value() const;
};
sdk::Result<Membership> membership(sdk::Store& store, const std::string& module, const fleet::Selector* selector,
                                   std::size_t body_limit);

/// The stored module version. Errors: NotFound naming the module (unknown) or the version (with
/// the stored ones); Internal when the record is unreadable; the store's.
sdk::Result<fleet::Module> load_module(sdk::Store& store, const std::string& name, const std::string& version);

/// The module's assignment selector; NotFound (path "module") saying how to assign it.
sdk::Result<fleet::Selector> assigned_selector(sdk::Store& store, const std::string& module);

/// A staged deploy's options (`mesh deploy --waves`, decision record 66).
struct StagedOptions {
  std::string waves;        ///< "1,10%,100%": cumulative sizes over the nodes written
  std::string min_applied;  ///< "N" or "P%" of a wave; "" = every node not outstanding, at least one
  std::int64_t wave_timeout_ms = 600000;
};

/// The cumulative wave sizes of `text` over `total` nodes: each term `N` or `P%` (P in 1-100,
/// rounded up), not decreasing, the last reaching `total` (a missing end is added). Empty waves are
/// left out. Errors: InvalidArgument on path "waves" naming the term.
sdk::Result<std::vector<std::size_t>> wave_sizes(const std::string& text, std::size_t total);
/// How many nodes of a wave of `size` must apply: `min_applied` ("N" or "P%", rounded up, at most
/// `size`). Errors: InvalidArgument on path "min_applied".
sdk::Result<std::size_t> min_applied_of(const std::string& min_applied, std::size_t size);

/// What a deploy would write (Service::plan_deploy).
struct DeployPlan {
  std::vector<NodePlan> plans;  ///< the nodes whose declaration changes, by name
  sdk::Value skipped = sdk::Value::array();    ///< [{"node","reason"}]
  sdk::Value unchanged = sdk::Value::array();  ///< [NODE]
  sdk::Value dropped = sdk::Value::array();    ///< [NODE] (in plans, losing the module)
  sdk::Value planned = sdk::Value::array();    ///< dry run: [{"node","revision","action","added","changed","removed"}]
  std::map<std::string, std::optional<std::int64_t>> contacts;  ///< last contact of each node planned
};

}  // namespace mesh::control::detail
