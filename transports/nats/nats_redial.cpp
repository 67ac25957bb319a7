// The redial: a new connection after nats.c closed one for refused credentials, with backoff,
// and every live subscription subscribed again on it.
#include <random>

#include "nats_connection.h"

namespace mesh::transports::nats::detail {

bool auth_refused(natsStatus s) {
  return s == NATS_CONNECTION_AUTH_FAILED || s == NATS_NOT_PERMITTED;
}

/// Subscribes every live subscription that is not on `nc` yet (made while no connection
/// existed, or on a connection nats.c closed) on `nc`. Called by the redial thread after it
/// installed `nc`.
void resubscribe(Core& c, natsConnection* nc) {
  std::vector<std::shared_ptr<SubCore>> subs;
  {
    std::lock_guard lk(c.subs_mu);
    for (auto& w : c.subs)
      if (auto sc = w.lock()) subs.push_back(std::move(sc));
  }
  for (auto& sc : subs) {
    {
      std::lock_guard lk(sc->mu);
      if (sc->state != SubCore::State::Live || sc->on == nc) continue;
    }
    natsSubscription* ns = nullptr;
    const natsStatus st =
        sc->queue_group.empty()
            ? natsConnection_Subscribe(&ns, nc, sc->subject.c_str(), on_message, sc->token)
            : natsConnection_QueueSubscribe(&ns, nc, sc->subject.c_str(), sc->queue_group.c_str(),
                                            on_message, sc->token);
    if (st != NATS_OK) {
      c.logger.error("transport=nats event=resubscribe_failed subject=" + sc->subject +
                     " error=\"" + describe(st, "subscribe") + "\"");
      continue;
    }
    if (apply_limits(ns, sc->limits) != NATS_OK)
      c.logger.warn("transport=nats event=pending_limits_not_set subject=" + sc->subject);
    natsSubscription* old = nullptr;
    bool live = false;
    {
      std::lock_guard lk(sc->mu);
      live = sc->state == SubCore::State::Live;
      if (live) {
        old = std::exchange(sc->sub, ns);
        sc->on = nc;
        sc->complete = false;
        sc->has_complete_cb =
            natsSubscription_SetOnCompleteCB(ns, on_sub_complete, sc->token) == NATS_OK;
      }
    }
    if (!live) {  // shut while we subscribed it; destroyed once that is safe (Retired)
      natsSubscription_Unsubscribe(ns);
      c.retired->add(ns);
    }
    if (old) natsSubscription_Destroy(old);  // its connection is closed
  }
}

/// The redial thread: waits for a request, drops the closed connection, then tries a new
/// connection (retry-on-failed-connect off: one round over the servers per attempt) with
/// backoff from 1 s doubling to 30 s, plus up to 20% jitter, until one is accepted or close().
void redial_loop(std::shared_ptr<Core> core) {
  Core& c = *core;
  std::mt19937_64 rng{std::random_device{}()};
  for (;;) {
    {
      std::unique_lock lk(c.redial_mu);
      c.redial_cv.wait(lk, [&] { return c.redial_wanted || c.redial_stop; });
      if (c.redial_stop) return;
      c.redial_wanted = false;
    }
    natsConnection* dead = nullptr;
    {
      std::unique_lock lk(c.conn_mu);
      if (c.closing) return;
      dead = std::exchange(c.nc, nullptr);
      c.redialing = true;
      c.live_nc = nullptr;
    }
    if (dead) natsConnection_Destroy(dead);  // closed by nats.c; its closed callback ran
    c.retired->destroy_all();  // their connection is closed: no reader thread holds them
    const std::string servers = join(c.servers);
    std::int64_t delay_ms = kRedialFirstDelayMs;
    for (int attempt = 1;; ++attempt) {
      const std::int64_t wait_ms =
          delay_ms + std::uniform_int_distribution<std::int64_t>(0, delay_ms / 5)(rng);
      {
        std::unique_lock lk(c.redial_mu);
        if (c.redial_cv.wait_for(lk, std::chrono::milliseconds(wait_ms),
                                 [&] { return c.redial_stop; }))
          return;
      }
      std::shared_ptr<natsOptions> opts;
      {
        std::lock_guard lk(c.redial_mu);
        if (c.redial_stop) return;
        opts = c.redial_opts;
      }
      natsConnection* nc = nullptr;
      const natsStatus st = natsConnection_Connect(&nc, opts.get());
      if (st == NATS_OK) {
        bool installed = false;
        {
          std::unique_lock lk(c.conn_mu);
          if (!c.closing) {
            c.nc = nc;
            c.live_nc = nc;
            c.redialing = false;
            installed = true;
          }
        }
        if (!installed) {
          natsConnection_Close(nc);
          natsConnection_Destroy(nc);
          return;
        }
        {
          std::lock_guard lk(c.state_mu);
          c.closed_seen = false;
        }
        {
          std::shared_lock lk(c.conn_mu);
          if (c.nc == nc) resubscribe(c, nc);
        }
        CallbackScope<Core> scope(c.token);
        if (!scope) return;
        try {
          c.logger.info("transport=nats event=connected server=" + c.note_server(nc) +
                        " attempts=" + std::to_string(attempt));
        } catch (...) {
        }
        c.fire(LinkEvent::Connected);
        break;
      }
      if (nc) natsConnection_Destroy(nc);
      natsStatus last = NATS_OK;
      const char* text = nats_GetLastError(&last);
      const bool refused = auth_refused(st) || auth_refused(last);
      delay_ms = std::min(delay_ms * 2, kRedialMaxDelayMs);
      try {
        c.logger.warn(std::string("transport=nats event=") +
                      (refused ? "credentials_refused" : "connect_failed") + " server=" + servers +
                      " attempt=" + std::to_string(attempt) + " error=\"" +
                      (text && *text ? std::string(text) : status_text(st)) +
                      "\" retry_in_ms=" + std::to_string(delay_ms));
      } catch (...) {
      }
    }
  }
}

void request_redial(Core& c) noexcept {
  try {
    std::lock_guard lk(c.redial_mu);
    if (c.redial_stop) return;
    c.redial_wanted = true;
    if (!c.redial_thread.joinable()) {
      auto self = CallbackTargets::instance().find<Core>(c.token);
      if (!self) return;
      c.redial_thread = std::thread(redial_loop, std::move(self));
    }
  } catch (...) {
    c.logger.error("transport=nats event=redial_failed error=\"cannot start the redial thread\"");
    return;
  }
  c.redial_cv.notify_all();
}

/// Stops the redial thread (waits for it, unless called on it: then it is detached and ends
/// at its next check).
void stop_redial(Core& c) noexcept {
  std::thread t;
  {
    std::lock_guard lk(c.redial_mu);
    c.redial_stop = true;
    t = std::move(c.redial_thread);
  }
  c.redial_cv.notify_all();
  if (!t.joinable()) return;
  if (t.get_id() == std::this_thread::get_id())
    t.detach();
  else
    t.join();
}

}  // namespace mesh::transports::nats::detail
