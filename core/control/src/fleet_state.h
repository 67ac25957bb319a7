// What the fleet operations (api_fleet.cpp, api_deploy.cpp, the composition-aware declare and
// rollback of api_write.cpp) share: the record namespaces, a revision's composition (which
// resource came from where, decision record 63), a node's current state read from the store, and
// the labels record. Internal to mesh_control; definitions in fleet_state.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mesh/sdk/result.h"
#include "mesh/sdk/store.h"
#include "mesh/sdk/value.h"

namespace mesh::control::detail {

/// Record namespaces (sdk/store.h StoredRecord) the fleet operations own.
inline constexpr const char* kModuleNs = "module";          ///< key NAME/VERSION
inline constexpr const char* kLabelsNs = "labels";          ///< key NODE, a JSON object of strings
inline constexpr const char* kAssignmentNs = "assignment";  ///< key MODULE
inline constexpr const char* kDeployNs = "deploy";          ///< key: id zero-padded to 12 digits
/// A staged deploy still running (its next wave not written yet): key as kDeployNs, value "{}".
inline constexpr const char* kDeployActiveNs = "deploy_active";
/// The newest deploy of each module: key MODULE, value {"deploy": ID}. Written with every deploy
/// (a compare-and-swap), so that a staged deploy knows when a newer one of its module overtook it
/// (decision record 69).
inline constexpr const char* kDeployLatestNs = "deploy_latest";

/// How many times a write that lost a compare-and-swap race (FailedPrecondition) is recomputed
/// and tried again before the operator is told to retry.
inline constexpr int kCasAttempts = 8;

/// `id` zero-padded to 12 digits: the key of a deploy record.
std::string padded_id(std::uint64_t id);

/// One module's part of a revision.
struct ModulePart {
  std::string version;
  std::vector<std::string> resources;  ///< `type:id`, in the order rendered
  friend bool operator==(const ModulePart&, const ModulePart&) = default;
};

/// A revision's composition: own resources, each module's, who asked and why.
struct Composition {
  std::vector<std::string> own;
  std::map<std::string, ModulePart> modules;
  std::string operator_name;
  std::string cause;  ///< "declare", "deploy" or "rollback"
  std::uint64_t deploy = 0;
};

/// `type:id` of a resource object ("" when it has neither).
std::string resource_key(const sdk::Value& resource);
/// The `type:id` of every resource of an array, in order.
std::vector<std::string> resource_keys(const sdk::Value& resources);
/// The resources of `all` (an array) whose `type:id` is in `keys`, in the order of `all`.
sdk::Value pick_resources(const sdk::Value& all, const std::vector<std::string>& keys);

/// Reads a stored composition. "" (a revision written before compositions were kept) is all
/// own: every resource of `resources`. An unreadable one is treated the same way.
Composition parse_composition(const std::string& text, const sdk::Value& resources);
/// The composition as stored: {"own","modules":{NAME:{"version","resources"}},"operator","cause",
/// "deploy"} ("deploy" only when set).
sdk::Value composition_value(const Composition& c);
std::string composition_json(const Composition& c);

/// A node's declaration as it stands: its latest revision (if any), that revision's resources
/// (an empty array when none) and composition.
struct NodeState {
  std::uint64_t revision = 0;  ///< 0 when the node has none yet
  sdk::Value resources = sdk::Value::array();
  Composition composition;
};
/// Reads NodeState from the store. Errors: the store's; Internal when the stored body is
/// unreadable.
sdk::Result<NodeState> node_state(sdk::Store& store, const std::string& node);
/// node_state() of what Store::latest_revision returned for `node` (no store call). Pure.
sdk::Result<NodeState> node_state_of(const std::string& node, const std::optional<sdk::RevisionRecord>& latest);

/// The node's operator labels (record ns `labels`): an object of strings, empty when none.
sdk::Result<sdk::Value> node_labels(sdk::Store& store, const std::string& node);
/// node_labels() of what Store::record(kLabelsNs, node) returned (no store call). Pure.
sdk::Value node_labels_of(const std::optional<sdk::StoredRecord>& record);

/// The failed lines of a briefing (JSON text) as "check: detail; …", or "" when none.
std::string briefing_failures(const std::string& briefing);

}  // namespace mesh::control::detail

namespace mesh::control::detail {

/// One node's new revision in a composed write (Service::write_plans).
struct NodePlan {
  std::string node;
  sdk::Value resources = sdk::Value::array();
  Composition composition;
  /// The node's latest revision the plan was computed from (0: none yet): the write's
  /// compare-and-swap (DeclarationWrite::expected_revision).
  std::uint64_t expected_revision = 0;
};

}  // namespace mesh::control::detail
