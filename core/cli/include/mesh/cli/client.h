// The operator API client: loads the transport plugin, connects to the broker and sends
// `mesh.api.<operation>` requests (docs/protocol.md "API").
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "mesh/common/config.h"
#include "mesh/common/trust.h"
#include "mesh/loader/loader.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/transport.h"
#include "mesh/sdk/value.h"

namespace mesh::cli {

struct ClientOptions {
  std::string plugin_dir;
  std::string transport_plugin = "nats";
  /// The transport's config table (without `plugin`); checked against the plugin's schema here.
  sdk::Value transport_config;
  /// The --config file it came from, if any (errors then name its file and line).
  std::optional<common::ConfigFile> config_file;
  /// For messages: the servers, as the operator gave them.
  std::string servers;
  /// How long to wait for the broker connection and for each reply.
  std::chrono::milliseconds timeout{5000};
  /// How long after the first try's `timeout` Client::call() keeps asking again while the answer
  /// says "try again" and asking again is safe (decision record 193). 0: one try (but see call()).
  std::chrono::milliseconds retry_for{10'000};
  /// The operator identity every request is signed with (docs/protocol.md "Trust"); without
  /// one, requests go unsigned and the control plane refuses them.
  std::optional<trust::OperatorIdentity> identity;
  /// The control plane's Ed25519 public key (raw 32 bytes) every reply must be signed with for
  /// the request it answers (decision record 31). Empty: no reply is believed.
  std::string control_key;
  /// The operator identity file `control_key` came from ("" when it came from --control-key or
  /// NOX_MESH_CONTROL_KEY). A reply signed with a rotated key whose Mesh-Key-Chain leads from
  /// `control_key` is believed, and this file's control_key is rewritten (atomically, 0600) to
  /// the new key (decision record 98); with "" the new key is used for this run only.
  std::string identity_path;
};

namespace detail {

/// How asking an operation again is safe (docs/protocol.md "Operations, roles and retries"): a
/// read changes nothing (asked anew, with a fresh nonce); an idempotent write (declare, rollback,
/// deploy, pipeline.run) keeps its answer with its nonce (decision 28: the same bytes get the
/// first answer); any other write may be asked again only when it is known that nothing of it ran.
enum class ApiKind { read, write, idempotent };
/// The kind of `operation` ("deploy", "nodes", ...); an unknown name is a write. Thread-safe.
ApiKind api_kind(std::string_view operation) noexcept;

/// What to do after a try that did not give an answer: stop, send the very same signed bytes
/// again, or sign a new request (fresh nonce) and send that.
enum class Retry { no, same, fresh };
/// The decision for an operation of `kind` whose try ended in `e` — an error the control plane
/// itself sent, verified (`replied`), or no reply at all (a transport error) — when a copy of the
/// request whose outcome is not known was sent before (`unknown`). Only Unavailable, Transient
/// and Timeout are asked again. Pure; thread-safe.
Retry retry_after(ApiKind kind, const sdk::Error& e, bool replied, bool unknown) noexcept;
/// The transport error of a request nobody took (no responders, not sent, not connected).
bool not_received(const sdk::Error& e) noexcept;
/// The control plane's refusal of a request before it handled it: its nonce could not be
/// remembered ("the request's nonce cannot be checked"), or the signer's replay cache is full.
bool not_handled(const sdk::Error& e) noexcept;
/// The refusal of an idempotent request seen before whose answer is not stored (yet).
bool answer_not_stored_yet(const sdk::Error& e) noexcept;

}  // namespace detail

class Client {
 public:
  /// Loads the transport (errors: InvalidArgument naming the plugin file and the reason) and
  /// connects (Unavailable / Timeout naming the servers; InvalidArgument for a bad URL).
  static sdk::Result<std::unique_ptr<Client>> connect(const ClientOptions& options);
  ~Client();

  /// Sends one API request, signed with the identity, and waits for the reply. While the answer
  /// says "try again" (no reply, no control plane, `unavailable`, `transient`) and asking again is
  /// safe for the operation (detail::retry_after), asks again after 0.25-2 s, until
  /// `timeout + retry_for` after the start (not for a call bound to one instance: set_instance; a
  /// request nobody took — no responders — only after set_retry_for_at_least()).
  /// When it gives up, the error says whether anything was written: "nothing was written: run it
  /// again" when that is known, "... may have been written; see ..." (Timeout) for an idempotent
  /// write whose first copy's outcome stayed unknown. The reply is
  /// believed only when its Mesh-Reply-Signature verifies with `control_key` for this very
  /// request (subject, nonce, body), or with the newer key its Mesh-Key-Chain leads to from
  /// `control_key` (which is then pinned, see ClientOptions::identity_path): an unsigned, forged or replayed reply (someone else on the
  /// broker answering first) is Failed, "the reply ... is not trusted", and nothing in it is
  /// used. Errors: Timeout or Unavailable (no reply, no responders: the message names the
  /// servers); Failed (reply not trusted); the control plane's (verified) error reply decoded into
  /// an Error with its code, message and path; when `refusal` is given, the whole (verified)
  /// `error` object of such a reply is copied there — declare's "diagnostics" (docs/protocol.md
  /// "API"). Not thread-safe with itself.
  sdk::Result<sdk::Value> call(std::string_view operation, const sdk::Value& params,
                               sdk::Value* refusal = nullptr);

  /// Raises the time each later call() waits for its reply to at least `timeout` (an operation
  /// that takes long on the control plane, e.g. publish checking and indexing a large package).
  /// Never lowers it. Not thread-safe with call().
  void set_timeout_at_least(std::chrono::milliseconds timeout) noexcept {
    if (options_.timeout < timeout) options_.timeout = timeout;
  }
  /// Raises how long later call()s keep asking again to at least `retry_for` (`mesh deploy
  /// --wait D`: D). Never lowers it. Not thread-safe with call().
  void set_retry_for_at_least(std::chrono::milliseconds retry_for) noexcept {
    if (options_.retry_for < retry_for) options_.retry_for = retry_for;
    retry_for_raised_ = true;
  }

  /// Sends every later call() to control-plane instance `instance` only, on its own subject
  /// (protocol::instance_subject; decision record 170), instead of the queue group: for a
  /// sequence of calls that must reach the instance holding their state (a `mesh publish`
  /// upload's spool file). `instance` must be protocol::valid_instance_id (InvalidArgument
  /// otherwise, nothing changed); "" goes back to the queue group. A call whose instance does not
  /// answer fails with Unavailable "… went to control plane instance …, which did not answer
  /// (…) (the whole was not sent)" (Timeout when its last part was taken but not answered in
  /// time). Not thread-safe with call().
  sdk::Result<void> set_instance(std::string instance);

  /// The largest message the broker takes, in bytes (the transport's max_payload_bytes(); 1 MiB
  /// when it does not say). Thread-safe.
  std::size_t max_payload_bytes() const noexcept {
    const std::size_t n = transport_ ? static_cast<std::size_t>(transport_->max_payload_bytes()) : 0;
    return n > 0 ? n : std::size_t{1} << 20;
  }

 private:
  Client() = default;
  /// trust::verify_reply with options_.control_key, following a key rotation (see call()).
  sdk::Result<void> verify_with_rotation(const sdk::Message& reply, const sdk::Message& request);
  ClientOptions options_;
  std::string instance_;  ///< set_instance(): "" the queue group
  /// set_retry_for_at_least() was called (an explicit --wait): a request nobody took (no
  /// responders) is asked again too, so that a control plane's restart within the wait is ridden out.
  bool retry_for_raised_ = false;
  loader::LoadedPlugin plugin_;
  std::shared_ptr<sdk::Transport> transport_;
};

}  // namespace mesh::cli
