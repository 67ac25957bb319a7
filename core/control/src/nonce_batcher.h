// Group commit of nonces (docs/decisions/0119). Internal to mesh-control.
//
// Every signed request's nonce (an operator's API request, a node's latest/recovery/content
// request) is remembered in the store before the request is handled, so that a replay is refused
// after a restart and on every control plane sharing the store (decision records 28, 90). One
// store write per nonce — one sqlite transaction with its fsync, one JetStream operation — was
// the cost of a reconnect storm. Here the workers hand each nonce to one committer thread, which
// takes every nonce waiting — those that arrived while the previous batch was written — and
// remembers them in ONE store write (Store::remember_requests), then gives each its own result.
// Nothing is handled before the write holding its nonce returned durable: a request answered is
// a request whose nonce survives a crash.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "mesh/sdk/store.h"

namespace mesh::control::detail {

/// What the store answered for one nonce: nullopt when fresh (remembered now), the record kept
/// otherwise (a replay, or a retry of an idempotent request), or the store's error.
using NonceResult = sdk::Result<std::optional<sdk::RequestRecord>>;

/// One nonce waiting for its batch.
struct PendingNonce {
  sdk::RequestRecord record;
  std::int64_t now_ms = 0;
  /// Called once with the nonce's own result, on the committer thread after the batch is durable
  /// (or failed as a whole: then with the store's error), or on the submitting thread when the
  /// batcher is stopped. Must be quick (post the request's handling elsewhere) and must not call
  /// submit() or remember(); exceptions are swallowed.
  std::function<void(NonceResult&&)> done;
};

/// Remembers batches of nonces. Thread-safe: submit() and remember() from any number of threads.
class NonceBatcher {
 public:
  /// `store_abi_minor`: the SDK ABI minor the store plugin was built with; below 4 its table has
  /// no remember_requests, and a batch is remembered with remember_request one at a time (still
  /// one committer: the workers do not wait for each other's writes). `max_batch`: most nonces
  /// in one write; `max_waiting`: most nonces waiting (submit() blocks beyond it, so that the
  /// control plane's own queue fills and says "busy"). Both ≥ 1.
  NonceBatcher(std::shared_ptr<sdk::Store> store, std::uint32_t store_abi_minor, std::size_t max_batch = 1024,
               std::size_t max_waiting = 8192);
  /// stop().
  ~NonceBatcher();
  NonceBatcher(const NonceBatcher&) = delete;
  NonceBatcher& operator=(const NonceBatcher&) = delete;

  /// Queues `nonce` for the next batch; blocks while max_waiting nonces wait. After stop(), its
  /// `done` is called at once with Unavailable (retry later). Never throws.
  void submit(PendingNonce&& nonce) noexcept;
  /// submit(), then waits for the nonce's result (for a caller that must answer in line, such as
  /// an operator's request with its retry semantics). Never call it on the committer thread.
  NonceResult remember(const sdk::RequestRecord& record, std::int64_t now_ms) noexcept;
  /// Returns once every nonce submitted before the call has its result delivered.
  void drain() noexcept;
  /// drain(), then ends the committer thread; later submits get Unavailable.
  void stop() noexcept;

  /// How many store writes were made and how many nonces they held (for figures and tests).
  std::uint64_t batches() const noexcept;
  std::uint64_t nonces() const noexcept;
  /// How many nonces wait for the next batch now (for tests).
  std::size_t waiting() const noexcept;

 private:
  void run() noexcept;
  void commit(std::deque<PendingNonce>& batch) noexcept;

  std::shared_ptr<sdk::Store> store_;
  std::uint32_t abi_minor_;
  std::size_t max_batch_;
  std::size_t max_waiting_;
  mutable std::mutex mu_;
  std::condition_variable cv_;        // the committer waits for nonces
  std::condition_variable space_cv_;  // submitters wait for room; drain() waits for progress
  std::deque<PendingNonce> waiting_;
  std::uint64_t submitted_ = 0;
  std::uint64_t answered_ = 0;
  std::uint64_t batches_ = 0;
  bool stopping_ = false;
  bool finished_ = false;
  std::thread thread_;  // last: started when everything it uses exists
};

}  // namespace mesh::control::detail
