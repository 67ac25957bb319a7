// The control plane's traffic classes (decision record 29): each kind of message has its own
// subscription with its own pending limits, its own bounded work queue, and the workers take from
// the queues in turn, so that a flood of one kind (junk heartbeats, a node's `latest` at full rate)
// cannot starve the others (operator requests, enrolment, reports). Internal to mesh-control.
#pragma once

#include <array>
#include <cstddef>
#include <deque>
#include <optional>
#include <string_view>

#include "mesh/sdk/transport.h"

namespace mesh::control::detail {

enum class TrafficClass : std::size_t { Api, Enrol, NodeRequest, Report, Heartbeat };
inline constexpr std::size_t kTrafficClasses = 5;

/// "api", "enrol", "node_request", "report", "heartbeat".
const char* to_string(TrafficClass c) noexcept;
/// The class of a subject the control plane serves (`mesh.api.*` → Api, `mesh.enrol` → Enrol,
/// `mesh.latest.*`/`mesh.recovery.*` → NodeRequest, `mesh.report.*`/`mesh.drift.*`/
/// `mesh.briefing.*` → Report, `mesh.heartbeat.*` → Heartbeat). Anything else: Report (it is
/// refused by the handler).
TrafficClass traffic_class(std::string_view subject) noexcept;
/// True for the classes a node sends under its own name (the subject's third token).
inline bool sent_by_node(TrafficClass c) noexcept {
  return c == TrafficClass::NodeRequest || c == TrafficClass::Report || c == TrafficClass::Heartbeat;
}

/// One subscription of the control plane.
struct ClassSubscription {
  const char* subject;
  TrafficClass cls;
  sdk::SubscribeOptions limits;
};
/// Every subject the control plane serves (docs/protocol.md "Subjects"), with its pending limits.
const std::array<ClassSubscription, 9>& class_subscriptions() noexcept;

/// Bounded FIFO queues, one per class, taken from in turn (round robin over the non-empty ones).
/// Not thread-safe: the owner locks.
template <class Item>
class FairQueue {
 public:
  explicit FairQueue(std::size_t limit_per_class) : limit_(limit_per_class ? limit_per_class : 1) {}
  /// False (and `item` untouched) when the class's queue is full.
  bool push(TrafficClass c, Item&& item) {
    auto& q = queues_[static_cast<std::size_t>(c)];
    if (q.size() >= limit_) return false;
    q.push_back(std::move(item));
    ++size_;
    return true;
  }
  /// The oldest item of the next non-empty class after the one taken from last.
  std::optional<Item> pop() {
    for (std::size_t i = 0; i < kTrafficClasses; ++i) {
      next_ = (next_ + 1) % kTrafficClasses;
      auto& q = queues_[next_];
      if (q.empty()) continue;
      Item item = std::move(q.front());
      q.pop_front();
      --size_;
      return item;
    }
    return std::nullopt;
  }
  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  void clear() {
    for (auto& q : queues_) q.clear();
    size_ = 0;
  }

 private:
  std::size_t limit_;
  std::array<std::deque<Item>, kTrafficClasses> queues_;
  std::size_t next_ = 0;
  std::size_t size_ = 0;
};

}  // namespace mesh::control::detail
