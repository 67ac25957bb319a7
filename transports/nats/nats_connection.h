// Nox Mesh NATS transport — the connection state shared with nats.c callbacks (the definition of
// NatsTransport::Core), the link-event callbacks, the nats.c options and the redial. Private.
#pragma once

#include <nats/nats.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "nats_callbacks.h"
#include "nats_subscription.h"
#include "nats_transport.h"
#include "nats_util.h"

namespace mesh::transports::nats::detail {

/// How long connect() and close() wait for nats.c's "closed" callback.
constexpr auto kClosedCallbackWait = std::chrono::seconds(5);
/// The redial's first delay after a refused login, and its cap (doubling in between).
constexpr std::int64_t kRedialFirstDelayMs = 1000;
constexpr std::int64_t kRedialMaxDelayMs = 30'000;
}  // namespace mesh::transports::nats::detail

namespace mesh::transports::nats {

using detail::Gate;
using detail::Retired;
using detail::SubCore;
using detail::connected_url;

struct NatsTransport::Core final : Gate {
  explicit Core(sdk::Logger& logger_) : logger(logger_) {}
  bool on_async_thread() const noexcept override { return true; }

  void fire(LinkEvent event) noexcept {
    if (!link_handler) return;
    try {
      link_handler(event);
    } catch (const std::exception& e) {
      logger.error(std::string("transport=nats event=link_handler_error link_event=") +
                   sdk::to_string(event) + " error=\"" + e.what() + "\"");
    } catch (...) {
      logger.error(std::string("transport=nats event=link_handler_error link_event=") +
                   sdk::to_string(event));
    }
  }

  /// Records the server we are connected to and its max_payload.
  std::string note_server(natsConnection* conn) {
    std::string url = connected_url(conn);
    const std::int64_t max = natsConnection_GetMaxPayload(conn);
    if (max > 0) max_payload.store(static_cast<std::size_t>(max));
    std::lock_guard lk(state_mu);
    if (!url.empty()) server_url = url;
    return server_url;
  }
  std::string last_server() {
    std::lock_guard lk(state_mu);
    return server_url;
  }

  enum class CloseState { Open, Closing, Closed };

  sdk::Logger& logger;
  sdk::LinkHandler link_handler;  // set before connect(), then only read
  void* token = nullptr;

  mutable std::shared_mutex conn_mu;  // unique: connect and destroy; shared: everything else
  natsConnection* nc = nullptr;

  std::mutex state_mu;
  std::condition_variable state_cv;
  std::string server_url;                     // guarded by state_mu
  bool closed_seen = false;                   // guarded by state_mu
  CloseState close_state = CloseState::Open;  // guarded by state_mu
  std::atomic<bool> closing{false};
  std::atomic<bool> quiet{false};  // connect() in progress: link events are not reported
  std::atomic<std::size_t> max_payload{0};

  std::mutex subs_mu;
  std::vector<std::weak_ptr<SubCore>> subs;  // guarded by subs_mu

  // Requests with per_request_inbox (nats_request.cpp, decision 161). Each waits on a
  // synchronous subscription of its own; a disconnect unsubscribes them all (fail_requests), so
  // they fail at once as nats.c's own requests do with FailRequestsOnDisconnect.
  std::string inbox_base;                      // "<inbox prefix>.<random>"; set by configure()
  std::atomic<std::uint64_t> inbox_count{0};   // the last token of each request's inbox
  std::mutex req_mu;
  std::map<natsSubscription*, bool> in_flight;  // guarded by req_mu; true: failed by a disconnect
  // Unsubscribed request subscriptions, not destroyed yet: nats.c 3.4.1's reader thread may still
  // hold one it looked up without a reference (see Retired). Each is destroyed once a request
  // whose publish began after it was unsubscribed got its reply (the reader has passed every
  // message that could name it), or by close().
  std::vector<std::pair<std::uint64_t, natsSubscription*>> spent;  // guarded by req_mu
  std::atomic<std::uint64_t> requests_begun{0};
  // The next request's inbox, subscribed after the previous request got its reply, so that a
  // request's SUB is not written between its caller and its publish (guarded by req_mu).
  natsSubscription* ready = nullptr;
  natsConnection* ready_on = nullptr;  // the connection `ready` belongs to
  std::string ready_inbox;

  /// Fails every request waiting for its reply (the disconnected callback).
  void fail_requests() noexcept {
    std::lock_guard lk(req_mu);
    for (auto& [s, failed] : in_flight) {
      failed = true;
      natsSubscription_Unsubscribe(s);  // wakes natsSubscription_NextMsg in the requester
    }
  }
  /// Destroys the spent subscriptions; only once no nats.c reader thread can use them (close()).
  void destroy_spent() noexcept {
    std::vector<std::pair<std::uint64_t, natsSubscription*>> doomed;
    {
      std::lock_guard lk(req_mu);
      doomed.swap(spent);
      if (ready) doomed.emplace_back(0, std::exchange(ready, nullptr));
      ready_on = nullptr;
    }
    for (auto& d : doomed) natsSubscription_Destroy(d.second);
  }
  std::shared_ptr<Retired> retired = std::make_shared<Retired>();

  // Redial: nats.c closes a connection for good after the same server refused its credentials
  // twice in a row (nats.c conn.c `_processAuthError`), even with unlimited reconnects. With
  // retry_in_background a refused login must not be final (mesh-control may be rewriting the
  // broker's authorization and reloading it), so a thread of ours makes a new connection, with
  // backoff, and re-subscribes every live subscription on it.
  std::atomic<bool> retry{false};                // connect(..., retry_in_background=true)
  std::atomic<natsConnection*> live_nc{nullptr};  // the connection in use (same as nc)
  std::vector<std::string> servers;               // for logs; set before the redial starts
  std::atomic<bool> redialing{false};             // a redial is making attempts (no live_nc)
  std::shared_ptr<natsOptions> redial_opts;       // guarded by redial_mu
  std::mutex redial_mu;
  std::condition_variable redial_cv;
  bool redial_wanted = false;  // guarded by redial_mu
  bool redial_stop = false;    // guarded by redial_mu
  std::thread redial_thread;   // guarded by redial_mu
};

}  // namespace mesh::transports::nats

namespace mesh::transports::nats::detail {

using Core = NatsTransport::Core;

/// A callback for a connection that is not the live one: a refused attempt of the redial.
bool stray(const Core& c, natsConnection* nc) noexcept;

/// nats.c's link callbacks (closure: the Core's token). They log `transport=nats event=...` and
/// fire the link handler; on_closed asks for a redial when nats.c gave up on refused credentials.
void on_connected(natsConnection* nc, void* token) noexcept;
void on_disconnected(natsConnection* nc, void* token) noexcept;
void on_reconnected(natsConnection* nc, void* token) noexcept;
void on_closed(natsConnection* nc, void* token) noexcept;
void on_error(natsConnection* nc, natsSubscription* sub, natsStatus err, void* token) noexcept;

/// The nats.c options for `settings`: servers, timeouts, reconnect policy, callbacks (closure
/// `token`), credentials, TLS, inbox prefix. `retry` turns on retry-on-failed-connect.
Result<OptionsPtr> build_options(const NatsSettings& settings, void* token,
                                 std::int64_t timeout_ms, bool retry);

/// True for the statuses of a login the server refused.
bool auth_refused(natsStatus s);

/// Subscribes every live subscription that is not on `nc` yet (made while no connection
/// existed, or on a connection nats.c closed) on `nc`. Called by the redial thread after it
/// installed `nc`.
void resubscribe(Core& c, natsConnection* nc);

/// The redial thread: waits for a request, drops the closed connection, then tries a new
/// connection (retry-on-failed-connect off: one round over the servers per attempt) with
/// backoff from 1 s doubling to 30 s, plus up to 20% jitter, until one is accepted or close().
void redial_loop(std::shared_ptr<Core> core);

/// Asks the redial thread (started on first use) for a new connection.
void request_redial(Core& c) noexcept;

/// Stops the redial thread (waits for it, unless called on it: then it is detached and ends
/// at its next check).
void stop_redial(Core& c) noexcept;

}  // namespace mesh::transports::nats::detail
