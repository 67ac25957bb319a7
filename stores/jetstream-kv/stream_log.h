// The `jetstream-kv` store's one JetStream stream (docs/decisions/0087): a nats.c connection,
// the stream made or found, messages read by sequence from the stream leader, and publishes with
// JetStream's compare-and-swap (Nats-Expected-Last-Subject-Sequence).
//
// Internal to the plugin. Thread safety: none; the store serialises every call with its mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
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
  /// credentials), InvalidArgument (a stream of that name with other subjects),
  /// FailedPrecondition (path "replicas": the stream has another replica count than `replicas`).
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

 private:
  StreamLog() = default;
  sdk::Result<void> ensure_stream(const LogSettings& settings);

  __natsConnection* nc_ = nullptr;
  __jsCtx* js_ = nullptr;
  std::string stream_;
  std::string op_subject_;
  std::int64_t created_ns_ = 0;
  std::int64_t timeout_ms_ = 5000;
};

}  // namespace mesh::stores::jetstream_kv
