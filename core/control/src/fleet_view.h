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
/// revision carries `module`, sorted by name. The store is read on the caller's thread; what is
/// parsed from it (labels, briefings, latest revisions) on up to `threads` threads (parallel.h,
/// decision record 120). Errors: the store's; Internal for a stored revision that does not read
/// (the first such node by name).
sdk::Result<std::vector<FleetNode>> fleet_nodes(sdk::Store& store, const std::string& module,
                                                const fleet::Selector* selector, std::size_t body_limit,
                                                std::size_t threads = 1);

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

/// The cumulative wave sizes of `text` over `total` nodes: each term `N` (a count) or `P%` (P in
/// 1-100 of `total`, rounded up: 10% of 25 is 3), terms of one kind never decreasing, and the last
/// term `100%` (every node). A term that adds no node over this fleet (10% of 5 after 1) is left
/// out; sizes are capped at `total`. Pure. Errors: InvalidArgument on path "waves" naming the term
/// (not a count or percentage, 0, over 100%, smaller than the one before of its kind) or saying
/// the list does not end at 100%.
sdk::Result<std::vector<std::size_t>> wave_sizes(const std::string& text, std::size_t total);
/// How many nodes of a wave of `size` must apply: `min_applied` ("N", at least 1, or "P%" of
/// `size` rounded up; at most `size`). Pure. Errors: InvalidArgument on path "min_applied".
sdk::Result<std::size_t> min_applied_of(const std::string& min_applied, std::size_t size);

/// What a staged deploy does next with its current wave (decision record 66).
enum class WaveStep {
  wait,  ///< nodes are outstanding and the wave timeout has not passed
  next,  ///< enough applied: write the next wave (or end the deploy after the last)
  halt,  ///< a node failed, or too few applied by the timeout
};
/// The current wave's step and how many of its nodes had to apply.
struct WaveVerdict {
  WaveStep step = WaveStep::wait;
  std::size_t need = 0;  ///< applied nodes required (0 when a failure halted it, or an empty wave)
};
/// The step of a wave of `declared` written nodes of which `applied` applied, `failed` failed and
/// `outstanding` have not answered, `timed_out` when `--wave-timeout` has passed since it was
/// written: a failure halts at once; outstanding nodes make it wait until the timeout; then it
/// moves on when at least `min_applied` applied ("" = every node not outstanding, and at least
/// one; see min_applied_of), and halts otherwise. Pure. Errors: those of min_applied_of.
sdk::Result<WaveVerdict> wave_verdict(std::size_t declared, std::size_t applied, std::size_t failed,
                                      std::size_t outstanding, bool timed_out, const std::string& min_applied);
/// Whether a wave written at `started_ms` has passed its `timeout_ms` at `now_ms` (the
/// control plane's clock; a timeout of 0 or less is past at once). Pure.
bool wave_timed_out(std::int64_t started_ms, std::int64_t timeout_ms, std::int64_t now_ms) noexcept;

/// What a deploy would write (Service::plan_deploy).
struct DeployPlan {
  std::vector<NodePlan> plans;  ///< the nodes whose declaration changes, by name
  sdk::Value skipped = sdk::Value::array();    ///< [{"node","reason"}]
  sdk::Value unchanged = sdk::Value::array();  ///< [NODE]
  /// [{"node","revision"}]: the revision each unchanged node holds, whose state the deploy
  /// report gives for it (decision record 68).
  sdk::Value held = sdk::Value::array();
  sdk::Value dropped = sdk::Value::array();    ///< [NODE] (in plans, losing the module)
  sdk::Value planned = sdk::Value::array();    ///< dry run: [{"node","revision","action","added","changed","removed"}]
  std::map<std::string, std::optional<std::int64_t>> contacts;  ///< last contact of each node planned
};

}  // namespace mesh::control::detail
