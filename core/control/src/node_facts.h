// A node's facts (decision record 54): the short keyed values its briefing carries
// (docs/protocol.md "Briefing"), checked when the briefing arrives and shown with the node.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "mesh/sdk/result.h"
#include "mesh/sdk/store.h"
#include "mesh/sdk/value.h"

namespace mesh::control::detail {

/// Bounds of a briefing's `facts`: keys, bytes per key, bytes per value.
inline constexpr std::size_t kMaxFacts = 64;
inline constexpr std::size_t kMaxFactKey = 64;
inline constexpr std::size_t kMaxFactValue = 256;

/// The `facts` field of a briefing body, checked: an object of at most kMaxFacts keys, each
/// key 1 to kMaxFactKey characters of [a-z0-9._-] starting with a letter or digit, each value a
/// string of 1 to kMaxFactValue bytes without control characters. Absent or null (a host that
/// predates facts): an empty object. Errors: InvalidArgument whose path names the field
/// ("facts", or "facts.os.id") and what is wrong. Pure; thread-safe.
sdk::Result<sdk::Value> briefing_facts(const sdk::Value& body);

/// The facts of a stored briefing (the JSON text the control plane recorded, "" for none): its
/// `facts` object, or an empty object when there is no briefing, it does not parse or has no
/// facts (recorded before facts existed). Pure; thread-safe.
sdk::Value stored_facts(const std::string& briefing_json);

/// When the control plane last heard from `node`'s host, by its own clock: the newest of the
/// store's last contact (heartbeats, apply and drift reports) and the receipt of its latest
/// briefing (the stored briefing's `at`, written by the control plane). A briefing is a verified
/// message from the host, so a node that briefed (`mesh-host brief`) but has sent no heartbeat yet
/// is not "never" heard from. Enrolment is not counted, nor the briefing `mesh-host enrol` sends
/// with it (stored with "enrolment": true; decision record 195): a node whose daemon never ran
/// stays "never". nullopt when neither is known. Pure; thread-safe.
std::optional<std::int64_t> last_contact_ms(const sdk::NodeRecord& node);

/// The record namespace of operator labels: key the node name, value a JSON object of strings.
inline constexpr const char* kLabelsNamespace = "labels";

/// The operator labels of `node` (record ns `labels`): its object, or an empty object when it
/// has none, its record does not read as an object, or the store keeps no records
/// (Unsupported). Errors: the store's others. Thread-safe as the store is.
sdk::Result<sdk::Value> shown_labels(sdk::Store& store, const std::string& node);

/// Every node's labels, by node name (nodes without labels are not in the map), read in one
/// call; the same rules as shown_labels. Errors: the store's, but Unsupported (an empty map).
sdk::Result<std::map<std::string, sdk::Value>> all_shown_labels(sdk::Store& store);

}  // namespace mesh::control::detail
