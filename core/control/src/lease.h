// The lease on a control plane's background work, kept in the store (decision record 91).
// Internal.
//
// Several mesh-control instances share one store. Work that no request asks for — re-pushing
// declarations stranded by an instance that died between the write and the push, or lost on the
// way to a node that stays connected (decision record 192), moving staged
// deploys on to their next wave — is done by one instance at a time: the holder of the lease,
// a store record ("control.lease", <name>) {"holder", "run", "expires_ms"} written with
// compare-and-swap (Store::put_records, expected_version). The holder renews it every third of
// its length; any instance takes it once it has expired (its holder died or lost the store).
// Each instance also keeps a membership record ("control.instance", <instance id>) renewed the
// same way, so that the holder learns when another instance died and re-pushes what that one
// may have stranded.
//
// Times are the instances' wall clocks (epoch ms): instances on several machines must keep
// their clocks within a small fraction of the lease (NTP). The lease is about not doing work
// twice and about someone doing it; what the work writes is still checked by the store's own
// compare-and-swap, so an overlap after a clock jump writes nothing wrong.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mesh/sdk/store.h"

namespace mesh::control::detail {

/// The namespaces of the records (Store::record / put_records) the lease and the membership use.
inline constexpr const char* kLeaseNs = "control.lease";
inline constexpr const char* kInstanceNs = "control.instance";

class Lease {
 public:
  /// What one round found.
  struct Round {
    bool held = false;   ///< this instance holds the lease now (until about now + ttl)
    bool taken = false;  ///< it did not before this round (a start or a takeover)
    /// Other instances whose membership expired since the last round (they died or were cut off
    /// from the store): the holder re-pushes what they may have stranded. Only filled for the
    /// holder; their records are erased (CAS), so each is reported once across instances.
    std::vector<std::string> departed;
  };

  /// `store`: shared, thread-safe; `name`: the lease's key (e.g. "background"); `instance`: this
  /// instance's id (instance.h); `ttl`: how long a renewal lasts (>= 2 s in configs). `run` is a
  /// fresh random token of this process, so that a copy of the instance id in a second process
  /// never holds the lease as the first one's.
  Lease(std::shared_ptr<sdk::Store> store, std::string name, std::string instance, std::chrono::milliseconds ttl);

  /// One round at `now_ms` (epoch ms): renews this instance's membership; renews the lease when
  /// held, takes it when it is free or expired; the holder collects departed instances. Store
  /// errors are logged (rate-limited) and count as not held; a store that keeps no records
  /// (Unsupported) cannot be shared, so its only instance holds the lease. Not thread-safe with itself; call
  /// it from one thread, every renew_every().
  Round tick(std::int64_t now_ms) noexcept;
  /// Whether the last round left this instance holding a lease that has not expired by `now_ms`
  /// (with a margin of a tenth of the ttl, so that the holder stops before another may start).
  /// Thread-safe.
  bool held(std::int64_t now_ms) const noexcept;
  /// Gives the lease and the membership up (a clean stop): the lease record's expiry is set to
  /// 0 so that another instance takes over at its next round. Errors are logged. Idempotent.
  void release(std::int64_t now_ms) noexcept;
  /// ttl / 3: how often tick() should run.
  std::chrono::milliseconds renew_every() const noexcept { return ttl_ / 3; }
  const std::string& instance() const noexcept { return instance_; }

 private:
  bool renew_membership(std::int64_t now_ms);
  std::vector<std::string> collect_departed(std::int64_t now_ms);

  std::shared_ptr<sdk::Store> store_;
  std::string name_;
  std::string instance_;
  std::string run_;
  std::chrono::milliseconds ttl_;
  std::atomic<std::int64_t> held_until_ms_{0};
  bool was_held_ = false;
};

}  // namespace mesh::control::detail
