#include "nats_callbacks.h"

namespace mesh::transports::nats::detail {

thread_local ActiveCall* t_active_calls = nullptr;

bool in_callback_of(const Gate* gate) noexcept {
  for (ActiveCall* a = t_active_calls; a; a = a->outer)
    if (a->gate == gate) return true;
  return false;
}
bool in_any_callback() noexcept { return t_active_calls != nullptr; }
bool on_nats_async_thread() noexcept {
  for (ActiveCall* a = t_active_calls; a; a = a->outer)
    if (a->gate->on_async_thread()) return true;
  return false;
}

/// Intentionally leaked: nats.c threads may still call in while static destructors run at exit.
CallbackTargets& CallbackTargets::instance() {
  static CallbackTargets* targets = new CallbackTargets;
  return *targets;
}

}  // namespace mesh::transports::nats::detail
