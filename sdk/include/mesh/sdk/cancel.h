// Nox Mesh SDK — cooperative cancellation for long provider operations (apt, podman, systemd).
#pragma once

#include <atomic>
#include <chrono>

namespace mesh::sdk {

/// Set by the host when the daemon is stopping (SIGTERM) or a per-resource timeout ran out.
/// Providers poll `cancelled()` between steps and return ErrorCode::Cancelled. Thread safety:
/// `cancel()` may be called from any thread; readers see it promptly (atomic flag).
class CancelToken {
 public:
  CancelToken() = default;
  /// A token that also counts as cancelled once `deadline` (steady clock) has passed.
  explicit CancelToken(std::chrono::steady_clock::time_point deadline) : deadline_(deadline) {}
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  void cancel() noexcept { flag_.store(true, std::memory_order_release); }
  bool cancelled() const noexcept {
    return flag_.load(std::memory_order_acquire) ||
           (deadline_ != std::chrono::steady_clock::time_point{} &&
            std::chrono::steady_clock::now() >= deadline_);
  }
  /// The deadline, or a default-constructed time_point when there is none.
  std::chrono::steady_clock::time_point deadline() const noexcept { return deadline_; }

 private:
  std::atomic<bool> flag_{false};
  std::chrono::steady_clock::time_point deadline_{};
};

}  // namespace mesh::sdk
