#include "replay_cache.h"

#include <algorithm>

namespace mesh::control::detail {
namespace {
constexpr std::uint64_t kSweepEvery = 4096;
}  // namespace

SignerReplayCache::SignerReplayCache(std::size_t per_signer, std::chrono::milliseconds window)
    : per_signer_(std::max<std::size_t>(1, per_signer)), window_ms_(window.count()) {}

void SignerReplayCache::expire(PerSigner& s, std::int64_t now_ms) {
  while (!s.order.empty() && s.order.front().first <= now_ms) {
    s.seen.erase(s.order.front().second);
    s.order.pop_front();
  }
}

void SignerReplayCache::sweep(std::int64_t now_ms) {
  for (auto it = signers_.begin(); it != signers_.end();) {
    expire(it->second, now_ms);
    it = it->second.order.empty() ? signers_.erase(it) : std::next(it);
  }
}

SignerReplayCache::Outcome SignerReplayCache::check_and_remember(const std::string& signer, const std::string& nonce,
                                                                 std::int64_t now_ms) {
  std::lock_guard lock(mu_);
  if (++calls_ % kSweepEvery == 0) sweep(now_ms);
  PerSigner& s = signers_[signer];
  expire(s, now_ms);
  if (s.seen.count(nonce)) return Outcome::Replay;
  if (s.seen.size() >= per_signer_) return Outcome::Full;
  // Expiries stay in order even if the clock steps back (an entry is then kept a little longer).
  std::int64_t expiry = now_ms + window_ms_;
  if (!s.order.empty()) expiry = std::max(expiry, s.order.back().first);
  s.seen.insert(nonce);
  s.order.emplace_back(expiry, nonce);
  return Outcome::Fresh;
}

std::size_t SignerReplayCache::size(const std::string& signer) const {
  std::lock_guard lock(mu_);
  auto it = signers_.find(signer);
  return it == signers_.end() ? 0 : it->second.seen.size();
}

InFlight::Ticket::~Ticket() {
  {
    std::lock_guard lock(owner_->mu_);
    owner_->running_.erase(key_);
  }
  owner_->cv_.notify_all();
}

std::unique_ptr<InFlight::Ticket> InFlight::start(const std::string& key) {
  std::lock_guard lock(mu_);
  if (!running_.insert(key).second) return nullptr;
  return std::make_unique<Ticket>(this, key);
}

bool InFlight::wait(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return running_.count(key) == 0; });
}

}  // namespace mesh::control::detail
