// Nox Mesh NATS transport — how nats.c callbacks reach transport objects safely.
//
// Every object nats.c calls back into is a Gate. A callback enters the gate before touching the
// object; shutting the gate refuses new entries and waits for the running ones, so once
// shut_and_wait() returns the object's handlers are never called again. nats.c is handed an
// opaque token, never a pointer: CallbackTargets maps live tokens to gates, so a callback that
// arrives after its object is gone finds nothing and does nothing. Private to the plugin.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace mesh::transports::nats::detail {

class Gate;

/// The gates whose callbacks the current thread is inside (innermost first).
struct ActiveCall {
  const Gate* gate;
  ActiveCall* outer;
};
/// The innermost callback scope of this thread (defined in nats_callbacks.cpp).
extern thread_local ActiveCall* t_active_calls;

class Gate {
 public:
  virtual ~Gate() = default;
  /// True for callbacks nats.c runs on its process-wide async-callback thread (link events).
  virtual bool on_async_thread() const noexcept { return false; }

  bool enter() noexcept {
    std::lock_guard lk(gate_mu_);
    if (shut_) return false;
    ++in_flight_;
    return true;
  }
  void leave() noexcept {
    std::lock_guard lk(gate_mu_);
    if (--in_flight_ == 0) gate_cv_.notify_all();
  }
  /// Refuses new callbacks and waits for running ones, except one running on this thread
  /// (a handler that closes its own subscription or transport).
  void shut_and_wait() noexcept {
    int own = 0;
    for (ActiveCall* a = t_active_calls; a; a = a->outer)
      if (a->gate == this) ++own;
    std::unique_lock lk(gate_mu_);
    shut_ = true;
    gate_cv_.wait(lk, [&] { return in_flight_ <= own; });
  }

 private:
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  int in_flight_ = 0;
  bool shut_ = false;
};

/// True when this thread is inside a callback of `gate`.
bool in_callback_of(const Gate* gate) noexcept;
/// True when this thread is inside any transport callback.
bool in_any_callback() noexcept;
/// True when this thread is nats.c's process-wide async-callback thread (inside a link event).
bool on_nats_async_thread() noexcept;

/// Process-wide map from the opaque tokens handed to nats.c as callback closures to live gates.
/// Tokens are never reused, so a callback for a removed token finds nothing and does nothing.
/// Intentionally leaked: nats.c threads may still call in while static destructors run at exit.
class CallbackTargets {
 public:
  /// The one table of the process (of this plugin library).
  static CallbackTargets& instance();
  void* add(std::shared_ptr<Gate> gate) {
    std::unique_lock lk(mu_);
    const std::uintptr_t id = ++next_;
    map_.emplace(id, std::move(gate));
    return reinterpret_cast<void*>(id);
  }
  void remove(void* token) noexcept {
    std::shared_ptr<Gate> dropped;  // released outside the lock
    std::unique_lock lk(mu_);
    auto it = map_.find(reinterpret_cast<std::uintptr_t>(token));
    if (it == map_.end()) return;
    dropped = std::move(it->second);
    map_.erase(it);
  }
  template <class T>
  std::shared_ptr<T> find(void* token) const noexcept {
    std::shared_lock lk(mu_);
    auto it = map_.find(reinterpret_cast<std::uintptr_t>(token));
    return it == map_.end() ? nullptr : std::static_pointer_cast<T>(it->second);
  }

 private:
  mutable std::shared_mutex mu_;
  std::uintptr_t next_ = 0;
  std::unordered_map<std::uintptr_t, std::shared_ptr<Gate>> map_;
};

template <class T>
class CallbackScope {
 public:
  explicit CallbackScope(void* token) noexcept
      : target_(CallbackTargets::instance().find<T>(token)) {
    if (target_ && target_->enter()) {
      entered_ = true;
      call_ = {target_.get(), t_active_calls};
      // The node is unlinked again in the destructor; GCC cannot see that (clang has no such
      // warning, and would warn about the unknown group in every file including this header).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#endif
      t_active_calls = &call_;
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
    }
  }
  ~CallbackScope() {
    if (!entered_) return;
    t_active_calls = call_.outer;
    target_->leave();
  }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;
  explicit operator bool() const noexcept { return entered_; }
  T* operator->() const noexcept { return target_.get(); }

 private:
  std::shared_ptr<T> target_;  // keeps the target alive until the callback has left the gate
  bool entered_ = false;
  ActiveCall call_{};
};

}  // namespace mesh::transports::nats::detail
