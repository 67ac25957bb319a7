// The connection: nats.c's link callbacks and connect(), first attempt and retry in the
// background.
#include "nats_connection.h"

namespace mesh::transports::nats::detail {

/// A callback for a connection that is not the live one: a refused attempt of the redial.
bool stray(const Core& c, natsConnection* nc) noexcept {
  natsConnection* live = c.live_nc.load();
  return live != nullptr ? nc != live : c.redialing.load();
}

void on_connected(natsConnection* nc, void* token) noexcept {
  CallbackScope<Core> core(token);
  if (!core || core->quiet || stray(*core.operator->(), nc)) return;
  try {
    core->logger.info("transport=nats event=connected server=" + core->note_server(nc));
  } catch (...) {
  }
  core->fire(LinkEvent::Connected);
}

void on_disconnected(natsConnection* nc, void* token) noexcept {
  CallbackScope<Core> core(token);
  if (!core || stray(*core.operator->(), nc)) return;
  core->fail_requests();  // per_request_inbox: nats.c's FailRequestsOnDisconnect covers its own
  if (core->closing || core->quiet) return;  // a deliberate close() reports Closed
  try {
    core->logger.warn("transport=nats event=disconnected server=" + core->last_server());
  } catch (...) {
  }
  core->fire(LinkEvent::Disconnected);
}

void on_reconnected(natsConnection* nc, void* token) noexcept {
  CallbackScope<Core> core(token);
  if (!core || core->quiet || stray(*core.operator->(), nc)) return;
  try {
    core->logger.info("transport=nats event=reconnected server=" + core->note_server(nc));
  } catch (...) {
  }
  core->fire(LinkEvent::Reconnected);
}

void on_closed(natsConnection* nc, void* token) noexcept {
  CallbackScope<Core> core(token);
  if (!core) return;
  if (stray(*core.operator->(), nc)) return;
  natsConnection* live = core->live_nc.load();
  if (live == nc && !core->closing && core->retry) {
    // Not asked for: nats.c gave up (refused credentials twice). Not final: redial.
    try {
      core->logger.warn("transport=nats event=closed_by_client_library server=" +
                        core->last_server() + " error=\"" + last_error_text(nc) +
                        "\" action=redial");
    } catch (...) {
    }
    {
      std::lock_guard lk(core->state_mu);
      core->closed_seen = true;
    }
    core->state_cv.notify_all();
    request_redial(*core.operator->());
    return;
  }
  if (!core->quiet) {
    try {
      core->logger.info("transport=nats event=closed server=" + core->last_server());
    } catch (...) {
    }
    core->fire(LinkEvent::Closed);
  }
  {
    std::lock_guard lk(core->state_mu);
    core->closed_seen = true;
  }
  core->state_cv.notify_all();
}

void on_error(natsConnection* nc, natsSubscription* sub, natsStatus err, void* token) noexcept {
  CallbackScope<Core> core(token);
  if (!core) return;
  try {
    std::string text = last_error_text(nc);
    if (text.empty()) text = status_text(err);
    std::string subject;
    if (sub) {
      if (const char* s = natsSubscription_GetSubject(sub)) subject = s;
    } else {
      subject = quoted_subject(text);
    }
    std::string line = "transport=nats event=error status=\"" + status_text(err) + "\"";
    if (!subject.empty()) line += " subject=" + subject;
    line += " server=" + core->last_server() + " error=\"" + text + "\"";
    if (std::uint64_t hidden = 0; traffic_log_budget().take(&hidden))
      core->logger.error(line + common::LogBudget::suffix(hidden));
  } catch (...) {
  }
}

}  // namespace mesh::transports::nats::detail

namespace mesh::transports::nats {

using namespace detail;

Result<void> NatsTransport::do_connect(std::chrono::milliseconds timeout,
                                       bool retry_in_background) {
  if (!configured_)
    return fail(ErrorCode::FailedPrecondition, "configure() must succeed before connect()");
  if (timeout.count() <= 0)
    return fail(ErrorCode::InvalidArgument, "connect timeout must be positive");
  Core& c = *core_;
  {
    // A redial still waiting for its first connection is replaced by this attempt (the
    // settings may have changed since).
    bool idle = false;
    {
      std::shared_lock lk(c.conn_mu);
      idle = c.nc == nullptr && !c.closing;
    }
    if (idle) {
      stop_redial(c);
      std::lock_guard lk(c.redial_mu);
      c.redial_stop = false;
      c.redial_wanted = false;
    }
  }
  std::unique_lock lk(c.conn_mu);
  if (c.closing) return fail(ErrorCode::Unavailable, "transport is closed");
  if (c.nc) {
    if (natsConnection_Status(c.nc) == NATS_CONN_STATUS_CONNECTED) return {};
    return fail(ErrorCode::Unavailable,
                "not connected to " + join(settings_.servers) + " yet; retrying in the background");
  }
  void* token = c.token;
  const std::int64_t timeout_ms = timeout.count();
  auto opts = build_options(settings_, token, timeout_ms, retry_in_background);
  if (!opts) return fail(opts.error());
  if (retry_in_background) {
    auto redial = build_options(settings_, token, timeout_ms, false);
    if (!redial) return fail(redial.error());
    std::lock_guard rlk(c.redial_mu);
    c.redial_opts = std::shared_ptr<natsOptions>(redial->release(), OptionsDeleter{});
  }
  c.servers = settings_.servers;
  c.retry = retry_in_background;
  {
    std::lock_guard slk(c.state_mu);
    c.closed_seen = false;
  }
  // Link events stay muted until this attempt is accepted: a connection refused below must not
  // show up as Closed to the handler.
  c.quiet = true;
  struct Unmute {
    Core& core;
    ~Unmute() { core.quiet = false; }
  } unmute{c};
  const std::string servers = join(settings_.servers);
  natsConnection* nc = nullptr;
  const natsStatus s = natsConnection_Connect(&nc, opts->get());
  if (s == NATS_OK) {
    c.nc = nc;
    c.live_nc = nc;
    log().info("transport=nats event=connected server=" + c.note_server(nc));
    return {};
  }
  if (s == NATS_NOT_YET_CONNECTED && nc) {
    // With retry, nats.c reports every failure as "not yet connected", refused credentials too
    // (it would retry once and then close the connection itself). The first attempt's error is
    // the connection's last error.
    const std::string last = last_error_text(nc);
    const char* ignored = nullptr;
    const natsStatus last_status = natsConnection_GetLastError(nc, &ignored);
    if (auth_refused(last_status)) {
      natsConnection_Close(nc);
      if (!on_nats_async_thread()) {
        std::unique_lock slk(c.state_mu);
        c.state_cv.wait_for(slk, kClosedCallbackWait, [&] { return c.closed_seen; });
      }
      natsConnection_Destroy(nc);
      // Not final: the broker may be reloading its authorization (mesh-control rewrites it at
      // every enrolment). The redial thread tries again with backoff and logs each refusal.
      log().warn("transport=nats event=credentials_refused server=" + servers + " attempt=0 error=\"" +
                 last + "\" retry_in_ms=" + std::to_string(kRedialFirstDelayMs));
      lk.unlock();
      request_redial(c);
      return fail(ErrorCode::Unavailable, "connect to " + servers + ": credentials refused (" + last +
                                              "); retrying in the background");
    }
    c.nc = nc;
    c.live_nc = nc;
    const std::string why = "connect to " + servers + ": no server reachable yet" +
                            (last.empty() ? std::string() : " (" + last + ")");
    log().warn("transport=nats event=connect_pending servers=" + servers + " error=\"" + why +
               "\"");
    return fail(ErrorCode::Unavailable, why + "; retrying in the background");
  }
  return fail(connect_error_code(s), describe(s, "connect to " + servers));
}

}  // namespace mesh::transports::nats
