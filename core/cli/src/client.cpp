#include "mesh/cli/client.h"

#include <chrono>
#include <thread>

#include "mesh/common/error_text.h"
#include "mesh/common/text.h"
#include "mesh/common/clock.h"
#include "mesh/common/duration.h"
#include "mesh/common/json.h"
#include "mesh/common/fs.h"
#include "mesh/common/key_rotation.h"
#include "mesh/common/logging.h"

#include <spdlog/spdlog.h>
#include "mesh/common/parts.h"
#include "mesh/common/protocol.h"

namespace mesh::cli {

using sdk::ErrorCode;

namespace {
// True when a request may have reached the control plane although no answer came back: a
// timeout, or the link lost after sending. Not "no responders" (nobody received it) nor a
// request the transport says it did not send.
bool outcome_unknown(const sdk::Error& e) {
  if (e.code == ErrorCode::Timeout) return true;
  return e.code == ErrorCode::Unavailable && e.message.find("no responders") == std::string::npos &&
         e.message.find("not sent") == std::string::npos && e.message.find("not connected") == std::string::npos;
}
}  // namespace

sdk::Result<std::unique_ptr<Client>> Client::connect(const ClientOptions& options) {
  std::unique_ptr<Client> c(new Client());
  c->options_ = options;
  loader::LoadOptions lo;
  lo.role = "tool";
  auto plugin = loader::load_plugin(options.plugin_dir, "transport", options.transport_plugin, lo);
  if (!plugin)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "cannot load the " + options.transport_plugin + " transport: " +
                         plugin.error().message +
                         " (set --plugin-dir or NOX_MESH_PLUGIN_DIR to the plugin folder)");
  c->plugin_ = std::move(*plugin);
  c->transport_ = c->plugin_.as<sdk::Transport>();
  if (!c->transport_)
    return sdk::fail(ErrorCode::InvalidArgument, c->plugin_.path + " is not a transport plugin");
  const sdk::Schema& schema = c->transport_->config_schema();
  if (auto ok = sdk::validate_against(schema, options.transport_config, "transport"); !ok) {
    const sdk::Error& e = ok.error();
    if (options.config_file) return sdk::fail(options.config_file->error_at(e.path, e.message));
    return sdk::fail(ErrorCode::InvalidArgument, common::described(e), e.path);
  }
  if (auto ok = c->transport_->configure(sdk::apply_defaults(schema, options.transport_config)); !ok) {
    sdk::Error e = ok.error();
    e.message = "transport: " + common::described(e);
    return sdk::fail(std::move(e));
  }
  if (auto ok = c->transport_->connect(options.timeout, /*retry_in_background=*/false); !ok) {
    sdk::Error e = ok.error();
    if (e.code != ErrorCode::InvalidArgument && e.code != ErrorCode::PermissionDenied)
      e.code = ErrorCode::Unavailable;
    e.message = "cannot reach the broker at " + options.servers + ": " + e.message;
    if (e.code == ErrorCode::PermissionDenied)
      e.message += " (the broker refused this client's credentials; with broker permissions on, "
                   "mesh connects as the operators' user: --config FILE or NOX_MESH_CONFIG naming a "
                   "file whose [transport] table has user = \"mesh-operator\" and password_file)";
    return sdk::fail(std::move(e));
  }
  return c;
}

Client::~Client() {
  if (transport_) transport_->close();
}

sdk::Result<void> Client::verify_with_rotation(const sdk::Message& reply, const sdk::Message& request) {
  auto check = common::check_with_rotation(reply, options_.control_key, [&](const std::string& key) {
    return trust::verify_reply(reply, request, key);
  });
  if (!check.chain_refused.empty() && !check.verified)
    return sdk::fail(check.verified.error().code,
                     check.verified.error().message + "; its key chain is not believed: " + check.chain_refused);
  if (check.new_key.empty()) return std::move(check.verified);
  const std::string old_hex = common::to_hex(options_.control_key);
  options_.control_key = check.new_key;
  if (options_.identity_path.empty() || !options_.identity) {
    common::logger()->warn("control key rotated old_key={} new_key={}: used for this run; update --control-key or "
                           "NOX_MESH_CONTROL_KEY to the new key (the control plane's control.pub)",
                           old_hex, common::to_hex(check.new_key));
    return std::move(check.verified);
  }
  options_.identity->control_key = check.new_key;
  if (auto ok = common::write_file_atomic(options_.identity_path,
                                          trust::operator_identity_json(*options_.identity) + "\n", 0600);
      !ok)
    common::logger()->warn("control key rotated old_key={} new_key={}, but {} was not rewritten: {}", old_hex,
                           common::to_hex(check.new_key), options_.identity_path, ok.error().message);
  else
    common::logger()->warn("control key rotated old_key={} new_key={}: {} now pins the new key", old_hex,
                           common::to_hex(check.new_key), options_.identity_path);
  return std::move(check.verified);
}

sdk::Result<void> Client::set_instance(std::string instance) {
  if (!instance.empty() && !protocol::valid_instance_id(instance))
    return sdk::fail(ErrorCode::InvalidArgument,
                     "'" + common::printable(instance, 64) + "' is not a control plane instance id (32 lower-case hex)");
  instance_ = std::move(instance);
  return {};
}

namespace detail {

ApiKind api_kind(std::string_view operation) noexcept {
  // As the control plane's table of operations says (core/control/src/operations.cpp; a unit test
  // compares this with docs/protocol.md's table, which another compares with that table).
  static constexpr std::string_view kIdempotent[] = {"declare", "rollback", "deploy", "pipeline.run"};
  static constexpr std::string_view kReads[] = {"token.list", "operator.list", "nodes",         "node.show",
                                                 "report",     "history",       "module.list",   "module.show",
                                                 "assignments", "deploy.show",  "repository.key", "pipeline.show"};
  for (auto op : kIdempotent)
    if (op == operation) return ApiKind::idempotent;
  for (auto op : kReads)
    if (op == operation) return ApiKind::read;
  return ApiKind::write;
}

bool not_received(const sdk::Error& e) noexcept {
  return (e.code == ErrorCode::Unavailable || e.code == ErrorCode::Timeout) && !outcome_unknown(e);
}

bool not_handled(const sdk::Error& e) noexcept {
  return e.message.rfind("the request's nonce cannot be checked", 0) == 0 ||
         e.message.find("its replay cache is full") != std::string::npos;
}

bool answer_not_stored_yet(const sdk::Error& e) noexcept {
  return e.code == ErrorCode::Transient && e.message.find("its outcome is not known yet") != std::string::npos;
}

Retry retry_after(ApiKind kind, const sdk::Error& e, bool replied, bool unknown) noexcept {
  const bool again = e.code == ErrorCode::Unavailable || e.code == ErrorCode::Transient || e.code == ErrorCode::Timeout;
  if (!again) return Retry::no;
  if (!replied) {
    // No answer: nobody took it (no responders, not sent), or it may have been taken (timeout,
    // the link lost after sending).
    if (not_received(e)) return kind == ApiKind::idempotent ? Retry::same : Retry::fresh;
    if (kind == ApiKind::read) return Retry::fresh;
    return kind == ApiKind::idempotent ? Retry::same : Retry::no;
  }
  // A verified refusal that says "try again".
  if (not_handled(e))  // refused before it was handled: nothing of it ran
    return kind == ApiKind::idempotent && unknown ? Retry::same : Retry::fresh;
  if (answer_not_stored_yet(e))  // the same bytes were seen, and no answer is stored
    return unknown ? Retry::same : Retry::fresh;
  if (kind == ApiKind::read) return Retry::fresh;
  // The handler failed (the store unavailable or busy): an idempotent request asks again with the
  // same bytes, which gets the stored answer if it was written after all (its answer is stored in
  // the same transaction), else "not known yet" — then nothing was written.
  return kind == ApiKind::idempotent ? Retry::same : Retry::no;
}

}  // namespace detail

sdk::Result<sdk::Value> Client::call(std::string_view operation, const sdk::Value& params, sdk::Value* refusal) {
  const std::string subject = protocol::api_subject(operation);
  const auto kind = detail::api_kind(operation);
  const auto start = std::chrono::steady_clock::now();
  auto sign = [&] {
    auto m = protocol::make_message(subject, params.to_json());
    if (options_.identity)
      trust::sign_request(m, trust::kHeaderOperator, options_.identity->name, options_.identity->secret_key,
                          common::now_ms());
    return m;
  };
  auto request = sign();
  auto signed_at = start;
  // Uploads (a large declaration) and replies (a large node view) larger than the broker's limit
  // go in parts (docs/protocol.md "Messages in parts").
  protocol::parts::RequestOptions opts;
  opts.timeout = options_.timeout;
  opts.reply_in_parts = true;
  opts.instance = instance_;
  // Asked again while the answer says "try again" and asking again is safe (decision record 193):
  // until timeout + retry_for after the start. A read is asked anew; a declare, rollback, deploy or
  // pipeline run (idempotent on its nonce: decision 28) with the very same bytes while its first
  // copy's outcome is not known, anew once it is known that nothing was written; any other write
  // only when nothing of it was handled. Not for a call bound to one instance (an upload in parts).
  const auto deadline = start + options_.timeout + options_.retry_for;
  constexpr auto kSameBytesFor = std::chrono::seconds(30);  // well within the clock tolerance (60 s)
  bool unknown = false;         // a copy of `request` was sent whose outcome is not known
  bool nothing_written = true;  // what was learnt so far proves that nothing was done
  int tries = 0;
  sdk::Result<sdk::Message> reply = sdk::fail(ErrorCode::Internal, "not sent");
  sdk::Error last{ErrorCode::Internal, "not sent", {}};
  bool last_replied = false;
  bool verified = false;  // the last reply verified (verify_with_rotation)
  for (;;) {
    ++tries;
    verified = false;
    last_replied = false;
    reply = protocol::parts::request(*transport_, request, opts);
    bool replied = false;
    if (reply) {
      // Anyone on the operators' broker user can publish into this inbox: only a reply signed by
      // the control plane for this request is an answer (decision record 31).
      if (options_.control_key.empty() || !verify_with_rotation(*reply, request)) break;  // judged below
      verified = true;
      const std::string* st = reply->header(protocol::kHeaderStatus);
      if (!st || *st != "error") break;
      auto body = common::parse_json(reply->body, common::JsonLimits{64 << 20, 64});
      const sdk::Value* err = body ? body->find("error") : nullptr;
      if (!err || !err->is_object()) break;
      last = sdk::Error{protocol::error_code_from_string(err->get_string("code")), err->get_string("message", "refused"),
                        err->get_string("path")};
      replied = true;
    } else {
      last = reply.error();
    }
    last_replied = replied;
    auto next = instance_.empty() ? detail::retry_after(kind, last, replied, unknown) : detail::Retry::no;
    // Nobody took it (no control plane subscribed, or a whole in parts not sent): asked again only
    // within an explicit wait (`--wait`), so that a mesh without a control plane says so at once.
    if (!replied && !retry_for_raised_ && (last.message.find("no responders") != std::string::npos ||
                                           last.message.find("not sent") != std::string::npos))
      next = detail::Retry::no;
    // What this try taught: a copy that may have run, or proof that nothing ran.
    if (!replied && !detail::not_received(last) && kind == detail::ApiKind::idempotent) unknown = true;
    if (kind != detail::ApiKind::read) {
      const bool proof = replied ? detail::not_handled(last) || (detail::answer_not_stored_yet(last) && !unknown)
                                 : detail::not_received(last);
      nothing_written = proof && !unknown;
    }
    if (next == detail::Retry::no) break;
    const auto now = std::chrono::steady_clock::now();
    const auto pause = std::chrono::milliseconds(std::min(2000, 250 << std::min(tries - 1, 3)));
    if (now + pause >= deadline) break;
    // The same bytes are refused as expired past the clock tolerance: while a copy's outcome is
    // unknown, that is where asking ends (it stays unknown); otherwise a fresh request is as good.
    if (next == detail::Retry::same && unknown && now - signed_at > kSameBytesFor) break;
    common::logger()->warn("no answer to {} ({}); asking again{} (try {})", subject, common::described(last),
                           next == detail::Retry::same ? " with the same request" : "", tries + 1);
    std::this_thread::sleep_for(pause);
    while (!transport_->connected() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (next == detail::Retry::fresh || (next == detail::Retry::same && std::chrono::steady_clock::now() - signed_at > kSameBytesFor)) {
      request = sign();
      signed_at = std::chrono::steady_clock::now();
    }
  }
  auto outcome_text = [&]() -> std::string {
    if (kind == detail::ApiKind::read) return "";
    if (nothing_written) return "; nothing was written: run it again";
    if (kind == detail::ApiKind::idempotent && unknown) return "";  // said below
    return "; whether it was done is not known: look before running it again";
  };
  if (!reply || last_replied) {
    sdk::Error e = last;
    const bool mutating = operation == "declare" || operation == "rollback";
    if (kind == detail::ApiKind::idempotent && unknown) {
      const std::string what = mutating ? "the declaration may have been written; see mesh history " + params.get_string("node")
                               : operation == "deploy" ? "the deploy may have been written; see mesh history of a node it selects"
                                                       : "the run may have been started; see mesh pipeline show";
      return sdk::fail(ErrorCode::Timeout, what + " (no answer to the request, nor to the same request sent again " +
                                               std::to_string(tries - 1) + " time(s): " + e.message + ")");
    }
    if (!last_replied) {
      if (e.code == ErrorCode::Timeout)
        e.message = "no reply from the control plane within " + common::format_duration(options_.timeout) + " (" +
                    subject + " via " + options_.servers + ")";
      else if (e.code == ErrorCode::Unavailable && e.message.find("control plane instance ") != std::string::npos)
        // The instance that took the start of the request (or holds the upload) went away.
        e.message = "the control plane did not take " + subject + " (via " + options_.servers + "): " + e.message;
      else if (e.code == ErrorCode::Unavailable)
        e.message = "no control plane is answering on " + options_.servers + " (" + subject + "): " + e.message;
    }
    if (e.code == ErrorCode::Unavailable || e.code == ErrorCode::Transient || e.code == ErrorCode::Timeout) {
      if (tries > 1) e.message += " (asked " + std::to_string(tries) + " times)";
      e.message += outcome_text();
    }
    if (last_replied && refusal) {
      // The verified error reply's whole error object (declare's diagnostics), as before.
      auto body = common::parse_json(reply->body, common::JsonLimits{64 << 20, 64});
      if (body)
        if (const sdk::Value* err = body->find("error"); err && err->is_object()) *refusal = *err;
    }
    return sdk::fail(std::move(e));
  }
  // Anyone on the operators' broker user can publish into this inbox: only a reply signed by the
  // control plane for this request is an answer (decision record 31).
  if (auto trusted = verified ? sdk::Result<void>()
                     : options_.control_key.empty()
                         ? sdk::Result<void>(sdk::fail(ErrorCode::PermissionDenied, "no control plane key to verify it with"))
                         : verify_with_rotation(*reply, request);
      !trusted)
    return sdk::fail(ErrorCode::Failed,
                     "the reply to " + subject + " is not trusted (" + trusted.error().message +
                         "): not believed, nothing in it was used. Someone else on the broker may be answering "
                         "in the control plane's place (docs/security.md); try again, and if it persists check "
                         "who holds the operators' broker credentials");
  const std::string* status = reply->header(protocol::kHeaderStatus);
  auto body = reply->body.empty() ? sdk::Result<sdk::Value>(sdk::Value::object())
                                  : common::parse_json(reply->body, common::JsonLimits{64 << 20, 64});
  if (!body)
    return sdk::fail(ErrorCode::Internal, "the control plane's reply to " + subject +
                                              " is not JSON: " + body.error().message);
  if (status && *status == "error") {
    const sdk::Value* err = body->find("error");
    if (!err || !err->is_object())
      return sdk::fail(ErrorCode::Internal, "the control plane refused " + subject);
    if (refusal) *refusal = *err;
    return sdk::fail(protocol::error_code_from_string(err->get_string("code")),
                     err->get_string("message", "refused"), err->get_string("path"));
  }
  if (auto v = protocol::check_version(*reply); !v) return sdk::fail(v.error());
  return std::move(*body);
}

}  // namespace mesh::cli
