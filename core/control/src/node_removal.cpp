// `mesh node remove` (decision record 37) and `mesh nodes --all`: retiring a node, listing the
// retired ones. Service methods kept out of service.cpp.
#include <spdlog/spdlog.h>

#include "fields.h"
#include "mesh/common/clock.h"
#include "mesh/common/logging.h"
#include "mesh/common/protocol.h"
#include "service.h"

namespace mesh::control::detail {
namespace {

using sdk::ErrorCode;
using sdk::Value;

// The first SDK ABI minor whose Store has all_nodes/remove_node in its vtable, for this ABI major
// (ABI 1 added them in 1.1; ABI 2, the only major the loader accepts now, has them from 2.0).
constexpr std::int64_t kStoreRemovalAbiMinor = MESH_SDK_ABI_MAJOR == 1 ? 1 : 0;

}  // namespace

sdk::Result<void> Service::store_can_remove() const {
  if (static_cast<std::int64_t>(options_.store_abi_minor) < kStoreRemovalAbiMinor)
    return sdk::fail(ErrorCode::Unsupported,
                     "the store plugin was built for SDK ABI " + std::to_string(MESH_SDK_ABI_MAJOR) + "." +
                         std::to_string(options_.store_abi_minor) + ", which has no node removal (" +
                         std::to_string(MESH_SDK_ABI_MAJOR) + "." + std::to_string(kStoreRemovalAbiMinor) +
                         " has it): rebuild the store plugin");
  return {};
}

sdk::Result<Value> Service::api_node_remove(const Value& p, std::int64_t now_ms) {
  Fields f(p);
  MESH_TRY(node, f.string("node"));
  if (!protocol::valid_node_name(node))
    return sdk::fail(f.error("node", "is not a valid node name (1-64 characters of a-z, 0-9, '-' and '_', "
                                     "starting with a letter or digit)"));
  MESH_TRY(purge, f.bool_or("purge", false));
  if (auto ok = store_can_remove(); !ok) return sdk::fail(ok.error());
  auto before = store_->remove_node(node, now_ms, purge);
  if (!before) {
    sdk::Error e = before.error();
    if (e.code == ErrorCode::NotFound) e.path = "node";
    return sdk::fail(std::move(e));
  }
  // From here its heartbeat key verifies nothing, and the broker forgets its nkey (the
  // authorization file is written from the enrolled nodes only, then the server is reloaded).
  forget_heartbeat_identity(node);
  if (options_.nodes_changed) options_.nodes_changed();
  common::logger()->info("node removed node={} generation={} purge={}", node, before->generation, purge);
  Value v = Value::object();
  v.set("node", node);
  v.set("removed_at", Value(common::format_rfc3339(before->removed_at_ms.value_or(now_ms))));
  v.set("generation", static_cast<std::int64_t>(before->generation));
  v.set("purged", purge);
  return v;
}

sdk::Result<std::vector<sdk::NodeRecord>> Service::listed_nodes(const Value& p) {
  Fields f(p);
  MESH_TRY(all, f.bool_or("all", false));
  if (!all) return store_->nodes();
  if (auto ok = store_can_remove(); !ok) return sdk::fail(ok.error());
  return store_->all_nodes();
}

}  // namespace mesh::control::detail
