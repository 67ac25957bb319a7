// Per-sender rate limits of the control plane (decision record 29): a token bucket per node, so
// that one node sending at full rate only loses its own excess. Internal to mesh-control.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace mesh::control::detail {

/// Token buckets keyed by sender: each key may send `burst` messages at once and `rate` per second
/// on average; the excess is refused. At most `max_keys` buckets are kept: when full, buckets that
/// have refilled (equivalent to a new one) are dropped, and if none has, the keys left out share
/// one overflow bucket (so memory stays bounded whatever names arrive). Thread-safe; one mutex,
/// O(1) per call except the occasional sweep.
class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  RateLimiter(double rate_per_second, double burst, std::size_t max_keys);

  /// True when `key` may send one more message at `now` (a token is taken); false to drop it.
  bool allow(const std::string& key, Clock::time_point now = Clock::now());
  /// A budget in units (bytes) rather than messages (decision record 186): true when `key`'s
  /// bucket is not in debt at `now`, and then `cost` is taken from it, even past zero (one
  /// message larger than the whole burst passes once and is paid for by the wait after it);
  /// false when in debt, with `*wait_seconds` (when not null) set to how long until it is not.
  bool spend(const std::string& key, double cost, Clock::time_point now = Clock::now(),
             double* wait_seconds = nullptr);
  /// Buckets held (for tests).
  std::size_t size() const;

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point at{};
  };
  bool take(Bucket& b, Clock::time_point now);
  /// The bucket of `key` (or the shared overflow bucket), refilled to `now`. Mutex held.
  Bucket& bucket(const std::string& key, Clock::time_point now);
  void sweep(Clock::time_point now);

  mutable std::mutex mu_;
  double rate_;
  double burst_;
  std::size_t max_keys_;
  std::unordered_map<std::string, Bucket> buckets_;
  Bucket overflow_;
  bool overflow_started_ = false;
  Clock::time_point last_sweep_{};
};

}  // namespace mesh::control::detail
