#include "rate_limit.h"

#include <algorithm>

namespace mesh::control::detail {

RateLimiter::RateLimiter(double rate_per_second, double burst, std::size_t max_keys)
    : rate_(std::max(rate_per_second, 0.001)), burst_(std::max(burst, 1.0)), max_keys_(std::max<std::size_t>(1, max_keys)) {}

bool RateLimiter::take(Bucket& b, Clock::time_point now) {
  const double elapsed = std::chrono::duration<double>(now - b.at).count();
  if (elapsed > 0) {
    b.tokens = std::min(burst_, b.tokens + elapsed * rate_);
    b.at = now;
  }
  if (b.tokens < 1.0) return false;
  b.tokens -= 1.0;
  return true;
}

void RateLimiter::sweep(Clock::time_point now) {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    const double elapsed = std::chrono::duration<double>(now - it->second.at).count();
    it = it->second.tokens + elapsed * rate_ >= burst_ ? buckets_.erase(it) : std::next(it);
  }
}

RateLimiter::Bucket& RateLimiter::bucket(const std::string& key, Clock::time_point now) {
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    // At most ten sweeps a second: a flood of new names must not make every call O(max_keys).
    if (buckets_.size() >= max_keys_ && now - last_sweep_ >= std::chrono::milliseconds(100)) {
      sweep(now);
      last_sweep_ = now;
    }
    if (buckets_.size() >= max_keys_) {
      if (!overflow_started_) {
        overflow_ = Bucket{burst_, now};
        overflow_started_ = true;
      }
      return overflow_;
    }
    it = buckets_.emplace(key, Bucket{burst_, now}).first;
  }
  return it->second;
}

bool RateLimiter::spend(const std::string& key, double cost, Clock::time_point now, double* wait_seconds) {
  std::lock_guard lock(mu_);
  Bucket& b = bucket(key, now);
  const double elapsed = std::chrono::duration<double>(now - b.at).count();
  if (elapsed > 0) {
    b.tokens = std::min(burst_, b.tokens + elapsed * rate_);
    b.at = now;
  }
  if (b.tokens <= 0) {
    if (wait_seconds) *wait_seconds = -b.tokens / rate_;
    return false;
  }
  b.tokens -= std::max(cost, 0.0);
  return true;
}

bool RateLimiter::allow(const std::string& key, Clock::time_point now) {
  std::lock_guard lock(mu_);
  return take(bucket(key, now), now);
}

std::size_t RateLimiter::size() const {
  std::lock_guard lock(mu_);
  return buckets_.size();
}

}  // namespace mesh::control::detail
