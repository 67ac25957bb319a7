// Replay protection for signed requests (operator API, a node's latest/recovery): one bounded
// nonce cache per signer in memory, in front of the store's durable record of every request seen
// (Store::remember_request), and the waiting of a retried mutating request for its first run.
// docs/protocol.md "Nonces"; decision records 28 and 29. Internal to mesh-control.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "mesh/sdk/result.h"
#include "mesh/sdk/store.h"

namespace mesh::control::detail {

/// Nonces remembered for `window`, in one cache per signer holding at most `per_signer` unexpired
/// nonces: a signer that sends faster than that only makes its own requests busy (decision record
/// 29). Signers are verified identities (operators, enrolled nodes), so the number of caches is
/// bounded by the fleet; a signer's cache is dropped once all its nonces expired. Thread-safe.
class SignerReplayCache {
 public:
  enum class Outcome { Fresh, Replay, Full };
  SignerReplayCache(std::size_t per_signer, std::chrono::milliseconds window);

  /// Fresh (and remembered) when `nonce` of `signer` was not seen within the window; Replay when
  /// it was; Full when `signer` already holds `per_signer` unexpired nonces (refuse as busy).
  Outcome check_and_remember(const std::string& signer, const std::string& nonce, std::int64_t now_ms);
  /// Unexpired nonces held for `signer` (as of the last call for it). For tests.
  std::size_t size(const std::string& signer) const;

 private:
  struct PerSigner {
    std::unordered_set<std::string> seen;
    std::deque<std::pair<std::int64_t, std::string>> order;  // (expiry, nonce), oldest first
  };
  void expire(PerSigner& s, std::int64_t now_ms);
  /// Drops the caches of signers whose nonces have all expired (every `kSweepEvery` calls).
  void sweep(std::int64_t now_ms);

  mutable std::mutex mu_;
  std::size_t per_signer_;
  std::int64_t window_ms_;
  std::unordered_map<std::string, PerSigner> signers_;
  std::uint64_t calls_ = 0;
};

/// Signed requests that are being handled right now (signer + nonce), so that a retry of a
/// mutating request that arrives while its first copy is still running waits for it instead of
/// running it again. Thread-safe.
class InFlight {
 public:
  /// Held while a request runs; releasing it (destruction) wakes whoever waits for that request.
  class Ticket {
   public:
    Ticket(InFlight* owner, std::string key) : owner_(owner), key_(std::move(key)) {}
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

   private:
    InFlight* owner_;
    std::string key_;
  };

  /// Marks `key` as running and returns its ticket; nullptr when it is already running here.
  std::unique_ptr<Ticket> start(const std::string& key);
  /// Waits until `key` is not running here, at most `timeout`. True when it is not running.
  bool wait(const std::string& key, std::chrono::milliseconds timeout);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> running_;
};

}  // namespace mesh::control::detail
