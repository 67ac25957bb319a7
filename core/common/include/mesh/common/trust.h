// Trust on the wire (docs/protocol.md "Trust", docs/security.md): the exact bytes every signed or
// MAC'd message covers, the headers that carry the proofs, a bounded replay cache, and the
// operator identity file. One definition of each signed layout, so that mesh-host, mesh-control
// and mesh sign and verify exactly the same bytes.
//
// Every signed text starts with a purpose line ("nox-mesh declaration v1", ...) so that a
// signature made for one kind of message can never be replayed as another kind.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "mesh/common/crypto.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/transport.h"

namespace mesh::trust {

inline constexpr const char* kHeaderSignature = "Mesh-Signature";  ///< Ed25519, hex (128 chars)
inline constexpr const char* kHeaderOperator = "Mesh-Operator";    ///< signer of an API request
inline constexpr const char* kHeaderTimestamp = "Mesh-Timestamp";  ///< Unix ms, decimal
inline constexpr const char* kHeaderNonce = "Mesh-Nonce";          ///< random, 16-64 chars
inline constexpr const char* kHeaderMac = "Mesh-MAC";              ///< crypto_auth tag, hex
/// The control plane's clock (Unix ms, decimal) on the refusal of a signed request whose
/// timestamp was outside the tolerance; signed (time_text) so the sender may correct its clock.
inline constexpr const char* kHeaderTime = "Mesh-Time";
/// The control plane's signature (Ed25519, hex) over reply_text() on every reply to a node's
/// signed request (mesh.latest.<node>, mesh.recovery.<node>): ok, none and error alike. A header
/// of its own, because Mesh-Signature on those replies already carries the declaration's (or
/// Mesh-Time's) signature.
inline constexpr const char* kHeaderReplySignature = "Mesh-Reply-Signature";

/// How far a signed request's timestamp may be from the receiver's clock (either way).
inline constexpr std::chrono::milliseconds kDefaultClockTolerance{60'000};

// --- signed texts ----------------------------------------------------------------------------

/// "nox-mesh declaration v1\n<node>\n<revision>\n" + body: what the control plane signs.
std::string declaration_text(std::string_view node, std::uint64_t revision, std::string_view body);
/// "nox-mesh report v1\n<subject>\n" + body: apply reports, drift reports and briefings (the
/// subject names the kind and the node; the body carries the revision or scan).
std::string report_text(std::string_view subject, std::string_view body);
/// "nox-mesh request v1\n<subject>\n<signer>\n<timestamp>\n<nonce>\n" + body: operator API
/// requests (signer = operator name) and a node's own requests (signer = node name).
std::string request_text(std::string_view subject, std::string_view signer,
                         std::string_view timestamp, std::string_view nonce, std::string_view body);
/// "nox-mesh heartbeat v1\n<node>\n<timestamp>\n" + body: what the heartbeat MAC covers.
std::string heartbeat_text(std::string_view node, std::string_view timestamp, std::string_view body);
/// "nox-mesh enrolment v1\n<node>\n" + body: the control plane's signed enrolment reply.
std::string enrol_reply_text(std::string_view node, std::string_view body);

/// "nox-mesh ack v1\n<subject>\n<request digest>\n<status>\n" + body: what the control plane
/// signs on its reply (ack or refusal) to a report request: the report's subject (kind and
/// node), the SHA-256 (hex) of the report's exact body (which names its revision or scan), the
/// reply's Mesh-Status, and the reply body. An ack therefore verifies only for the report it
/// answers, never for another one.
std::string ack_text(std::string_view subject, std::string_view request_digest_hex, std::string_view status,
                     std::string_view body);
/// "nox-mesh reply v1\n<subject>\n<nonce>\n<request digest>\n<status>\n" + body: what the
/// control plane signs on every reply to a node's signed request (mesh.latest.*,
/// mesh.recovery.*): the request's subject (kind and node), its Mesh-Nonce (fresh per request),
/// the SHA-256 (hex) of its exact body, the reply's Mesh-Status and the reply body. A reply
/// therefore verifies only for the one request it answers.
std::string reply_text(std::string_view subject, std::string_view nonce, std::string_view request_digest_hex,
                       std::string_view status, std::string_view body);
/// "nox-mesh time v1\n<subject>\n<nonce>\n<time ms>": what the control plane signs on the
/// refusal of a signed request whose timestamp was outside the tolerance (subject and nonce are
/// the refused request's, so the answer cannot be replayed to another request).
std::string time_text(std::string_view subject, std::string_view nonce, std::int64_t time_ms);

/// The per-node heartbeat MAC key: crypto_auth(master, "nox-mesh heartbeat key v1\n<node>\n
/// <generation>\n<public key hex>"). Bound to the node's identity, so re-enrolment (a new key and
/// generation) makes a new MAC key and the old one worthless.
std::string heartbeat_key(const std::string& master, std::string_view node, std::uint64_t generation,
                          std::string_view public_key_hex);

// --- messages ---------------------------------------------------------------------------------

/// Sets Mesh-Signature on a declaration for `node` at `revision` (body = m.body).
void sign_declaration(sdk::Message& m, std::string_view node, std::uint64_t revision,
                      const std::string& secret_key);
/// Checks Mesh-Signature of a declaration. Errors: PermissionDenied "unsigned declaration" /
/// "declaration signature does not verify".
sdk::Result<void> verify_declaration(const sdk::Message& m, std::string_view node,
                                     std::uint64_t revision, const std::string& public_key);

/// Sets Mesh-Signature over report_text(m.subject, m.body).
void sign_report(sdk::Message& m, const std::string& secret_key);
/// Errors: PermissionDenied ("unsigned ...", "signature does not verify").
sdk::Result<void> verify_report(const sdk::Message& m, const std::string& public_key);

/// Signs a request: sets `signer_header` (Mesh-Operator for operators; Mesh-Node for nodes),
/// Mesh-Timestamp (`now_ms`), a fresh Mesh-Nonce and Mesh-Signature over request_text().
void sign_request(sdk::Message& m, std::string_view signer_header, std::string_view signer,
                  const std::string& secret_key, std::int64_t now_ms);

struct RequestProof {
  std::string signer;
  std::int64_t timestamp_ms = 0;
  std::string nonce;
  std::string signature;  ///< raw 64 bytes
};
/// Reads the proof headers of a signed request. Errors: PermissionDenied naming what is missing
/// or malformed ("unsigned request: no Mesh-Signature header").
sdk::Result<RequestProof> read_request_proof(const sdk::Message& m, std::string_view signer_header);
/// True when the proof's signature verifies for `public_key` over this message.
bool verify_request(const sdk::Message& m, const RequestProof& proof, const std::string& public_key);

/// Sets Mesh-Signature on `reply`, the control plane's reply to the report request `request`,
/// over ack_text(request.subject, SHA-256 of request.body, reply's Mesh-Status ("" if none),
/// reply.body). `secret_key`: the control plane's (64 bytes). Thread-safe.
void sign_ack(sdk::Message& reply, const sdk::Message& request, const std::string& secret_key);
/// Checks that `reply` is the control plane's signed answer to `request` (see sign_ack).
/// `public_key`: the pinned control plane key (32 bytes). Errors: PermissionDenied ("unsigned
/// acknowledgement", "acknowledgement signature does not verify ..."). Thread-safe.
sdk::Result<void> verify_ack(const sdk::Message& reply, const sdk::Message& request, const std::string& public_key);

/// Sets Mesh-Reply-Signature on `reply`, the control plane's reply to the signed request
/// `request`, over reply_text(request.subject, request's Mesh-Nonce ("" if none), SHA-256 of
/// request.body, reply's Mesh-Status ("" if none), reply.body). Sign after every header and the
/// body are final. `secret_key`: the control plane's (64 bytes). Thread-safe.
void sign_reply(sdk::Message& reply, const sdk::Message& request, const std::string& secret_key);
/// Checks that `reply` is the control plane's signed answer to the signed request `request`
/// (see sign_reply). `public_key`: the pinned control plane key (32 bytes). Errors:
/// PermissionDenied ("unsigned reply: no Mesh-Reply-Signature header", "reply signature does
/// not verify ..."; also when `request` has no Mesh-Nonce). Not retryable as such: the caller
/// treats the reply as no answer and asks again later. Thread-safe.
sdk::Result<void> verify_reply(const sdk::Message& reply, const sdk::Message& request, const std::string& public_key);

/// Sets Mesh-Time (`time_ms`, Unix ms) and Mesh-Signature over time_text(request.subject,
/// request's Mesh-Nonce, time_ms) on `reply`, the refusal of `request`. Thread-safe.
void sign_time(sdk::Message& reply, const sdk::Message& request, std::int64_t time_ms, const std::string& secret_key);
/// The control plane's clock (Unix ms) from a refusal of `request` that carries Mesh-Time.
/// Errors: NotFound (no Mesh-Time header), PermissionDenied (unsigned, malformed, or not signed
/// by `public_key` for this request's subject and nonce). Thread-safe.
sdk::Result<std::int64_t> verify_time(const sdk::Message& reply, const sdk::Message& request,
                                      const std::string& public_key);

/// Sets Mesh-Timestamp and Mesh-MAC on a heartbeat.
void mac_heartbeat(sdk::Message& m, std::string_view node, const std::string& key, std::int64_t now_ms);
/// Checks a heartbeat's MAC; returns its Mesh-Timestamp. Errors: PermissionDenied.
sdk::Result<std::int64_t> verify_heartbeat(const sdk::Message& m, std::string_view node,
                                           const std::string& key);

// --- replay -----------------------------------------------------------------------------------

/// Remembers keys (operator + nonce, ...) for `window`, at most `capacity` at once. Thread-safe.
class ReplayCache {
 public:
  enum class Outcome { Fresh, Replay, Full };
  ReplayCache(std::size_t capacity, std::chrono::milliseconds window);
  /// Fresh (and remembered) when `key` was not seen within the window; Replay when it was;
  /// Full when `capacity` unexpired keys are held (the caller refuses: failing closed).
  Outcome check_and_remember(const std::string& key, std::int64_t now_ms);
  std::size_t size() const;

 private:
  void expire(std::int64_t now_ms);
  mutable std::mutex mu_;
  std::size_t capacity_;
  std::int64_t window_ms_;
  std::unordered_map<std::string, std::int64_t> seen_;   // key → expiry
  std::deque<std::pair<std::int64_t, std::string>> order_;  // (expiry, key), oldest first
};

// --- operator identities -----------------------------------------------------------------------

/// An operator identity as `mesh` holds it (the secret never leaves the operator's file).
struct OperatorIdentity {
  std::string name;
  std::string role;        ///< admin | deployer | reader
  std::string public_key;  ///< raw 32 bytes
  std::string secret_key;  ///< raw 64 bytes (libsodium form; the file keeps the 32-byte seed)
  /// The control plane's Ed25519 public key (raw 32 bytes) that this operator's replies must be
  /// signed with (decision record 31); empty when the file names none (an identity written
  /// before signed API replies).
  std::string control_key;
};

/// True for operator names: 1-64 of [a-z0-9_-], starting with a letter or digit.
bool valid_operator_name(std::string_view name);
/// True for admin, deployer, reader.
bool valid_role(std::string_view role);

/// The identity file text (JSON, one line):
/// {"kind":"nox-mesh-operator","version":1,"name":…,"role":…,"public_key":hex,"secret_key":seed hex,
///  "control_key":hex} (control_key only when known).
std::string operator_identity_json(const OperatorIdentity& id);
/// Parses an identity file's text; `path` is used in messages. `control_key` is optional; when
/// present it must be 64 hex characters. Errors: InvalidArgument naming the file and the field.
sdk::Result<OperatorIdentity> parse_operator_identity(std::string_view text, const std::string& path);
/// Reads and parses an identity file. Errors: NotFound, PermissionDenied, InvalidArgument.
sdk::Result<OperatorIdentity> load_operator_identity(const std::string& path);

}  // namespace mesh::trust
