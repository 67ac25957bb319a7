// `mesh-host enrol`: the enrolment exchange, believing only the control plane's signed answer
// (docs/security.md "Enrolment"), and the token's sources.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include <optional>

#include "mesh/common/crypto.h"
#include "mesh/host/identity.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/transport.h"
#include "mesh/sdk/value.h"

namespace mesh::host {

/// The answer to an enrolment request that this host believes.
struct EnrolAnswer {
  sdk::Message reply;     ///< the reply as received
  sdk::Value body;        ///< its JSON body (an object)
  bool accepted = false;  ///< true: the enrolment reply; false: a refusal (see `code`, `message`)
  sdk::ErrorCode code = sdk::ErrorCode::Failed;  ///< the refusal's code
  std::string message;    ///< the refusal's message, raw (print it through shown_remote())
  /// False only for a bare legacy token (no control plane key to check against): the first
  /// answer is taken on trust, as it always was for those.
  bool verified = true;
  std::size_t ignored = 0;  ///< replies that did not verify and were ignored
};

/// Publishes `request` (mesh.enrol) with a reply subject of its own under `inbox_prefix` and
/// waits up to `timeout` for an answer signed by `control_key` (raw 32 bytes, from the token):
/// an enrolment reply must carry that key in `control_key` and a Mesh-Signature over
/// trust::enrol_reply_text(node, body); a refusal must be signed for this very request
/// (trust::verify_ack). Replies that verify neither way (anyone on an open broker can answer) are
/// counted, logged (bounded and escaped) and ignored: the wait goes on for a verified one.
/// With an empty `control_key` (a legacy token) the first reply is taken, `verified` false.
/// While no verified answer came, the same request is published again every kEnrolResendEvery
/// (an answer can be lost; the control plane answers a repeat of an enrolment it made with the
/// same key again: decision record 133).
/// Errors: Timeout naming how many replies were ignored when no verified answer came;
/// Unavailable/PermissionDenied from the transport (subscribe, publish).
/// Blocks the calling thread; the transport must be connected.
inline constexpr std::chrono::milliseconds kEnrolResendEvery{2500};
sdk::Result<EnrolAnswer> enrol_exchange(sdk::Transport& transport, sdk::Message request, const std::string& node,
                                        const std::string& control_key, const std::string& inbox_prefix,
                                        std::chrono::milliseconds timeout);

/// An enrolment request ready to send, with the new key pair it names.
struct EnrolRequest {
  sdk::Message message;     ///< on mesh.enrol, Mesh-Node set; its reply subject is enrol_exchange's
  common::KeyPair keys;     ///< the node's new Ed25519 key pair (a new one for every enrolment)
  std::string control_key;  ///< the control plane key the token names (raw 32 bytes; "" legacy)
};

/// Builds the enrolment request of `node` for `token` ("<secret>.<control key>" as `mesh token
/// issue` prints it; a bare legacy secret is sent as is): a fresh key pair, the token sealed to
/// the control plane key it names, `host_version`. `flag` names where the token came from in
/// errors ("--token-file FILE"). Errors: InvalidArgument (path `flag`) when the token's key part
/// is not a control plane key. Thread-safe.
sdk::Result<EnrolRequest> make_enrol_request(const std::string& node, const std::string& token,
                                             const std::string& host_version, const std::string& flag);

/// What an accepted enrolment gives the node.
struct Enrolment {
  Identity identity;
  std::optional<std::string> broker_seed;  ///< the node's broker nkey seed, when the reply sealed one
};

/// Reads the accepted enrolment reply `body` (EnrolAnswer::body) for the request made with
/// `keys`: the control plane key, the heartbeat key and the broker nkey (both sealed to `keys`),
/// the generation; `enrolled_at_ms` is recorded as the enrolment time. Errors: InvalidArgument
/// (control_key not hex), Failed "enrolment reply carries no heartbeat key for this node's key" /
/// "enrolment reply carries a broker key this node cannot open". Thread-safe.
sdk::Result<Enrolment> read_enrolment(const std::string& node, const sdk::Value& body, const common::KeyPair& keys,
                                      std::int64_t enrolled_at_ms);

/// The token from `--token-file`: the file's first line ("-": standard input), trailing
/// whitespace removed. Errors: InvalidArgument (path "--token-file") when unreadable or empty.
sdk::Result<std::string> read_token_file(const std::string& path);

/// `text` made safe to print or log: at most `max_bytes` of it, every byte outside printable
/// ASCII (control characters, DEL, bytes >= 0x80) as \xNN, backslash as \\, and "…(N bytes)"
/// when cut. For values that came from outside the process.
// TODO: replace with common::printable (the shared escaping helper for logs and text output) once
// it is in core/common.
std::string shown_remote(std::string_view text, std::size_t max_bytes = 256);

}  // namespace mesh::host
