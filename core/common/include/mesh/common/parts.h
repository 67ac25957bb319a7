// Messages larger than the broker's message limit (docs/protocol.md "Messages in parts",
// decision record 33): one mechanism for every kind of message. A whole message that does not
// fit is sent as parts on the same subject; each part carries every header of the whole (its
// signature included) plus the part headers below, and a slice of the body. The receiver
// reassembles the parts in a bounded buffer, checks the SHA-256 of the whole, and only then
// hands the whole message to the normal checks (size against the assembled limit, protocol
// version, proof, JSON). Nothing parses a part.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "mesh/sdk/result.h"
#include "mesh/sdk/transport.h"

namespace mesh::protocol::parts {

inline constexpr const char* kHeaderParts = "Mesh-Parts";          ///< number of parts, 2..kMaxParts
inline constexpr const char* kHeaderPart = "Mesh-Part";            ///< index of this part, 0-based
inline constexpr const char* kHeaderPartsId = "Mesh-Parts-Id";     ///< 16-64 chars [0-9a-zA-Z], per whole
inline constexpr const char* kHeaderPartsSize = "Mesh-Parts-Size"; ///< bytes of the whole body
inline constexpr const char* kHeaderPartsDigest = "Mesh-Parts-Digest";  ///< SHA-256 hex of the whole body
/// Mesh-Status of the reply to a part that did not complete its whole ("send the next one").
inline constexpr const char* kStatusPart = "part";

/// Default bound of one reassembled message (64 MiB); the control plane's `limits.max_assembled`.
inline constexpr std::size_t kDefaultMaxAssembled = 64u << 20;
inline constexpr std::size_t kMaxParts = 100000;
/// Room kept free in every part for what the transport adds around the headers.
inline constexpr std::size_t kPartSlack = 512;

/// True when `m` carries a Mesh-Parts header (it is a part, never a whole).
bool is_part(const sdk::Message& m) noexcept;

/// Bytes of `m` as the broker counts them: body plus the NATS header block.
std::size_t wire_size(const sdk::Message& m) noexcept;

/// Splits `whole` into parts that each fit `max_payload` bytes (wire_size). A whole that fits
/// is returned alone, unchanged. All parts get a fresh Mesh-Parts-Id. Errors: InvalidArgument
/// when the headers alone leave no room for a body, or more than kMaxParts would be needed.
/// Thread-safe (pure).
sdk::Result<std::vector<sdk::Message>> split(const sdk::Message& whole, std::size_t max_payload);

/// Bounds of a Reassembler.
struct Limits {
  std::size_t max_whole = kDefaultMaxAssembled;     ///< largest whole body accepted
  std::size_t max_buffered = kDefaultMaxAssembled;  ///< all incomplete wholes together, bytes
  std::size_t max_pending = 64;                     ///< incomplete wholes at once
  std::size_t max_pending_per_sender = 4;           ///< incomplete wholes per subject
  std::chrono::milliseconds timeout{30'000};        ///< an incomplete whole is dropped after this
  std::string limit_key = "limits.max_assembled";   ///< named in the "too large" refusal
};

/// Collects parts into whole messages. Keyed by subject and Mesh-Parts-Id, so a sender (whose
/// subject is its own) can only fill its own assemblies. Thread-safe.
class Reassembler {
 public:
  explicit Reassembler(Limits limits) : limits_(std::move(limits)) {}

  /// Takes one part. Returns the whole message once `part` completed it (subject and headers of
  /// the parts without the part headers, the body joined in index order, the reply subject of
  /// `part`), or std::nullopt while parts are missing. Errors, after which that whole is
  /// forgotten: InvalidArgument (bad part headers, parts that disagree, a whole over
  /// Limits::max_whole — the message names the limit and Limits::limit_key), PermissionDenied
  /// (the joined body does not match Mesh-Parts-Digest: a corrupted or forged part), Transient
  /// (the buffer is full: busy, try later).
  sdk::Result<std::optional<sdk::Message>> add(const sdk::Message& part, std::int64_t now_ms);

  /// Incomplete wholes held now (for tests and logs).
  std::size_t pending() const;

 private:
  struct Assembly {
    std::size_t total = 0;
    std::size_t size = 0;
    std::string digest;
    std::vector<std::pair<std::string, std::string>> headers;  // the whole's, part headers removed
    std::map<std::size_t, std::string> bodies;
    std::size_t received = 0;
    std::int64_t started_ms = 0;
  };
  void expire(std::int64_t now_ms);

  Limits limits_;
  mutable std::mutex mu_;
  std::map<std::string, Assembly> open_;  // subject + "\n" + id
  std::size_t buffered_ = 0;
};

/// How request() sends and waits.
struct RequestOptions {
  std::chrono::milliseconds timeout{5000};  ///< per part, and for the reply
  /// "" (the default): the first part goes to the whole's subject (the control plane's queue
  /// group) and, when its answer names the instance that took it (protocol::kHeaderInstance),
  /// every later part to that instance's subject (protocol::instance_subject). Else an instance
  /// id (protocol::valid_instance_id): every part, the first included, goes to that instance's
  /// subject and nothing is sent again elsewhere (`mesh publish` keeping an upload on the
  /// instance that holds its spool file).
  std::string instance;
  /// The reply may itself come in parts: it is then taken on a private inbox
  /// `<inbox_prefix>.parts.<random>` (a subscription made for this request) instead of the
  /// transport's request inbox.
  bool reply_in_parts = false;
  std::string inbox_prefix = "_INBOX";
  Limits reply_limits{};
};

/// Sends `whole` as a request: alone when it fits the transport's max_payload_bytes(), else in
/// parts — each part but the last a request whose reply must be Mesh-Status `part` (any other
/// reply ends the request with Unavailable naming the part and what was answered: the receiver
/// refused), the last one answered by the real reply. The subject of the whole stays the one
/// the message's proof covers; where the parts go is RequestOptions::instance's rule (decision
/// record 170: the parts of one whole all reach the one control-plane instance that took the
/// first).
///
/// When a part before the last gets no answer within the timeout, or, once an instance took
/// the first part, no responders on that instance's subject (it stopped, or was killed) — so that
/// the last part was never handled and no instance can hold the whole — the whole is sent once
/// more from its first part, with a new Mesh-Parts-Id, through the whole's subject (another
/// instance of the queue group); logged (`parts resent`). The last part going unanswered within
/// the timeout is never sent again here: the whole may have been handled.
///
/// Returns the reply (reassembled when it came in parts). Errors: those of the transport
/// (Timeout, Unavailable, InvalidArgument) and of split() and Reassembler::add(); after the one
/// resend, the second sending's error prefixed "sent again, whole, after part k of N was not
/// answered by …", ending "(the whole was not sent; try again)" when that one too provably
/// reached no instance whole. With RequestOptions::instance, a part that instance does not answer
/// (no responders, or a part before the last unanswered in time) is Unavailable "… went to control
/// plane instance …, which did not answer (…) (the whole was not sent)", never sent again.
/// Thread-safe when the transport is.
sdk::Result<sdk::Message> request(sdk::Transport& transport, const sdk::Message& whole,
                                  const RequestOptions& options);

/// Publishes `whole`, in parts when it does not fit (no acknowledgements: the receiver
/// reassembles what arrives). Errors: those of split() and of the transport.
sdk::Result<void> publish(sdk::Transport& transport, const sdk::Message& whole);

}  // namespace mesh::protocol::parts
