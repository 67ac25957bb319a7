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

sdk::Result<sdk::Value> Client::call(std::string_view operation, const sdk::Value& params, sdk::Value* refusal) {
  const std::string subject = protocol::api_subject(operation);
  auto request = protocol::make_message(subject, params.to_json());
  if (options_.identity)
    trust::sign_request(request, trust::kHeaderOperator, options_.identity->name, options_.identity->secret_key,
                        common::now_ms());
  // Uploads (a large declaration) and replies (a large node view) larger than the broker's limit
  // go in parts (docs/protocol.md "Messages in parts").
  protocol::parts::RequestOptions opts;
  opts.timeout = options_.timeout;
  opts.reply_in_parts = true;
  opts.instance = instance_;
  auto send = [&] { return protocol::parts::request(*transport_, request, opts); };
  auto reply = send();
  // A declare or rollback whose answer was lost may have been written: it is sent once more,
  // byte for byte (same nonce), which the control plane answers with the first answer instead
  // of writing again (docs/protocol.md "Nonces"). If that fails too, the outcome is unknown.
  const bool mutating = operation == "declare" || operation == "rollback";
  auto may_have_been_written = [&](const sdk::Error& e) {
    return sdk::fail(ErrorCode::Timeout,
                     "the declaration may have been written; see mesh history " + params.get_string("node") +
                         " (no answer to the request, nor to the same request sent again: " + e.message + ")");
  };
  if (!reply && mutating && outcome_unknown(reply.error())) {
    const sdk::Error first = reply.error();
    const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
    while (!transport_->connected() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    reply = send();
    if (!reply) return may_have_been_written(outcome_unknown(reply.error()) ? reply.error() : first);
    const std::string* st = reply->header(protocol::kHeaderStatus);
    if (st && *st == "error" && reply->body.find("\"transient\"") != std::string::npos)
      return may_have_been_written(sdk::Error{ErrorCode::Transient, "the control plane does not know it yet", {}});
  }
  if (!reply) {
    sdk::Error e = reply.error();
    if (e.code == ErrorCode::Timeout)
      e.message = "no reply from the control plane within " +
                  common::format_duration(options_.timeout) + " (" + subject + " via " +
                  options_.servers + ")";
    else if (e.code == ErrorCode::Unavailable && e.message.find("control plane instance ") != std::string::npos)
      // The instance that took the start of the request (or holds the upload) went away.
      e.message = "the control plane did not take " + subject + " (via " + options_.servers + "): " + e.message;
    else if (e.code == ErrorCode::Unavailable)
      e.message = "no control plane is answering on " + options_.servers + " (" + subject +
                  "): " + e.message;
    return sdk::fail(std::move(e));
  }
  // Anyone on the operators' broker user can publish into this inbox: only a reply signed by the
  // control plane for this request is an answer (decision record 31).
  if (auto trusted = options_.control_key.empty()
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
