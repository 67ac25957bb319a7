// The `jetstream-kv` store's one JetStream stream (docs/decisions/0087): a nats.c connection,
// the stream made or found, messages read by sequence from the stream leader, and publishes with
// JetStream's compare-and-swap (Nats-Expected-Last-Subject-Sequence).
//
// Internal to the plugin. Thread safety: none; the store serialises every call with its mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/sdk/result.h"

struct __natsConnection;
struct __jsCtx;

namespace mesh::stores::jetstream_kv {

/// How to reach the servers and which stream to use (the store's config, checked).
struct LogSettings {
  std::vector<std::string> servers;  ///< nats:// or tls:// URLs
  std::string user;
  std::string password;              ///< read from password_file
  std::string nkey_seed_path;
  std::string nkey_public;           ///< derived from the seed
  std::string tls_ca_path;
  std::string inbox_prefix;          ///< replies' subject prefix; empty: nats.c's "_INBOX"
  std::string prefix = "MESH_STORE"; ///< stream name and subject prefix
  int replicas = 1;                  ///< 1..5
  std::int64_t timeout_ms = 5000;    ///< each JetStream request
};

/// One message of the stream.
struct LogMessage {
  std::uint64_t seq = 0;
  std::string subject;
  std::string data;
};

class StreamLog {
 public:
  /// Connects (failing at once when no server answers: Unavailable naming the servers), then
  /// makes the stream or finds it. An existing stream's configuration is never changed.
  /// Errors: Unavailable (no server, JetStream not enabled), PermissionDenied (refused
  /// credentials, or the servers refused this user a JetStream subject of the stream: the
  /// message names the subject, the user and the stream, path "prefix"), InvalidArgument (a
  /// stream of that name with other subjects; path "replicas": more replicas than the cluster can
  /// place), FailedPrecondition (path "replicas": the stream has another replica count than
  /// `replicas`).
  ///
  /// Every method below fails with PermissionDenied, naming the subject, instead of Unavailable
  /// when its request timed out after the servers refused this connection a subject (a
  /// "Permissions Violation": nats-server does not answer the request itself).
  static sdk::Result<std::unique_ptr<StreamLog>> open(const LogSettings& settings);
  ~StreamLog();
  StreamLog(const StreamLog&) = delete;
  StreamLog& operator=(const StreamLog&) = delete;

  /// The stream's creation time (nanoseconds since the epoch, as the server says): its identity.
  std::int64_t created_ns() const noexcept { return created_ns_; }
  /// The subject of operations: "<prefix>.op".
  const std::string& op_subject() const noexcept { return op_subject_; }
  /// The subject of part `n` of operation `id`: "<prefix>.part.<id>.<n>".
  std::string part_subject(const std::string& id, std::uint64_t n) const;
  /// The largest message the servers take (bytes).
  std::size_t max_payload() const noexcept;

  /// The stream's first and last sequence (first 0 or last + 1: empty), one stream-info round
  /// trip. Errors: Unavailable; FailedPrecondition when the stream was made again since open.
  struct Bounds {
    std::uint64_t first = 0;
    std::uint64_t last = 0;
  };
  sdk::Result<Bounds> bounds();
  /// The message at `seq` from the stream leader; nullopt when it was deleted. Errors: Unavailable.
  sdk::Result<std::optional<LogMessage>> get(std::uint64_t seq);
  /// Calls `f` with every message from `from` to `to` (inclusive) in order, read through an
  /// ordered consumer (one subscription, flow-controlled: the fast way to replay a long log); a
  /// deleted message is simply not delivered. Stops at the first error of `f`. Errors:
  /// Unavailable (the consumer cannot be made, or a message does not come within the timeout).
  sdk::Result<void> scan(std::uint64_t from, std::uint64_t to,
                         const std::function<sdk::Result<void>(LogMessage&&)>& f);
  /// What a publish came to.
  struct Published {
    std::uint64_t seq = 0;      ///< its sequence when stored
    bool wrong_last = false;    ///< refused: another operation came after `expect_last`
  };
  /// Publishes `data` on `subject` with Nats-Msg-Id `msg_id` and, when `expect_last` is set,
  /// Nats-Expected-Last-Subject-Sequence (0 included: no message on the subject yet). Errors:
  /// Unavailable (it may or may not be stored: the caller looks for it by its id).
  sdk::Result<Published> publish(const std::string& subject, std::string_view data,
                                 std::optional<std::uint64_t> expect_last, const std::string& msg_id);
  /// Purges every message before `seq` (JetStream purge up to but not including it;
  /// stream_purge.cpp). Returns how many were purged. Errors: Unavailable.
  sdk::Result<std::uint64_t> purge_before(std::uint64_t seq);

  /// Counts a "Permissions Violation" of the servers, `text` being its message (nats.c's error
  /// callback calls it, on its own thread). Thread-safe.
  void note_violation(const std::string& text);

 private:
  StreamLog() = default;
  sdk::Result<void> ensure_stream(const LogSettings& settings);
  /// The number of permission violations so far (taken before a request).
  std::uint64_t violations() const;
  /// The error of a failed request `what` (status `s`, JetStream code `jerr`): PermissionDenied
  /// naming the refused subject when a violation came since `mark`, else as before
  /// (Unavailable, or PermissionDenied for NATS_NOT_PERMITTED).
  sdk::Error failure(int s, int jerr, const std::string& what, std::uint64_t mark) const;

  __natsConnection* nc_ = nullptr;
  __jsCtx* js_ = nullptr;
  std::string stream_;
  std::string op_subject_;
  std::int64_t created_ns_ = 0;
  std::int64_t timeout_ms_ = 5000;
  std::string who_;  ///< the user or nkey this connection authenticates as, for messages
  mutable std::mutex violations_mu_;
  std::uint64_t violations_ = 0;   ///< the servers' "Permissions Violation" errors so far
  std::string last_violation_;     ///< the text of the last one
};

}  // namespace mesh::stores::jetstream_kv
