// Nox Mesh SDK — the transport interface: how the host and control plane exchange messages
// (NATS first). Subjects are dot-separated tokens as in NATS; `*` and `>` wildcards in subscribe.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mesh/sdk/plugin.h"

namespace mesh::sdk {

/// One message. Headers are ordered name/value pairs (names case-sensitive, as NATS headers).
struct Message {
  std::string subject;
  /// Reply subject for request/reply; empty when no reply is expected.
  std::string reply;
  std::vector<std::pair<std::string, std::string>> headers;
  /// Body bytes (JSON in Nox Mesh, but the transport does not care).
  std::string body;

  /// First value of header `name`, or nullptr.
  const std::string* header(std::string_view name) const noexcept {
    for (const auto& [k, v] : headers)
      if (k == name) return &v;
    return nullptr;
  }
  void set_header(std::string name, std::string value) {
    for (auto& [k, v] : headers)
      if (k == name) { v = std::move(value); return; }
    headers.emplace_back(std::move(name), std::move(value));
  }
};

/// Link events, delivered to the handler set with on_link_event.
enum class LinkEvent { Connected, Disconnected, Reconnected, Closed };

constexpr const char* to_string(LinkEvent e) noexcept {
  switch (e) {
    case LinkEvent::Connected: return "connected";
    case LinkEvent::Disconnected: return "disconnected";
    case LinkEvent::Reconnected: return "reconnected";
    case LinkEvent::Closed: return "closed";
  }
  return "closed";
}

/// A live subscription; destroying it unsubscribes. Must be destroyed before its Transport.
class Subscription {
 public:
  virtual ~Subscription() = default;
};

/// Called on a transport thread for each message. Must not block for long (hand work to another
/// thread); must not throw (an exception is caught and logged by the transport).
using MessageHandler = std::function<void(Message&&)>;
/// Called on a transport thread for link events.
using LinkHandler = std::function<void(LinkEvent)>;

/// How much one subscription may hold undelivered. A subscription whose handler falls behind by
/// more loses the newest messages (NATS "slow consumer"), and only that subscription does: giving
/// each kind of traffic its own subscription and limits keeps a flood of one kind from starving
/// the others. 0: the transport's default (nats.c: 65,536 messages, 64 MiB).
struct SubscribeOptions {
  int pending_messages = 0;
  int pending_bytes = 0;
};

class Transport : public Plugin {
 public:
  using Plugin::Plugin;

  /// Sets the link-event handler. Call before connect(); not thread-safe with connect().
  virtual void on_link_event(LinkHandler handler) noexcept = 0;

  /// Connects with the configured servers and credentials. Waits at most `timeout` for the
  /// first connection. If `retry_in_background` is true and no server answers within the timeout,
  /// or the server refuses the credentials (a broker reloading its authorization), it returns
  /// Unavailable but keeps trying (reconnects are unlimited, refusals included, with a backoff the
  /// plugin documents), and fires Connected when it gets through; otherwise it gives up.
  /// Errors: Unavailable, PermissionDenied (credentials refused, without retry_in_background),
  /// InvalidArgument (bad URL, unreadable credential file). Not thread-safe (call once, before
  /// other calls, or again after a failure).
  Result<void> connect(std::chrono::milliseconds timeout, bool retry_in_background) noexcept {
    return guard("connect", [&] { return do_connect(timeout, retry_in_background); });
  }

  /// Publishes one message (fire and forget; buffered by the client while reconnecting).
  /// Thread-safe. Errors: InvalidArgument (body larger than max_payload_bytes()), Unavailable.
  Result<void> publish(const Message& msg) noexcept {
    return guard("publish", [&] { return do_publish(msg); });
  }

  /// Subscribes to `subject` (wildcards allowed). Non-empty `queue_group` load-balances between
  /// subscribers of the same group. Thread-safe. Errors: InvalidArgument, Unavailable,
  /// PermissionDenied (the broker refused the subject).
  Result<std::unique_ptr<Subscription>> subscribe(const std::string& subject,
                                                  const std::string& queue_group,
                                                  MessageHandler handler) noexcept {
    return guard("subscribe", [&] { return do_subscribe(subject, queue_group, std::move(handler)); });
  }
  /// subscribe() with pending limits for this subscription (SubscribeOptions). A transport that
  /// has no such limits ignores them. Same errors; also InvalidArgument for a negative limit.
  Result<std::unique_ptr<Subscription>> subscribe(const std::string& subject, const std::string& queue_group,
                                                  MessageHandler handler, const SubscribeOptions& options) noexcept {
    return guard("subscribe", [&] { return do_subscribe_limited(subject, queue_group, std::move(handler), options); });
  }

  /// Sends `msg` and waits up to `timeout` for one reply. Thread-safe.
  /// Errors: Timeout (no reply in time), Unavailable (not connected, or no responder:
  /// NATS "no responders"), InvalidArgument (too large).
  Result<Message> request(const Message& msg, std::chrono::milliseconds timeout) noexcept {
    return guard("request", [&] { return do_request(msg, timeout); });
  }

  /// Waits until everything published so far has reached the server (round trip), up to
  /// `timeout`. Errors: Timeout, Unavailable.
  Result<void> flush(std::chrono::milliseconds timeout) noexcept {
    return guard("flush", [&] { return do_flush(timeout); });
  }

  /// True while a server connection is up.
  virtual bool connected() const noexcept = 0;
  /// The largest body the server accepts, in bytes (NATS `max_payload`, 1 MiB by default);
  /// 0 before the first connection.
  virtual std::size_t max_payload_bytes() const noexcept = 0;
  /// Closes the connection; later calls fail with Unavailable. Idempotent.
  virtual void close() noexcept = 0;

 protected:
  virtual Result<void> do_connect(std::chrono::milliseconds timeout, bool retry_in_background) = 0;
  virtual Result<void> do_publish(const Message& msg) = 0;
  virtual Result<std::unique_ptr<Subscription>> do_subscribe(const std::string& subject,
                                                             const std::string& queue_group,
                                                             MessageHandler handler) = 0;
  virtual Result<Message> do_request(const Message& msg, std::chrono::milliseconds timeout) = 0;
  virtual Result<void> do_flush(std::chrono::milliseconds timeout) = 0;
  /// Default: do_subscribe(), the limits ignored. (Declared last: it extends the vtable at its end.)
  virtual Result<std::unique_ptr<Subscription>> do_subscribe_limited(const std::string& subject,
                                                                     const std::string& queue_group,
                                                                     MessageHandler handler,
                                                                     const SubscribeOptions& options) {
    (void)options;
    return do_subscribe(subject, queue_group, std::move(handler));
  }
};

}  // namespace mesh::sdk
