#include "nats_transport.h"

#include <fcntl.h>
#include <unistd.h>

#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "mesh/common/logging.h"
#include "nkey.h"

namespace mesh::transports::nats {

using sdk::ErrorCode;
using sdk::fail;
using sdk::LinkEvent;
using sdk::Result;

namespace {

constexpr int kReconnectWaitMs = 250;
constexpr int kReconnectJitterMs = 250;
constexpr int kReconnectBufferBytes = 8 * 1024 * 1024;
constexpr int kPingIntervalMs = 30'000;  // a dead link is noticed after ~2 missed pings
constexpr int kMaxPingsOut = 2;
constexpr auto kClosedCallbackWait = std::chrono::seconds(5);
constexpr auto kSubCompleteWait = std::chrono::seconds(2);
constexpr std::int64_t kSubscribeCheckMs = 1000;

// ---- callback gates ------------------------------------------------------------------------
//
// Every object nats.c calls back into is a Gate. A callback enters the gate before touching the
// object; shutting the gate refuses new entries and waits for the running ones, so once
// shut_and_wait() returns the object's handlers are never called again.

class Gate;

/// The gates whose callbacks the current thread is inside (innermost first).
struct ActiveCall {
  const Gate* gate;
  ActiveCall* outer;
};
thread_local ActiveCall* t_active_calls = nullptr;

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

/// Process-wide map from the opaque tokens handed to nats.c as callback closures to live gates.
/// Tokens are never reused, so a callback for a removed token finds nothing and does nothing.
/// Intentionally leaked: nats.c threads may still call in while static destructors run at exit.
class CallbackTargets {
 public:
  static CallbackTargets& instance() {
    static CallbackTargets* targets = new CallbackTargets;
    return *targets;
  }
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

/// Resolves a callback token and enters its gate for the scope; false when the target is gone.
template <class T>
class CallbackScope {
 public:
  explicit CallbackScope(void* token) noexcept
      : target_(CallbackTargets::instance().find<T>(token)) {
    if (target_ && target_->enter()) {
      entered_ = true;
      call_ = {target_.get(), t_active_calls};
      // The node is unlinked again in the destructor; GCC cannot see that (clang has no such
      // warning).
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

// ---- small helpers ---------------------------------------------------------------------------

std::string status_text(natsStatus s) { return natsStatus_GetText(s); }

/// "<what>: <nats.c's detailed error text or the status text>".
std::string describe(natsStatus s, const std::string& what) {
  natsStatus last = NATS_OK;
  const char* text = nats_GetLastError(&last);
  std::string detail = text && *text && last == s ? text : status_text(s);
  return what + ": " + detail;
}

/// The text between the first pair of double quotes ("Permissions Violation for Publish to
/// \"a.b\"" names a.b), or empty.
std::string quoted_subject(const std::string& text) {
  const auto open = text.find('"');
  if (open == std::string::npos) return {};
  const auto close = text.find('"', open + 1);
  if (close == std::string::npos) return {};
  return text.substr(open + 1, close - open - 1);
}

std::string last_error_text(natsConnection* nc) {
  const char* text = nullptr;
  natsConnection_GetLastError(nc, &text);
  return text ? text : "";
}

std::string connected_url(natsConnection* nc) {
  char buf[512] = {0};
  if (natsConnection_GetConnectedUrl(nc, buf, sizeof buf) == NATS_OK) return buf;
  return {};
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

bool valid_header_name(const std::string& name) {
  if (name.empty()) return false;
  for (unsigned char c : name)
    if (c <= 32 || c >= 127 || c == ':') return false;
  return true;
}

bool valid_header_value(const std::string& value) {
  return value.find_first_of("\r\n") == std::string::npos;
}

/// nats.c 3.4.1 cannot parse a received header block in which a value is empty or only blanks
/// (natsMsgHeader_Keys fails: "no value found for key ..."), and every header of that message is
/// lost, so such values are refused on send.
bool blank_header_value(const std::string& value) {
  return value.find_first_not_of(" \t") == std::string::npos;
}

struct FreeDeleter {
  void operator()(const void* p) const noexcept { std::free(const_cast<void*>(p)); }
};
struct MsgDeleter {
  void operator()(natsMsg* m) const noexcept { natsMsg_Destroy(m); }
};
struct OptionsDeleter {
  void operator()(natsOptions* o) const noexcept { natsOptions_Destroy(o); }
};
using MsgPtr = std::unique_ptr<natsMsg, MsgDeleter>;
using OptionsPtr = std::unique_ptr<natsOptions, OptionsDeleter>;

/// Converts a received nats.c message. nats.c keeps header names in a hash map, so the order of
/// distinct names is not the wire order: names come sorted, each name's values in wire order.
/// Values arrive with surrounding blanks trimmed. When nats.c cannot parse the header block the
/// message is delivered without headers and `header_error` says why.
sdk::Message to_message(natsMsg* msg, std::string* header_error = nullptr) {
  sdk::Message m;
  if (const char* s = natsMsg_GetSubject(msg)) m.subject = s;
  if (const char* r = natsMsg_GetReply(msg)) m.reply = r;
  const char* data = natsMsg_GetData(msg);
  const int len = natsMsg_GetDataLength(msg);
  if (data && len > 0) m.body.assign(data, static_cast<std::size_t>(len));
  const char** keys = nullptr;
  int key_count = 0;
  const natsStatus hs = natsMsgHeader_Keys(msg, &keys, &key_count);
  if (hs != NATS_OK && hs != NATS_NOT_FOUND && header_error)
    *header_error = describe(hs, "cannot parse headers");
  if (hs == NATS_OK && keys) {
    std::unique_ptr<const char*, FreeDeleter> keys_owner(keys);
    std::vector<std::string> names(keys, keys + key_count);
    std::sort(names.begin(), names.end());
    for (const auto& name : names) {
      const char** values = nullptr;
      int value_count = 0;
      if (natsMsgHeader_Values(msg, name.c_str(), &values, &value_count) != NATS_OK || !values)
        continue;
      std::unique_ptr<const char*, FreeDeleter> values_owner(values);
      for (int i = 0; i < value_count; ++i)
        m.headers.emplace_back(name, values[i] ? values[i] : "");
    }
  }
  return m;
}

/// Reads a small file (credentials); errors name the file and the reason.
Result<std::string> read_small_file(const std::string& path, const std::string& key) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail(ErrorCode::InvalidArgument, "cannot read '" + path + "': " + std::strerror(errno),
                key);
  std::string data;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return fail(ErrorCode::InvalidArgument, "cannot read '" + path + "': " + std::strerror(e),
                  key);
    }
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
    if (data.size() > 1024 * 1024) {
      ::close(fd);
      return fail(ErrorCode::InvalidArgument, "'" + path + "' is larger than 1 MiB", key);
    }
  }
  ::close(fd);
  return data;
}

/// Accepts nats://[user[:pass]@]host[:port] and tls://..., host non-empty, port 1-65535.
bool valid_server_url(const std::string& url) {
  std::string rest;
  if (url.rfind("nats://", 0) == 0) rest = url.substr(7);
  else if (url.rfind("tls://", 0) == 0) rest = url.substr(6);
  else return false;
  const auto slash = rest.find('/');
  if (slash != std::string::npos) {
    if (slash + 1 != rest.size()) return false;  // no path
    rest.resize(slash);
  }
  if (const auto at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);
  std::string host = rest;
  std::string port;
  if (!rest.empty() && rest.front() == '[') {  // [v6]:port
    const auto close = rest.find(']');
    if (close == std::string::npos) return false;
    host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return false;
      port = rest.substr(close + 2);
      if (port.empty()) return false;
    }
  } else if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (port.empty()) return false;
  }
  if (host.empty()) return false;
  for (unsigned char c : host)
    if (c <= 32 || c == '/' || c == '?' || c == '#') return false;
  if (!port.empty()) {
    if (port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit)) return false;
    const int p = std::stoi(port);
    if (p < 1 || p > 65535) return false;
  }
  return true;
}

}  // namespace

bool valid_subject(const std::string& subject, bool wildcards_allowed) noexcept {
  if (subject.empty()) return false;
  std::size_t start = 0;
  for (;;) {
    const std::size_t dot = subject.find('.', start);
    const std::size_t end = dot == std::string::npos ? subject.size() : dot;
    if (end == start) return false;  // empty token
    const std::string_view token(subject.data() + start, end - start);
    for (unsigned char c : token)
      if (c <= 32 || c == 127) return false;
    if (token == "*" || token == ">") {
      if (!wildcards_allowed) return false;
      if (token == ">" && dot != std::string::npos) return false;
    }
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// ---- subscriptions ---------------------------------------------------------------------------

namespace {

/// nats.c 3.4.1's reader thread looks a subscription up under the connection's subscription
/// lock, releases that lock, and only then locks the subscription, without holding a reference
/// (natsConn_processMsg; fixed upstream in 3.6.0). A subscription unsubscribed and destroyed
/// between those two steps is freed under the reader's feet (a crash in natsMutex_Lock). So a
/// subscription is destroyed only when no lookup made before its removal can still be running:
/// after its connection was closed (nats.c joins the reader thread in natsConnection_Close), or
/// after a flush round trip completed once it was removed (the reader handles the PONG after
/// any message it was processing). Until then it waits here.
struct Retired {
  std::mutex mu;
  std::vector<natsSubscription*> subs;  // guarded by mu: unsubscribed, not yet destroyed

  void add(natsSubscription* s) {
    std::lock_guard lk(mu);
    subs.push_back(s);
  }
  /// Destroys every retired subscription. Call only at one of the safe points above.
  void destroy_all() noexcept {
    std::vector<natsSubscription*> doomed;
    {
      std::lock_guard lk(mu);
      doomed.swap(subs);
    }
    for (natsSubscription* s : doomed) natsSubscription_Destroy(s);
  }
};

constexpr std::int64_t kRetireFlushMs = 2000;

/// One subscription's state, shared between the Subscription object, the transport (so close()
/// can shut it) and nats.c's delivery thread (through its token).
struct SubCore final : Gate {
  SubCore(sdk::Logger& logger_, std::string subject_, std::string queue_group_,
          sdk::MessageHandler handler_, std::shared_ptr<Retired> retired_)
      : logger(logger_),
        subject(std::move(subject_)),
        queue_group(std::move(queue_group_)),
        handler(std::move(handler_)),
        retired(std::move(retired_)) {}

  /// Stops delivery: once it returns the handler is never called again (unless it is running on
  /// this thread). The nats.c subscription is left alone. Used by close() before it closes the
  /// connection.
  void stop_delivery() noexcept {
    {
      std::lock_guard lk(mu);
      if (state != State::Live) return;
    }
    shut_and_wait();
  }

  /// Stops delivery and releases the nats.c subscription. Idempotent; a concurrent second call
  /// waits for the first (unless it comes from this subscription's own handler).
  /// `connection_closed`: the caller closed the subscription's connection (close()), so nats.c's
  /// reader thread is gone and the subscription may be destroyed at once; otherwise it is
  /// destroyed after a flush round trip, or retired until one of the safe points of Retired.
  void shutdown(bool connection_closed = false) noexcept {
    natsSubscription* s = nullptr;
    natsConnection* conn = nullptr;
    {
      std::unique_lock lk(mu);
      if (state == State::Stopped) return;
      if (state == State::Stopping) {
        if (!in_callback_of(this)) cv.wait(lk, [&] { return state == State::Stopped; });
        return;
      }
      state = State::Stopping;
      s = std::exchange(sub, nullptr);
      conn = on;
    }
    shut_and_wait();
    if (s) {
      natsSubscription_Unsubscribe(s);  // fails harmlessly when the connection is closed
      // nats.c calls the completion callback once its delivery thread is done with the
      // subscription. Not waited for from inside a callback (the thread we would wait for may
      // be this one); the gate already guarantees the handler is not running.
      if (has_complete_cb && !in_any_callback() && !connection_closed) {
        std::unique_lock lk(mu);
        cv.wait_for(lk, kSubCompleteWait, [&] { return complete; });
      }
      // The subscription is out of the connection's table now; a reader-thread lookup made
      // before that may still hold its pointer (see Retired).
      if (connection_closed) {
        natsSubscription_Destroy(s);
      } else if (conn && natsConnection_Status(conn) == NATS_CONN_STATUS_CONNECTED &&
                 natsConnection_FlushTimeout(conn, kRetireFlushMs) == NATS_OK) {
        natsSubscription_Destroy(s);
        if (retired) retired->destroy_all();  // removed before this round trip too
      } else if (retired) {
        retired->add(s);
      }
    }
    CallbackTargets::instance().remove(token);
    const bool own_handler_running = in_callback_of(this);
    {
      std::lock_guard lk(mu);
      state = State::Stopped;
      // Release what the handler captured now, unless it is the code running on this thread.
      if (!own_handler_running) handler = nullptr;
    }
    cv.notify_all();
  }

  enum class State { Live, Stopping, Stopped };
  sdk::Logger& logger;
  const std::string subject;
  const std::string queue_group;
  sdk::MessageHandler handler;
  const std::shared_ptr<Retired> retired;
  void* token = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  natsSubscription* sub = nullptr;  // guarded by mu; null while no connection exists (redial)
  natsConnection* on = nullptr;     // guarded by mu: the connection `sub` belongs to
  sdk::SubscribeOptions limits;     // set before the first subscribe, then read-only
  bool has_complete_cb = false;
  bool complete = false;            // guarded by mu
  State state = State::Live;        // guarded by mu
};

/// Lines that traffic can cause at will (nats.c's asynchronous errors — "Slow Consumer, messages
/// dropped" fires for every burst past a pending limit —, malformed headers): at most 10 a second
/// for the whole process, the next line through counting what was suppressed.
common::LogBudget& traffic_log_budget() {
  static common::LogBudget budget(10);
  return budget;
}

/// Applies a subscription's pending limits (0 keeps nats.c's default for that limit).
natsStatus apply_limits(natsSubscription* s, const sdk::SubscribeOptions& o) {
  if (o.pending_messages == 0 && o.pending_bytes == 0) return NATS_OK;
  int msgs = 0, bytes = 0;
  if (natsStatus st = natsSubscription_GetPendingLimits(s, &msgs, &bytes); st != NATS_OK) return st;
  return natsSubscription_SetPendingLimits(s, o.pending_messages ? o.pending_messages : msgs,
                                           o.pending_bytes ? o.pending_bytes : bytes);
}

void on_message(natsConnection*, natsSubscription*, natsMsg* msg, void* token) noexcept {
  MsgPtr owned(msg);
  CallbackScope<SubCore> sub(token);
  if (!sub) return;
  try {
    std::string header_error;
    sdk::Message m = to_message(msg, &header_error);
    if (std::uint64_t hidden = 0; !header_error.empty() && traffic_log_budget().take(&hidden))
      sub->logger.warn("transport=nats event=bad_headers subject=" + m.subject.substr(0, 256) + " error=\"" +
                       header_error + "\"" + common::LogBudget::suffix(hidden));
    sub->handler(std::move(m));
  } catch (const std::exception& e) {
    sub->logger.error("transport=nats event=handler_error subject=" + sub->subject +
                      " error=\"" + e.what() + "\"");
  } catch (...) {
    sub->logger.error("transport=nats event=handler_error subject=" + sub->subject +
                      " error=\"unknown exception\"");
  }
}

void on_sub_complete(void* token) noexcept {
  // Not gated: it runs after the gate was shut, and only flips a flag.
  auto sub = CallbackTargets::instance().find<SubCore>(token);
  if (!sub) return;
  {
    std::lock_guard lk(sub->mu);
    sub->complete = true;
  }
  sub->cv.notify_all();
}

class NatsSubscription final : public sdk::Subscription {
 public:
  explicit NatsSubscription(std::shared_ptr<SubCore> core) : core_(std::move(core)) {}
  ~NatsSubscription() override { core_->shutdown(); }

 private:
  std::shared_ptr<SubCore> core_;
};

}  // namespace

// ---- the connection --------------------------------------------------------------------------

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

namespace {

using Core = NatsTransport::Core;

void request_redial(Core& c) noexcept;

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
  if (!core || core->closing || core->quiet || stray(*core.operator->(), nc)) return;  // a deliberate close() reports Closed
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

ErrorCode connect_error_code(natsStatus s) {
  switch (s) {
    case NATS_CONNECTION_AUTH_FAILED:
    case NATS_NOT_PERMITTED:
      return ErrorCode::PermissionDenied;
    case NATS_INVALID_ARG:
    case NATS_ADDRESS_MISSING:
    case NATS_SECURE_CONNECTION_REQUIRED:
    case NATS_SECURE_CONNECTION_WANTED:
      return ErrorCode::InvalidArgument;
    default:
      return ErrorCode::Unavailable;  // NATS_NO_SERVER, NATS_TIMEOUT, NATS_SSL_ERROR, I/O...
  }
}

/// Errors of operations on an established connection object.
ErrorCode op_error_code(natsStatus s) {
  switch (s) {
    case NATS_TIMEOUT: return ErrorCode::Timeout;
    case NATS_MAX_PAYLOAD:
    case NATS_INVALID_SUBJECT:
    case NATS_INVALID_ARG:
    case NATS_INVALID_TIMEOUT:
      return ErrorCode::InvalidArgument;
    case NATS_NOT_PERMITTED: return ErrorCode::PermissionDenied;
    default: return ErrorCode::Unavailable;  // closed, disconnected, buffer full, I/O
  }
}

/// Header section size as sent ("NATS/1.0\r\n" + "k: v\r\n"... + "\r\n").
std::size_t header_bytes(const sdk::Message& msg) {
  if (msg.headers.empty()) return 0;
  std::size_t n = 12;
  for (const auto& [k, v] : msg.headers) n += k.size() + v.size() + 4;
  return n;
}

}  // namespace

// ---- NatsTransport ---------------------------------------------------------------------------

NatsTransport::NatsTransport(const sdk::HostContext& host)
    : sdk::Transport(host), core_(std::make_shared<Core>(log())) {
  core_->token = CallbackTargets::instance().add(core_);
}

NatsTransport::~NatsTransport() {
  close();
  CallbackTargets::instance().remove(core_->token);
}

const sdk::Schema& NatsTransport::schema() {
  using sdk::ValueType;
  static const sdk::Schema schema{
      "transport",
      "NATS transport (nats.c): publish/subscribe, request/reply and headers over NATS, "
      "reconnecting without limit.",
      {
          {"servers", ValueType::StringList, true,
           "NATS server URLs, each nats://host[:port] or tls://host[:port]; reconnects cycle "
           "through them without limit"},
          {"name", ValueType::String, false,
           "connection name the server shows for this client (e.g. the node name)"},
          {"nkey_seed", ValueType::String, false,
           "path of a file holding the user nkey seed (SU...), for nkey authentication"},
          {"user", ValueType::String, false, "user name, for user/password authentication"},
          {"password_file", ValueType::String, false,
           "path of a file holding the password of `user` (a trailing newline is ignored)"},
          {"tls_ca", ValueType::String, false,
           "path of a PEM file of CA certificates that verify the server; turns TLS on"},
          {"inbox_prefix", ValueType::String, false,
           "subject prefix of this client's reply inboxes (default _INBOX), so that broker "
           "permissions can give each client its own replies: e.g. _INBOX.node.web-01; "
           "dot-separated tokens, no wildcards"},
      },
      {{"nkey_seed", "user"}}};
  return schema;
}

Result<void> NatsTransport::do_configure(const sdk::Value& config) {
  if (auto ok = sdk::validate_against(schema(), config, ""); !ok) return ok;
  NatsSettings s;
  const auto& servers = config.find("servers")->as_array();
  if (servers.empty())
    return fail(ErrorCode::InvalidArgument, "must list at least one server", "servers");
  for (std::size_t i = 0; i < servers.size(); ++i) {
    const std::string& url = servers[i].as_string();
    if (!valid_server_url(url))
      return fail(ErrorCode::InvalidArgument,
                  "'" + url + "' is not a nats://host[:port] or tls://host[:port] URL",
                  "servers[" + std::to_string(i) + "]");
    s.servers.push_back(url);
  }
  s.name = config.get_string("name");
  s.user = config.get_string("user");
  if (const std::string path = config.get_string("nkey_seed"); !path.empty()) {
    auto text = read_small_file(path, "nkey_seed");
    if (!text) return fail(text.error());
    auto pub = nkey_public_from_seed_text(*text);
    std::fill(text->begin(), text->end(), '\0');
    if (!pub)
      return fail(ErrorCode::InvalidArgument, "'" + path + "': " + pub.error().message,
                  "nkey_seed");
    s.nkey_seed_path = path;
    s.nkey_public = *pub;
  } else if (config.find("nkey_seed")) {
    return fail(ErrorCode::InvalidArgument, "must be a file path", "nkey_seed");
  }
  if (const std::string path = config.get_string("password_file"); config.find("password_file")) {
    if (s.user.empty())
      return fail(ErrorCode::InvalidArgument, "needs `user` to be set", "password_file");
    auto text = read_small_file(path, "password_file");
    if (!text) return fail(text.error());
    while (!text->empty() && (text->back() == '\n' || text->back() == '\r')) text->pop_back();
    if (text->empty())
      return fail(ErrorCode::InvalidArgument, "'" + path + "' is empty", "password_file");
    s.password = std::move(*text);
  }
  if (const std::string prefix = config.get_string("inbox_prefix"); config.find("inbox_prefix")) {
    if (!valid_subject(prefix, false))
      return fail(ErrorCode::InvalidArgument,
                  "'" + prefix + "' is not a subject prefix (dot-separated tokens, no wildcards, "
                  "no blanks)", "inbox_prefix");
    s.inbox_prefix = prefix;
  }
  if (const std::string path = config.get_string("tls_ca"); config.find("tls_ca")) {
    auto text = read_small_file(path, "tls_ca");
    if (!text) return fail(text.error());
    if (text->find("-----BEGIN CERTIFICATE-----") == std::string::npos)
      return fail(ErrorCode::InvalidArgument, "'" + path + "' holds no PEM certificate",
                  "tls_ca");
    s.tls_ca_path = path;
  }
  settings_ = std::move(s);
  configured_ = true;
  return {};
}

void NatsTransport::on_link_event(sdk::LinkHandler handler) noexcept {
  core_->link_handler = std::move(handler);
}

namespace {

constexpr std::int64_t kRedialFirstDelayMs = 1000;
constexpr std::int64_t kRedialMaxDelayMs = 30'000;

/// The nats.c options for `settings`: servers, timeouts, reconnect policy, callbacks (closure
/// `token`), credentials, TLS, inbox prefix. `retry` turns on retry-on-failed-connect.
Result<OptionsPtr> build_options(const NatsSettings& settings, void* token,
                                 std::int64_t timeout_ms, bool retry) {
  natsOptions* raw = nullptr;
  if (natsOptions_Create(&raw) != NATS_OK)
    return fail(ErrorCode::Internal, describe(NATS_NO_MEMORY, "natsOptions_Create"));
  OptionsPtr opts(raw);
  const auto check = [](natsStatus s, const char* what, const char* key = "") -> Result<void> {
    if (s == NATS_OK) return {};
    return fail(s == NATS_NO_MEMORY ? ErrorCode::Internal : ErrorCode::InvalidArgument,
                describe(s, what), key);
  };
  std::vector<const char*> urls;
  for (const auto& u : settings.servers) urls.push_back(u.c_str());
  Result<void> r;
  if (!(r = check(natsOptions_SetServers(opts.get(), urls.data(), static_cast<int>(urls.size())),
                  "servers", "servers")) ||
      (!settings.name.empty() &&
       !(r = check(natsOptions_SetName(opts.get(), settings.name.c_str()), "name", "name"))) ||
      !(r = check(natsOptions_SetTimeout(opts.get(), timeout_ms), "connect timeout")) ||
      !(r = check(natsOptions_SetMaxReconnect(opts.get(), -1), "max reconnect")) ||
      !(r = check(natsOptions_SetReconnectWait(opts.get(), kReconnectWaitMs), "reconnect wait")) ||
      !(r = check(natsOptions_SetReconnectJitter(opts.get(), kReconnectJitterMs,
                                                 kReconnectJitterMs),
                  "reconnect jitter")) ||
      !(r = check(natsOptions_SetReconnectBufSize(opts.get(), kReconnectBufferBytes),
                  "reconnect buffer")) ||
      !(r = check(natsOptions_SetPingInterval(opts.get(), kPingIntervalMs), "ping interval")) ||
      !(r = check(natsOptions_SetMaxPingsOut(opts.get(), kMaxPingsOut), "max pings out")) ||
      !(r = check(natsOptions_SetFailRequestsOnDisconnect(opts.get(), true),
                  "fail requests on disconnect")) ||
      !(r = check(natsOptions_SetDisconnectedCB(opts.get(), on_disconnected, token),
                  "disconnected callback")) ||
      !(r = check(natsOptions_SetReconnectedCB(opts.get(), on_reconnected, token),
                  "reconnected callback")) ||
      !(r = check(natsOptions_SetClosedCB(opts.get(), on_closed, token), "closed callback")) ||
      !(r = check(natsOptions_SetErrorHandler(opts.get(), on_error, token), "error handler")) ||
      !(r = check(natsOptions_SetRetryOnFailedConnect(opts.get(), retry,
                                                      retry ? on_connected : nullptr, token),
                  "retry on failed connect")))
    return fail(r.error());
  if (!settings.user.empty() &&
      !(r = check(natsOptions_SetUserInfo(opts.get(), settings.user.c_str(),
                                          settings.password.empty() ? nullptr
                                                                    : settings.password.c_str()),
                  "user", "user")))
    return fail(r.error());
  if (!settings.nkey_seed_path.empty() &&
      !(r = check(natsOptions_SetNKeyFromSeed(opts.get(), settings.nkey_public.c_str(),
                                              settings.nkey_seed_path.c_str()),
                  "nkey seed", "nkey_seed")))
    return fail(r.error());
  if (!settings.tls_ca_path.empty() &&
      (!(r = check(natsOptions_SetSecure(opts.get(), true), "tls", "tls_ca")) ||
       !(r = check(natsOptions_LoadCATrustedCertificates(opts.get(), settings.tls_ca_path.c_str()),
                   "tls_ca", "tls_ca"))))
    return fail(r.error());
  if (!settings.inbox_prefix.empty() &&
      !(r = check(natsOptions_SetCustomInboxPrefix(opts.get(), settings.inbox_prefix.c_str()),
                  "inbox prefix", "inbox_prefix")))
    return fail(r.error());
  return opts;
}

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

}  // namespace

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

bool NatsTransport::connected() const noexcept {
  std::shared_lock lk(core_->conn_mu);
  return core_->nc && natsConnection_Status(core_->nc) == NATS_CONN_STATUS_CONNECTED;
}

std::size_t NatsTransport::max_payload_bytes() const noexcept {
  std::shared_lock lk(core_->conn_mu);
  if (core_->nc) {
    const std::int64_t max = natsConnection_GetMaxPayload(core_->nc);
    if (max > 0) core_->max_payload.store(static_cast<std::size_t>(max));
  }
  return core_->max_payload.load();
}

namespace {

/// Builds a nats.c message after checking subject, reply, headers and size.
Result<MsgPtr> make_message(natsConnection* nc, const sdk::Message& msg) {
  if (!valid_subject(msg.subject, false))
    return fail(ErrorCode::InvalidArgument, "invalid subject '" + msg.subject + "'", "subject");
  if (!msg.reply.empty() && !valid_subject(msg.reply, false))
    return fail(ErrorCode::InvalidArgument, "invalid reply subject '" + msg.reply + "'", "reply");
  for (const auto& [k, v] : msg.headers) {
    if (!valid_header_name(k))
      return fail(ErrorCode::InvalidArgument, "invalid header name '" + k + "'", "headers");
    if (!valid_header_value(v))
      return fail(ErrorCode::InvalidArgument, "header '" + k + "' has a line break", "headers");
    if (blank_header_value(v))
      return fail(ErrorCode::InvalidArgument,
                  "header '" + k + "' is empty; nats.c receivers cannot parse empty values",
                  "headers");
  }
  const std::int64_t max = natsConnection_GetMaxPayload(nc);
  const std::size_t size = msg.body.size() + header_bytes(msg);
  if (msg.body.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      (max > 0 && size > static_cast<std::size_t>(max)))
    return fail(ErrorCode::InvalidArgument,
                "message on " + msg.subject + " is " + std::to_string(size) +
                    " bytes (body and headers); the server accepts at most " +
                    std::to_string(max));
  natsMsg* raw = nullptr;
  natsStatus s = natsMsg_Create(&raw, msg.subject.c_str(),
                                msg.reply.empty() ? nullptr : msg.reply.c_str(),
                                msg.body.data(), static_cast<int>(msg.body.size()));
  if (s != NATS_OK) return fail(op_error_code(s), describe(s, "message on " + msg.subject));
  MsgPtr m(raw);
  for (const auto& [k, v] : msg.headers) {
    s = natsMsgHeader_Add(m.get(), k.c_str(), v.c_str());
    if (s != NATS_OK)
      return fail(ErrorCode::InvalidArgument, describe(s, "header '" + k + "'"), "headers");
  }
  return m;
}

}  // namespace

Result<void> NatsTransport::do_publish(const sdk::Message& msg) {
  std::shared_lock lk(core_->conn_mu);
  natsConnection* nc = core_->nc;
  if (!nc || core_->closing)
    return fail(ErrorCode::Unavailable, core_->closing ? "transport is closed" : "not connected");
  auto m = make_message(nc, msg);
  if (!m) return fail(m.error());
  const natsStatus s = natsConnection_PublishMsg(nc, m->get());
  if (s != NATS_OK) return fail(op_error_code(s), describe(s, "publish to " + msg.subject));
  return {};
}

Result<std::unique_ptr<sdk::Subscription>> NatsTransport::do_subscribe(
    const std::string& subject, const std::string& queue_group, sdk::MessageHandler handler) {
  return do_subscribe_limited(subject, queue_group, std::move(handler), sdk::SubscribeOptions{});
}

Result<std::unique_ptr<sdk::Subscription>> NatsTransport::do_subscribe_limited(
    const std::string& subject, const std::string& queue_group, sdk::MessageHandler handler,
    const sdk::SubscribeOptions& options) {
  if (options.pending_messages < 0 || options.pending_bytes < 0)
    return fail(ErrorCode::InvalidArgument, "pending limits must not be negative", "options");
  if (!valid_subject(subject, true))
    return fail(ErrorCode::InvalidArgument, "invalid subject '" + subject + "'", "subject");
  if (!queue_group.empty() && !valid_subject(queue_group, false))
    return fail(ErrorCode::InvalidArgument, "invalid queue group '" + queue_group + "'",
                "queue_group");
  if (!handler) return fail(ErrorCode::InvalidArgument, "handler is empty", "handler");

  std::shared_lock lk(core_->conn_mu);
  natsConnection* nc = core_->nc;
  if (core_->closing) return fail(ErrorCode::Unavailable, "transport is closed");
  if (!nc && !core_->retry) return fail(ErrorCode::Unavailable, "not connected");

  auto sub_core =
      std::make_shared<SubCore>(log(), subject, queue_group, std::move(handler), core_->retired);
  sub_core->limits = options;
  sub_core->token = CallbackTargets::instance().add(sub_core);
  if (!nc) {
    // No connection object while the redial waits for the broker to accept the credentials:
    // kept, and subscribed on the connection the redial makes (as nats.c does for
    // subscriptions made while reconnecting).
    std::lock_guard slk(core_->subs_mu);
    core_->subs.push_back(sub_core);
    return std::unique_ptr<sdk::Subscription>(std::make_unique<NatsSubscription>(sub_core));
  }
  const std::string error_before = last_error_text(nc);
  natsSubscription* sub = nullptr;
  const natsStatus s =
      queue_group.empty()
          ? natsConnection_Subscribe(&sub, nc, subject.c_str(), on_message, sub_core->token)
          : natsConnection_QueueSubscribe(&sub, nc, subject.c_str(), queue_group.c_str(),
                                          on_message, sub_core->token);
  if (s != NATS_OK) {
    CallbackTargets::instance().remove(sub_core->token);
    return fail(op_error_code(s), describe(s, "subscribe to " + subject));
  }
  if (const natsStatus ls = apply_limits(sub, options); ls != NATS_OK)
    log().warn("transport=nats event=pending_limits_not_set subject=" + subject + " error=\"" +
               describe(ls, "set pending limits") + "\"");
  {
    std::lock_guard slk(sub_core->mu);
    sub_core->sub = sub;
    sub_core->on = nc;
    sub_core->has_complete_cb =
        natsSubscription_SetOnCompleteCB(sub, on_sub_complete, sub_core->token) == NATS_OK;
  }
  auto result = std::make_unique<NatsSubscription>(sub_core);

  // The broker answers a refused SUB with an asynchronous -ERR before the PONG of a flush, so a
  // round trip tells whether it was accepted. Skipped while disconnected (nats.c re-sends the
  // subscription on reconnect; a refusal is then only logged by the error handler).
  if (natsConnection_Status(nc) == NATS_CONN_STATUS_CONNECTED &&
      natsConnection_FlushTimeout(nc, kSubscribeCheckMs) == NATS_OK) {
    const std::string error_after = last_error_text(nc);
    if (error_after != error_before &&
        error_after.find("Subscription to \"" + subject + "\"") != std::string::npos) {
      result.reset();
      return fail(ErrorCode::PermissionDenied, "subscribe to " + subject + ": " + error_after);
    }
  }

  {
    // close() sets `closing` before it collects the subscriptions under subs_mu, so a
    // subscription is either collected and shut by close() or refused here.
    std::lock_guard slk(core_->subs_mu);
    if (!core_->closing) {
      auto& subs = core_->subs;
      subs.erase(
          std::remove_if(subs.begin(), subs.end(), [](const auto& w) { return w.expired(); }),
          subs.end());
      subs.push_back(sub_core);
      return std::unique_ptr<sdk::Subscription>(std::move(result));
    }
  }
  result.reset();
  return fail(ErrorCode::Unavailable, "transport is closed");
}

Result<sdk::Message> NatsTransport::do_request(const sdk::Message& msg,
                                               std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0)
    return fail(ErrorCode::InvalidArgument, "request timeout must be positive");
  std::shared_lock lk(core_->conn_mu);
  natsConnection* nc = core_->nc;
  if (!nc || core_->closing)
    return fail(ErrorCode::Unavailable, core_->closing ? "transport is closed" : "not connected");
  if (natsConnection_Status(nc) != NATS_CONN_STATUS_CONNECTED)
    return fail(ErrorCode::Unavailable, "not connected (reconnecting); request to " +
                                            msg.subject + " not sent");
  auto m = make_message(nc, msg);
  if (!m) return fail(m.error());
  natsMsg* reply = nullptr;
  const natsStatus s = natsConnection_RequestMsg(&reply, nc, m->get(), timeout.count());
  MsgPtr reply_owner(reply);
  switch (s) {
    case NATS_OK: {
      std::string header_error;
      sdk::Message m = to_message(reply, &header_error);
      if (std::uint64_t hidden = 0; !header_error.empty() && traffic_log_budget().take(&hidden))
        log().warn("transport=nats event=bad_headers subject=" + msg.subject + " error=\"" +
                   header_error + "\"" + common::LogBudget::suffix(hidden));
      return m;
    }
    case NATS_TIMEOUT:
      return fail(ErrorCode::Timeout, "no reply on " + msg.subject + " within " +
                                          std::to_string(timeout.count()) + " ms");
    case NATS_NO_RESPONDERS:
      return fail(ErrorCode::Unavailable, "no responders on " + msg.subject);
    default:
      return fail(op_error_code(s), describe(s, "request to " + msg.subject));
  }
}

Result<void> NatsTransport::do_flush(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0)
    return fail(ErrorCode::InvalidArgument, "flush timeout must be positive");
  std::shared_lock lk(core_->conn_mu);
  natsConnection* nc = core_->nc;
  if (!nc || core_->closing)
    return fail(ErrorCode::Unavailable, core_->closing ? "transport is closed" : "not connected");
  if (natsConnection_Status(nc) != NATS_CONN_STATUS_CONNECTED)
    return fail(ErrorCode::Unavailable, "not connected (reconnecting)");
  const natsStatus s = natsConnection_FlushTimeout(nc, timeout.count());
  if (s == NATS_OK) return {};
  if (s == NATS_TIMEOUT)
    return fail(ErrorCode::Timeout,
                "flush not acknowledged within " + std::to_string(timeout.count()) + " ms");
  return fail(ErrorCode::Unavailable, describe(s, "flush"));
}

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

  {
    std::lock_guard lk(c.state_mu);
    c.close_state = Core::CloseState::Closed;
  }
  c.state_cv.notify_all();
}

}  // namespace mesh::transports::nats
