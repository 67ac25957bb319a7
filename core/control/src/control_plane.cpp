#include "mesh/control/control_plane.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "mesh/common/clock.h"
#include "mesh/common/logging.h"
#include "mesh/common/crypto.h"
#include "mesh/common/protocol.h"
#include "lease.h"
#include "mesh_identity.h"
#include "rate_limit.h"
#include "metrics.h"
#include "service.h"
#include "traffic.h"

#include <spdlog/spdlog.h>

namespace mesh::control {
namespace {


// How long stop() lets the workers drain the queue before the rest is dropped.
constexpr auto kDrainBudget = std::chrono::milliseconds(300);
// The staging thread's longest wait between two rounds, whatever wakes it or not (a write by
// another control plane on the same store, a removed node), and its wait after a round that
// stopped on an error or wrote a wave (decision record 71).
constexpr std::chrono::milliseconds kStageFallback{5000};
constexpr std::chrono::milliseconds kStageRetry{250};

bool is_heartbeat(const std::string& subject) { return subject.rfind("mesh.heartbeat.", 0) == 0; }

// The options with an instance id: the configured one, or a random one for this process (tests,
// an embedded control plane). The Service names it in its answers to parts (decision record 170)
// and the lease holds the background work under it (decision record 91).
ControlOptions with_instance_id(ControlOptions o) {
  if (o.instance_id.empty()) o.instance_id = common::to_hex(common::random_bytes(16));
  return o;
}

}  // namespace

class ControlPlane::Impl {
 public:
  Impl(std::shared_ptr<sdk::Store> store, std::shared_ptr<sdk::Transport> transport,
       ControlOptions options)
      : store_(std::move(store)),
        transport_(std::move(transport)),
        options_(with_instance_id(std::move(options))),
        service_(store_, transport_, options_,
                 [this](sdk::ContactUpdate&& u) { add_contact(std::move(u)); }),
        queue_(options_.queue_limit),
        node_limits_(options_.node_rate, options_.node_burst, options_.node_rate_keys),
        lease_(store_, "background", options_.instance_id, options_.lease) {
    service_.set_stage_wake([this] { wake_stager(); });
    service_.set_post([this](std::function<void()> task) { return post(std::move(task)); });
  }

  void start() {
    std::lock_guard lock(mu_);
    if (started_) return;
    started_ = true;
    for (std::size_t i = 0; i < std::max<std::size_t>(1, options_.workers); ++i)
      workers_.emplace_back([this] { work(); });
    flusher_ = std::thread([this] { flush_loop(); });
    stager_ = std::thread([this] { stage_loop(); });
    leaser_ = std::thread([this] { lease_loop(); });
  }

  sdk::Result<void> subscribe() {
    std::lock_guard lock(sub_mu_);
    if (subscribed_) return {};
    std::vector<std::unique_ptr<sdk::Subscription>> subs;
    // One subscription per subject, each with its own pending limits (traffic.h); heartbeats on
    // several, each with its own delivery thread (decision record 122).
    for (const auto& sub : detail::class_subscriptions()) {
      const bool heartbeats = sub.cls == detail::TrafficClass::Heartbeat;
      const std::size_t copies = heartbeats ? std::max<std::size_t>(1, options_.heartbeat_subscriptions) : 1;
      for (std::size_t i = 0; i < copies; ++i) {
        sdk::MessageHandler handler;
        if (heartbeats)
          handler = [this](sdk::Message&& m) { take_heartbeat(std::move(m)); };
        else
          handler = [this](sdk::Message&& m) { enqueue(std::move(m)); };
        auto s = transport_->subscribe(sub.subject, protocol::kQueueGroup, std::move(handler), sub.limits);
        if (!s) {
          sdk::Error e = s.error();
          e.message = "subscribe to " + std::string(sub.subject) + ": " + e.message;
          return sdk::fail(std::move(e));
        }
        subs.push_back(std::move(*s));
      }
    }
    // This instance's own subject, outside the queue group (decision record 170): the rest of a
    // message in parts whose first part this instance took, and the rest of a `mesh publish`
    // upload, come there. A message on mesh.instance.<id>.<subject> is handled as on <subject>
    // (the subject its proof covers), through the same rate limit, queue and checks.
    {
      const std::string prefix = protocol::instance_subject(options_.instance_id, "");
      auto s = transport_->subscribe(
          prefix + ">", "",
          [this, prefix](sdk::Message&& m) {
            if (m.subject.size() <= prefix.size() || m.subject.compare(0, prefix.size(), prefix) != 0) return;
            m.subject.erase(0, prefix.size());
            enqueue(std::move(m));
          },
          sdk::SubscribeOptions{16384, 256 << 20});
      if (!s) {
        sdk::Error e = s.error();
        e.message = "subscribe to " + prefix + ">: " + e.message;
        return sdk::fail(std::move(e));
      }
      subs.push_back(std::move(*s));
    }
    // The subscriptions are live once the server has them: a round trip makes sure of it, so
    // that "control started" means requests are answered.
    if (auto f = transport_->flush(std::chrono::seconds(2)); !f) return sdk::fail(f.error());
    subs_ = std::move(subs);
    subscribed_ = true;
    // A delivery written just before a stop may not have been pushed: the lease's first round
    // runs now, and its holder pushes pending ones again (lease_loop).
    {
      std::lock_guard lock(contact_mu_);
      lease_woken_ = true;
    }
    contact_cv_.notify_all();
    return {};
  }

  bool subscribed() const noexcept { return subscribed_; }

  void stop() {
    {
      std::lock_guard lock(sub_mu_);
      subs_.clear();  // no new messages
      subscribed_ = false;
    }
    {
      std::lock_guard lock(mu_);
      if (!started_ || stopping_) return;
      stopping_ = true;
      drain_deadline_ = std::chrono::steady_clock::now() + kDrainBudget;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    // Reports the workers handed to the group commit are recorded and answered before the rest
    // stops (their hosts wait for the ack).
    service_.drain_reports();
    {
      std::lock_guard lock(mu_);
      if (!queue_.empty() || !tasks_.empty())
        common::logger()->warn("stopping: {} queued messages dropped", queue_.size() + tasks_.size());
      queue_.clear();
      tasks_.clear();
    }
    {
      std::lock_guard lock(contact_mu_);
      flusher_stop_ = true;
    }
    contact_cv_.notify_all();
    if (flusher_.joinable()) flusher_.join();
    if (stager_.joinable()) stager_.join();
    if (leaser_.joinable()) leaser_.join();
    flush_contacts();
    lease_.release(common::now_ms());
  }

  ControlStats stats() const noexcept {
    auto get = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    ControlStats s;
    s.received = get(received_);
    s.busy = get(busy_);
    s.heartbeats_received = get(hb_received_);
    s.heartbeats_busy = get(hb_busy_);
    s.heartbeats_handled = get(hb_handled_);
    s.heartbeats_verified = get(hb_verified_);
    s.heartbeats_refused = s.heartbeats_handled - std::min(s.heartbeats_handled, s.heartbeats_verified);
    s.heartbeats_stored = get(hb_stored_);
    s.contacts_written = get(contacts_written_);
    s.flushes = get(flushes_);
    s.flush_failures = get(flush_failures_);
    s.rate_limited = get(rate_limited_);
    s.heartbeats_rate_limited = get(hb_limited_);
    return s;
  }

 private:
  struct Item {
    sdk::Message message;
    std::int64_t received_ms;
  };

  // Transport thread: no store access here, only a rate check and a queue push.
  void enqueue(sdk::Message&& m, bool counted = false) {
    const std::int64_t now = common::now_ms();
    const bool heartbeat = is_heartbeat(m.subject);
    const detail::TrafficClass cls = detail::traffic_class(m.subject);
    if (!counted) {
      bump(received_);
      if (heartbeat) bump(hb_received_);
      if (detail::sent_by_node(cls) && !admit_from_node(m, cls)) {
        if (heartbeat) bump(hb_limited_);
        return;
      }
    }
    {
      Item item{std::move(m), now};
      std::unique_lock lock(mu_);
      if (stopping_) return;
      // push() leaves `item` alone when the queue is full: the refusal names its subject (and
      // is counted under its kind in the metrics).
      if (!queue_.push(cls, std::move(item))) {
        lock.unlock();
        bump(busy_);
        if (heartbeat) bump(hb_busy_);
        service_.refuse(item.message, sdk::Error{sdk::ErrorCode::Transient,
                                                 std::string("the control plane is busy (") + detail::to_string(cls) +
                                                     " queue full); try again",
                                                 {}});
        return;
      }
    }
    cv_.notify_one();
  }

  // A heartbeat subscription's delivery thread (decision record 122). A heartbeat of a node whose
  // identity is cached needs nothing that may block (no store read): it is checked and taken
  // here, in the order this subscription received it, without a queue push, a worker wake-up or
  // a second thread touching it. The rest (a node not seen yet, an identity due to be read
  // again) goes through the heartbeat queue to the workers, as every heartbeat did before.
  void take_heartbeat(sdk::Message&& m) {
    bump(received_);
    bump(hb_received_);
    if (!admit_from_node(m, detail::TrafficClass::Heartbeat)) {
      bump(hb_limited_);
      return;
    }
    if (!service_.heartbeat_identity_cached(protocol::subject_node(m.subject)))
      return enqueue(std::move(m), /*counted=*/true);
    bump(hb_handled_);
    service_.handle(m, common::now_ms());
  }

  // A node's messages pass its token bucket (keyed by the subject's node: with broker
  // permissions only that node may publish there); the excess is dropped unanswered, with a
  // rate-limited warning naming the node.
  bool admit_from_node(const sdk::Message& m, detail::TrafficClass cls) {
    const std::string node(protocol::subject_node(m.subject));
    const bool valid = protocol::valid_node_name(node);
    if (node_limits_.allow(valid ? node : std::string())) return true;
    bump(rate_limited_);
    if (options_.metrics) options_.metrics->rate_limited(m.subject);
    if (std::uint64_t hidden = 0; rate_log_.take(&hidden))
      common::logger()->warn("rate limit node={} class={}: message dropped (over {} messages/s, burst {}){}",
                             valid ? node : "(invalid name)", detail::to_string(cls), options_.node_rate,
                             options_.node_burst, common::LogBudget::suffix(hidden));
    return false;
  }

  // From the service's group commit of nonces (Service::set_post): a request admitted by its
  // batch, handled by a worker in turn with the queues' messages (work()). Their number is
  // bounded by the messages already taken from the queues. False once stopping: the caller runs it
  // itself.
  bool post(std::function<void()> task) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return false;
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
    return true;
  }

  void work() {
    for (;;) {
      Item item;
      std::function<void()> task;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !tasks_.empty(); });
        if (queue_.empty() && tasks_.empty()) return;
        if (stopping_ && std::chrono::steady_clock::now() > drain_deadline_) return;
        // Admitted requests and new messages in turn: an operator's request waiting in the queue
        // is taken after at most one admitted request per other class, however many nodes' `latest`
        // requests a reconnecting fleet had admitted (each a store read). New messages do not pile
        // up as admitted tasks either: each message taken yields at most one.
        const bool take_task = !tasks_.empty() && (queue_.empty() || !task_last_);
        if (take_task) {
          task = std::move(tasks_.front());
          tasks_.pop_front();
        } else {
          item = std::move(*queue_.pop());
        }
        task_last_ = take_task;
      }
      if (task) {
        try {
          task();
        } catch (...) {
        }
        continue;
      }
      if (is_heartbeat(item.message.subject)) bump(hb_handled_);
      service_.handle(item.message, item.received_ms);
    }
  }

  // Heartbeats are coalesced per node (the newest wins) and written in one Store::touch per
  // interval: one transaction for a whole fleet's heartbeats instead of one per message.
  // Called by the service for each heartbeat that counts as contact (verified).
  void add_contact(sdk::ContactUpdate&& u) {
    bump(hb_verified_);
    std::lock_guard lock(contact_mu_);
    auto& slot = contacts_[u.node];
    ++slot.heartbeats;
    if (slot.update.node.empty() || u.at_ms >= slot.update.at_ms) slot.update = std::move(u);
  }

  void flush_loop() {
    std::unique_lock lock(contact_mu_);
    while (!flusher_stop_) {
      contact_cv_.wait_for(lock, options_.heartbeat_flush, [&] { return flusher_stop_; });
      if (flusher_stop_) break;
      lock.unlock();
      flush_contacts();
      lock.lock();
    }
  }

  // Staged deploys (decision records 66, 71): their next wave is written, or they halt, from
  // here. Picks up after a restart what the store says is running. A round runs when the service
  // wakes it (a report from a node of a current wave, a write), when a wave timeout is due,
  // kStageRetry after a round that stopped on an error or wrote a wave and while not subscribed,
  // and at least every kStageFallback.
  void stage_loop() {
    std::unique_lock lock(contact_mu_);
    // Not subscribed yet: the first round comes at most kStageRetry after the subscription.
    detail::Service::StageWait next{std::nullopt, true};
    while (!flusher_stop_) {
      std::chrono::milliseconds wait = kStageFallback;
      if (next.soon)
        wait = kStageRetry;
      else if (next.due_ms)
        wait = std::clamp(std::chrono::milliseconds(*next.due_ms - common::now_ms()), std::chrono::milliseconds(0),
                          kStageFallback);
      contact_cv_.wait_for(lock, wait, [&] { return flusher_stop_ || stage_woken_; });
      if (flusher_stop_) break;
      stage_woken_ = false;
      lock.unlock();
      // Only the lease holder moves staged deploys on (decision record 91).
      const std::int64_t now = common::now_ms();
      next = subscribed_ && lease_.held(now) ? service_.advance_deploys(now)
                                             : detail::Service::StageWait{std::nullopt, true};
      lock.lock();
    }
  }

  // The lease on background work (lease.h, decision record 91): a round every third of its
  // length once subscribed, and right after the subscription. Taking it (a start, a takeover
  // from an instance that died) and seeing another instance depart both mean declarations may
  // be stranded, written but never pushed: the holder pushes every pending one again (the host
  // takes a revision it already has as a re-send). Each round also rewrites this machine's
  // broker authorization file from the store (nodes_changed; unchanged: nothing written), so
  // that nodes enrolled through another instance get their permissions here too. The holder's
  // other rounds look for declarations a connected node never got (push_stranded, decision 192).
  void lease_loop() {
    std::unique_lock lock(contact_mu_);
    while (!flusher_stop_) {
      contact_cv_.wait_for(lock, lease_.renew_every(), [&] { return flusher_stop_ || lease_woken_; });
      if (flusher_stop_) break;
      lease_woken_ = false;
      if (!subscribed_) continue;
      lock.unlock();
      auto round = lease_.tick(common::now_ms());
      note_signing_key();
      for (const auto& gone : round.departed)
        common::logger()->info("instance={} departed (membership expired); pending declarations pushed again by "
                               "instance={}",
                               gone, lease_.instance());
      if (round.taken || !round.departed.empty())
        service_.push_pending();
      else if (round.held)
        service_.push_stranded(common::now_ms());  // a connected node that never got its push
      if (round.taken) wake_stager();
      if (options_.nodes_changed && options_.broker_credentials) options_.nodes_changed();
      lock.lock();
    }
  }

  // The signing key in force against the store's record of the mesh's newest (decision record
  // 194): a rotation this instance took is recorded; a newer one it does not have (its keys_dir
  // is not the others', and was rotated elsewhere) is an error, logged once per change.
  void note_signing_key() {
    if (options_.keys_dir.empty() || !options_.keys.watch) return;
    auto now = options_.keys.current();
    auto ok = detail::check_or_record_signing_key(*store_, *now, options_.keys_dir, common::now_ms());
    std::string problem = ok ? std::string() : ok.error().describe();
    if (problem == signing_problem_) return;
    signing_problem_ = problem;
    if (!ok && ok.error().code == sdk::ErrorCode::FailedPrecondition)
      common::logger()->error("signing key out of date instance={}: {}", options_.instance_id, problem);
    else if (!ok)
      common::logger()->debug("signing key not compared with the store's: {}", problem);
  }

  // Called by the service from the thread that handled a message (Service::set_stage_wake).
  void wake_stager() {
    {
      std::lock_guard lock(contact_mu_);
      stage_woken_ = true;
    }
    contact_cv_.notify_all();
  }

  void flush_contacts() {
    std::vector<sdk::ContactUpdate> batch;
    std::vector<std::uint64_t> counts;  // heartbeats behind each entry of `batch`
    std::uint64_t heartbeats = 0;
    {
      std::lock_guard lock(contact_mu_);
      if (contacts_.empty()) return;
      batch.reserve(contacts_.size());
      counts.reserve(contacts_.size());
      for (auto& [node, p] : contacts_) {
        batch.push_back(std::move(p.update));
        counts.push_back(p.heartbeats);
        heartbeats += p.heartbeats;
      }
      contacts_.clear();
    }
    if (auto ok = store_->touch(batch); !ok) {
      bump(flush_failures_);
      // A full or failing disk fails every flush (4 a second by default): one line a second.
      if (std::uint64_t hidden = 0; flush_log_.take(&hidden))
        common::logger()->warn("heartbeats not recorded ({} nodes): {}{}", batch.size(), ok.error().describe(),
                               common::LogBudget::suffix(hidden));
      // Put them back unless newer ones arrived meanwhile (those then stand for these too); a
      // later flush retries.
      std::lock_guard lock(contact_mu_);
      for (std::size_t i = 0; i < batch.size(); ++i) {
        auto it = contacts_.find(batch[i].node);
        if (it == contacts_.end())
          contacts_.emplace(batch[i].node, Pending{std::move(batch[i]), counts[i]});
        else
          it->second.heartbeats += counts[i];
      }
      return;
    }
    bump(flushes_);
    bump(contacts_written_, batch.size());
    bump(hb_stored_, heartbeats);
  }

  static void bump(std::atomic<std::uint64_t>& a, std::uint64_t n = 1) noexcept {
    a.fetch_add(n, std::memory_order_relaxed);
  }

  std::shared_ptr<sdk::Store> store_;
  std::string signing_problem_;  // the last note_signing_key() outcome logged (lease thread only)
  std::shared_ptr<sdk::Transport> transport_;
  ControlOptions options_;
  detail::Service service_;
  common::LogBudget flush_log_{1};

  std::mutex mu_;
  std::condition_variable cv_;
  detail::FairQueue<Item> queue_;  // one bounded queue per traffic class, taken in turn
  std::deque<std::function<void()>> tasks_;  // admitted requests to handle (post), in turn with the queue
  bool task_last_ = false;                   // the last item taken was from tasks_ (guarded by mu_)
  detail::RateLimiter node_limits_;
  common::LogBudget rate_log_{5};
  bool started_ = false;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point drain_deadline_;
  std::vector<std::thread> workers_;

  std::mutex sub_mu_;
  std::atomic<bool> subscribed_{false};
  std::vector<std::unique_ptr<sdk::Subscription>> subs_;

  std::mutex contact_mu_;
  std::condition_variable contact_cv_;
  struct Pending {
    sdk::ContactUpdate update;     // the newest of the node's heartbeats since the last flush
    std::uint64_t heartbeats = 0;  // how many verified heartbeats it stands for
  };
  std::map<std::string, Pending> contacts_;
  bool flusher_stop_ = false;
  bool stage_woken_ = false;  // a staged deploy may move on: the staging thread runs a round now
  bool lease_woken_ = false;  // subscribed: the lease thread runs a round now
  std::thread flusher_;
  std::thread stager_;
  std::thread leaser_;
  detail::Lease lease_;

  // stats(): relaxed counters, bumped where the event happens.
  std::atomic<std::uint64_t> received_{0}, busy_{0}, hb_received_{0}, hb_busy_{0}, hb_handled_{0},
      hb_verified_{0}, hb_stored_{0}, contacts_written_{0}, flushes_{0}, flush_failures_{0},
      rate_limited_{0}, hb_limited_{0};
};

ControlPlane::ControlPlane(std::shared_ptr<sdk::Store> store,
                           std::shared_ptr<sdk::Transport> transport, ControlOptions options)
    : impl_(std::make_unique<Impl>(std::move(store), std::move(transport), options)) {}

ControlPlane::~ControlPlane() { impl_->stop(); }

void ControlPlane::start() { impl_->start(); }
sdk::Result<void> ControlPlane::subscribe() { return impl_->subscribe(); }
bool ControlPlane::subscribed() const noexcept { return impl_->subscribed(); }
void ControlPlane::stop() { impl_->stop(); }
ControlStats ControlPlane::stats() const noexcept { return impl_->stats(); }

}  // namespace mesh::control
