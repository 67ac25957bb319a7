// Heartbeats (decision record 17, docs/protocol.md "Trust"): the cache of node identities that
// verifies them without a store read per message, dropped at enrolment and removal, and the
// order of heartbeats per identity, kept across restarts through the store.
#include <algorithm>

#include "service.h"
#include "mesh/common/trust.h"

namespace mesh::control::detail {
namespace {

using sdk::ErrorCode;

// Heartbeat identities cached at most (decision record 17): about 150 bytes each. Beyond it,
// heartbeats of the nodes left out read the store, as they did before the cache.
constexpr std::size_t kHeartbeatIdentityCapacity = 1'000'000;
// How long a cached identity is used before it is read again (decision record 90): another
// instance sharing the store may have re-enrolled or removed the node, which this one's cache
// does not hear of; a heartbeat that fails with a cached identity reads it again at once.
constexpr std::chrono::seconds kHeartbeatIdentityMaxAge{60};

}  // namespace

sdk::Result<Service::HeartbeatIdentity> Service::heartbeat_identity(const std::string& node, bool reread) {
  std::uint64_t epoch = 0;
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(identity_mu_);
    if (auto it = identities_.find(node); it != identities_.end()) {
      if (!reread && now - it->second.filled < kHeartbeatIdentityMaxAge) {
        HeartbeatIdentity cached = it->second;
        cached.cached = true;
        return cached;
      }
      identities_.erase(it);
    }
    epoch = identity_epoch_;
  }
  auto record = store_->node(node);
  if (!record) {
    if (record.error().code == ErrorCode::NotFound)
      return sdk::fail(ErrorCode::PermissionDenied, "node " + node + " is not enrolled", "subject");
    return sdk::fail(record.error());
  }
  if (record->public_key.empty())
    return sdk::fail(ErrorCode::PermissionDenied, "node " + node + " has no key on record; re-enrol it",
                     "subject");
  HeartbeatIdentity id{record->generation,
                       trust::heartbeat_key(options_.keys.heartbeat_master, node, record->generation,
                                            record->public_key),
                       now, false};
  // The newest heartbeat taken before a restart still orders the ones after it.
  if (record->heartbeat_generation == record->generation && record->heartbeat_ms > 0)
    seed_heartbeat(node, record->generation, record->heartbeat_ms);
  std::lock_guard lock(identity_mu_);
  // An enrolment that committed after our read has bumped the epoch: what we read may be the old
  // identity, good for this message (as without a cache) but not to keep.
  if (identity_epoch_ == epoch && identities_.size() < kHeartbeatIdentityCapacity) identities_.emplace(node, id);
  return id;
}

void Service::forget_heartbeat_identity(const std::string& node) {
  std::lock_guard lock(identity_mu_);
  ++identity_epoch_;
  identities_.erase(node);
}

void Service::seed_heartbeat(const std::string& node, std::uint64_t generation, std::int64_t recorded_ms) {
  std::lock_guard lock(heartbeat_mu_);
  auto& last = last_heartbeat_[node];
  if (last.generation != generation) last = LastHeartbeat{generation, 0};
  last.timestamp_ms = std::max(last.timestamp_ms, recorded_ms);
}

sdk::Result<void> Service::fresh_heartbeat(const std::string& node, std::uint64_t generation, std::int64_t ts,
                                           std::int64_t now_ms) {
  // Time-bound: a heartbeat captured earlier than the tolerance is worthless whatever was recorded.
  const std::int64_t tol = options_.clock_tolerance.count();
  if (ts - now_ms > tol || now_ms - ts > tol)
    return sdk::fail(ErrorCode::PermissionDenied,
                     "heartbeat expired: its timestamp is " + std::to_string((ts - now_ms) / 1000) +
                         " s from the control plane's clock (tolerance " + std::to_string(tol / 1000) + " s)",
                     trust::kHeaderTimestamp);
  // Monotonic per identity: strictly newer than the newest taken (also before a restart: seeded
  // from the store). A host whose clock steps back is not contact until it passes that again —
  // at most the tolerance, since nothing further ahead was taken.
  std::lock_guard lock(heartbeat_mu_);
  auto& last = last_heartbeat_[node];
  if (last.generation != generation) last = LastHeartbeat{generation, 0};
  if (ts <= last.timestamp_ms)
    return sdk::fail(ErrorCode::PermissionDenied,
                     "heartbeat replayed (its timestamp is not newer than one already taken)", trust::kHeaderTimestamp);
  last.timestamp_ms = ts;
  return {};
}


}  // namespace mesh::control::detail
