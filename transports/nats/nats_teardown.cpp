// Teardown: close() and its order (redial, delivery, connection, nats.c subscriptions, the
// closed callback, link callbacks, the connection object); see nats_transport.h "Lifetime".
#include "nats_connection.h"

namespace mesh::transports::nats {

using namespace detail;

void NatsTransport::close() noexcept {
  Core& c = *core_;
  {
    std::unique_lock lk(c.state_mu);
    if (c.close_state == Core::CloseState::Closed) return;
    if (c.close_state == Core::CloseState::Closing) {
      // Another thread is closing; wait for it unless we are inside one of our callbacks
      // (which that close() may be waiting for).
      if (!in_any_callback())
        c.state_cv.wait(lk, [&] { return c.close_state == Core::CloseState::Closed; });
      return;
    }
    c.close_state = Core::CloseState::Closing;
  }
  c.closing = true;

  // 0. The redial thread: no new connection is made after this.
  stop_redial(c);

  // 1. Subscriptions: no handler runs after this. Their nats.c subscriptions stay until the
  //    connection is closed (see Retired: destroying one while the reader thread runs can crash).
  std::vector<std::shared_ptr<SubCore>> subs;
  {
    std::lock_guard lk(c.subs_mu);
    for (auto& w : c.subs)
      if (auto s = w.lock()) subs.push_back(std::move(s));
    c.subs.clear();
  }
  for (auto& s : subs) s->stop_delivery();

  // 2. Close the connection: releases blocked flush/request calls, stops reconnecting, removes
  //    every subscription from the connection and joins nats.c's reader thread.
  natsConnection* nc = nullptr;
  {
    std::shared_lock lk(c.conn_mu);
    nc = c.nc;
    if (nc) natsConnection_Close(nc);
  }

  // 2b. Now the subscriptions can be released.
  for (auto& s : subs) s->shutdown(/*connection_closed=*/true);
  c.retired->destroy_all();

  // 3. nats.c posts the closed callback last, on its async-callback thread; once it ran, no
  //    callback for this connection is queued. Not waited for from that very thread.
  if (nc && !on_nats_async_thread()) {
    std::unique_lock lk(c.state_mu);
    if (!c.state_cv.wait_for(lk, kClosedCallbackWait, [&] { return c.closed_seen; }))
      log().warn("transport=nats event=close_timeout server=" + c.server_url +
                 " error=\"closed callback did not run within 5 s\"");
  }

  // 4. Link callbacks: none runs after this (late ones find the gate shut).
  c.shut_and_wait();
  if (!in_callback_of(&c)) c.link_handler = nullptr;  // release what it captured

  // 5. Free the connection.
  {
    std::unique_lock lk(c.conn_mu);
    nc = std::exchange(c.nc, nullptr);
  }
  if (nc) natsConnection_Destroy(nc);
  c.destroy_spent();  // no request runs (conn_mu) and no reader thread is left

  {
    std::lock_guard lk(c.state_mu);
    c.close_state = Core::CloseState::Closed;
  }
  c.state_cv.notify_all();
}

}  // namespace mesh::transports::nats
