// Nox Mesh NATS transport — mesh::sdk::Transport on the nats.c client (3.4).
//
// Config keys (validated by the host against config_schema(); checked again in configure):
//   servers        list of nats:// or tls:// URLs (required)
//   name           connection name shown by the server
//   nkey_seed      path of a file holding a user nkey seed (SU...)   } at most one of
//   user           user name for user/password authentication        } these two
//   password_file  path of a file holding the password for `user`
//   tls_ca         path of a PEM CA bundle to verify the server; turns TLS on
//   inbox_prefix   subject prefix of reply inboxes (default _INBOX), for per-client permissions
//   shared_delivery  deliver on nats.c's shared delivery pool (default false; mesh-host sets true)
//   send_asap      write each publish at once (default true), not after nats.c's 1 ms flush delay
//   per_request_inbox  each request takes its reply on a subscription of its own, in the
//                  requesting thread (default false; mesh-host sets true)
//
// Link behaviour: unlimited reconnects, 250 ms + up to 250 ms jitter between rounds, an 8 MiB
// reconnect buffer for publishes made while disconnected, requests failing fast (Unavailable)
// while disconnected. Link events and errors are logged as `transport=nats event=... server=...`.
// With retry_in_background a refused login is not final: when nats.c closes a connection after
// two refusals by the same server, the transport makes a new one (1 s doubling to 30 s between
// attempts, each refusal logged), re-subscribes every live subscription and fires Connected.
//
// Threads: publish/subscribe/request/flush/connected/max_payload_bytes may be called from any
// thread. Message handlers run on the subscription's nats.c delivery thread (with
// shared_delivery, on nats.c's shared delivery thread); link events on nats.c's (process-wide)
// callback thread. With send_asap (the default) publish writes to the socket in the caller.
// A request's reply is handed from nats.c's reader thread to nats.c's reply-subscription thread
// and from there to the requester; with per_request_inbox, to the requester directly.
//
// Lifetime: close() (and the destructor) first stops delivery to every subscription (waiting
// for a running handler to return), then closes the connection (nats.c joins its reader thread),
// only then destroys the nats.c subscriptions, and waits for nats.c's "closed" callback, the
// last callback nats.c posts for a connection, before destroying it. nats.c 3.4.1's reader
// thread uses a subscription it looked up without holding a reference, so a subscription dropped
// on a live connection is destroyed only after a flush round trip (or, if that fails, when its
// connection is closed), never while a message for it may still be in hand. After close() returns no
// handler or link handler runs. nats.c callbacks reach this object only through a process-wide
// token table, so a late callback (if nats.c ever posted one after "closed") finds no target and
// does nothing. The plugin library is linked with -z nodelete: libnats keeps process-wide threads
// (timers, async callbacks, GC) until nats_Close(), which a plugin must not call because the host
// or other plugins may use nats.c too, so neither library may be unmapped while they run.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "mesh/sdk/transport.h"

namespace mesh::transports::nats {

/// The configuration after configure(): files already read and checked.
struct NatsSettings {
  std::vector<std::string> servers;
  std::string name;
  std::string nkey_seed_path;  ///< empty: no nkey authentication
  std::string nkey_public;     ///< the user public key derived from the seed ("U...")
  std::string user;
  std::string password;        ///< contents of password_file, trailing newline removed
  std::string tls_ca_path;
  std::string inbox_prefix;    ///< empty: nats.c's default "_INBOX"
  bool shared_delivery = false;  ///< natsOptions_UseGlobalMessageDelivery (mesh-sim, mesh-host)
  /// natsOptions_SetSendAsap: each publish is written to the socket by the publishing thread at
  /// once, instead of being handed to nats.c's flusher thread, which waits ~1 ms for more before
  /// it writes (decision 113). false: nats.c's buffering, and its flusher thread.
  bool send_asap = true;
  /// Requests wait on a synchronous subscription of their own (nats_request.cpp, decision 161)
  /// instead of nats.c's shared reply subscription and its delivery thread.
  bool per_request_inbox = false;
};

class NatsTransport final : public sdk::Transport {
 public:
  explicit NatsTransport(const sdk::HostContext& host);
  /// Calls close().
  ~NatsTransport() override;

  /// The config schema (also usable without an object, e.g. for docs).
  static const sdk::Schema& schema();
  const sdk::Schema& config_schema() const noexcept override { return schema(); }

  void on_link_event(sdk::LinkHandler handler) noexcept override;
  bool connected() const noexcept override;
  std::size_t max_payload_bytes() const noexcept override;
  void close() noexcept override;

  const NatsSettings& settings_for_test() const noexcept { return settings_; }

  /// Implementation detail: the connection state shared with nats.c callbacks (defined in
  /// nats_connection.h, where the callbacks need its name).
  struct Core;

 protected:
  sdk::Result<void> do_configure(const sdk::Value& config) override;
  sdk::Result<void> do_connect(std::chrono::milliseconds timeout,
                               bool retry_in_background) override;
  sdk::Result<void> do_publish(const sdk::Message& msg) override;
  sdk::Result<std::unique_ptr<sdk::Subscription>> do_subscribe(
      const std::string& subject, const std::string& queue_group,
      sdk::MessageHandler handler) override;
  /// Sets the subscription's nats.c pending limits (natsSubscription_SetPendingLimits), also
  /// after a resubscribe on a new connection.
  sdk::Result<std::unique_ptr<sdk::Subscription>> do_subscribe_limited(
      const std::string& subject, const std::string& queue_group, sdk::MessageHandler handler,
      const sdk::SubscribeOptions& options) override;
  sdk::Result<sdk::Message> do_request(const sdk::Message& msg,
                                       std::chrono::milliseconds timeout) override;
  sdk::Result<void> do_flush(std::chrono::milliseconds timeout) override;

 private:
  NatsSettings settings_;
  bool configured_ = false;
  std::shared_ptr<Core> core_;
};

/// Subject syntax check: non-empty dot-separated tokens without whitespace; with
/// `wildcards_allowed`, `*` tokens anywhere and a `>` token at the end.
bool valid_subject(const std::string& subject, bool wildcards_allowed) noexcept;

}  // namespace mesh::transports::nats
