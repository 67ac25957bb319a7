// Group commit of nonces (nonce_batcher.h, docs/decisions/0119).
#include "nonce_batcher.h"

#include <algorithm>
#include <future>
#include <string>
#include <vector>

namespace mesh::control::detail {
namespace {

// The first SDK ABI minor whose Store has remember_requests in its table.
constexpr std::uint32_t kRememberRequestsAbiMinor = 4;

}  // namespace

NonceBatcher::NonceBatcher(std::shared_ptr<sdk::Store> store, std::uint32_t store_abi_minor, std::size_t max_batch,
                           std::size_t max_waiting)
    : store_(std::move(store)),
      abi_minor_(store_abi_minor),
      max_batch_(std::max<std::size_t>(1, max_batch)),
      max_waiting_(std::max<std::size_t>(1, max_waiting)),
      thread_([this] { run(); }) {}

NonceBatcher::~NonceBatcher() { stop(); }

void NonceBatcher::submit(PendingNonce&& nonce) noexcept {
  try {
    std::unique_lock lock(mu_);
    space_cv_.wait(lock, [&] { return stopping_ || waiting_.size() < max_waiting_; });
    if (!stopping_) {
      waiting_.push_back(std::move(nonce));
      ++submitted_;
      lock.unlock();
      cv_.notify_one();
      return;
    }
  } catch (...) {
  }
  try {
    if (nonce.done) nonce.done(sdk::fail(sdk::ErrorCode::Unavailable, "the control plane is stopping; retry later"));
  } catch (...) {
  }
}

NonceResult NonceBatcher::remember(const sdk::RequestRecord& record, std::int64_t now_ms) noexcept {
  try {
    auto promise = std::make_shared<std::promise<NonceResult>>();
    auto future = promise->get_future();
    submit(PendingNonce{record, now_ms, [promise](NonceResult&& r) { promise->set_value(std::move(r)); }});
    return future.get();
  } catch (const std::exception& e) {
    return sdk::fail(sdk::ErrorCode::Internal, std::string("remember_request: ") + e.what());
  }
}

void NonceBatcher::drain() noexcept {
  std::unique_lock lock(mu_);
  const std::uint64_t target = submitted_;
  space_cv_.wait(lock, [&] { return answered_ >= target || finished_; });
}

void NonceBatcher::stop() noexcept {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  space_cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

std::uint64_t NonceBatcher::batches() const noexcept {
  std::lock_guard lock(mu_);
  return batches_;
}

std::uint64_t NonceBatcher::nonces() const noexcept {
  std::lock_guard lock(mu_);
  return answered_;
}

std::size_t NonceBatcher::waiting() const noexcept {
  std::lock_guard lock(mu_);
  return waiting_.size();
}

void NonceBatcher::run() noexcept {
  std::deque<PendingNonce> batch;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
      // Stopping: what waits is still remembered and answered (its requests wait for it).
      if (waiting_.empty()) {
        finished_ = true;
        space_cv_.notify_all();
        return;
      }
      const std::size_t n = std::min(max_batch_, waiting_.size());
      for (std::size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(waiting_.front()));
        waiting_.pop_front();
      }
    }
    space_cv_.notify_all();
    const std::size_t n = batch.size();
    commit(batch);
    batch.clear();
    {
      std::lock_guard lock(mu_);
      answered_ += n;
      ++batches_;
    }
    space_cv_.notify_all();
  }
}

void NonceBatcher::commit(std::deque<PendingNonce>& batch) noexcept {
  std::vector<NonceResult> results;
  try {
    // One write for the whole batch when the plugin has it. The store's `now` is the newest of
    // the batch: it only decides which older records are forgotten, never what is remembered.
    std::int64_t now_ms = 0;
    std::vector<sdk::RequestRecord> records;
    records.reserve(batch.size());
    for (const auto& p : batch) {
      records.push_back(p.record);
      now_ms = std::max(now_ms, p.now_ms);
    }
    if (abi_minor_ >= kRememberRequestsAbiMinor) {
      auto r = store_->remember_requests(records, now_ms);
      if (r && r->size() != records.size())
        r = sdk::fail(sdk::ErrorCode::Internal, "the store answered remember_requests with " +
                                                    std::to_string(r->size()) + " results for " +
                                                    std::to_string(records.size()) + " requests");
      if (r) {
        results = std::move(*r);
      } else {
        // Fail closed: no request of the batch counts as fresh.
        results.assign(batch.size(), NonceResult(sdk::fail(r.error())));
      }
    } else {
      // An older store plugin: one write per nonce, as before group commit.
      results.reserve(batch.size());
      for (const auto& p : batch) results.push_back(store_->remember_request(p.record, p.now_ms));
    }
  } catch (const std::exception& e) {
    results.assign(batch.size(),
                   NonceResult(sdk::fail(sdk::ErrorCode::Internal, std::string("remember_requests: ") + e.what())));
  }
  for (std::size_t i = 0; i < batch.size(); ++i) {
    try {
      NonceResult r = i < results.size() ? std::move(results[i])
                                         : NonceResult(sdk::fail(sdk::ErrorCode::Internal, "remember_requests: no result"));
      if (batch[i].done) batch[i].done(std::move(r));
    } catch (...) {
    }
  }
}

}  // namespace mesh::control::detail
