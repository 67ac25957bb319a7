// The handlers behind ControlPlane: one call per message, on a worker thread. Internal.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "mesh/control/control_plane.h"
#include "mesh/sdk/store.h"
#include "mesh/sdk/transport.h"
#include "mesh/sdk/value.h"

namespace mesh::control::detail {

class Service {
 public:
  using ContactSink = std::function<void(sdk::ContactUpdate&&)>;

  Service(std::shared_ptr<sdk::Store> store, std::shared_ptr<sdk::Transport> transport,
          const ControlOptions& options, ContactSink contacts);

  /// Handles one message completely: size, protocol version, JSON, fields, then the store; a
  /// request gets its reply here, a bad publish is logged and dropped. Never throws.
  void handle(const sdk::Message& message, std::int64_t received_ms) noexcept;

  /// The body limit in force: min(broker max_payload, limits.max_message).
  std::size_t body_limit() const noexcept;

  /// Replies to `request` with an error (no-op when it expects no reply) and logs the refusal
  /// with the subject and the field. Public for the queue's "busy" path.
  void refuse(const sdk::Message& request, const sdk::Error& error, bool quiet = false) noexcept;

 private:
  void dispatch(const sdk::Message& m, std::int64_t now_ms);
  void reply(sdk::Message&& reply) noexcept;
  void reply_ok(const sdk::Message& request, const sdk::Value& body);

  // Host messages (docs/protocol.md "Subjects").
  void on_latest(const sdk::Message& m, const std::string& node);
  void on_report(const sdk::Message& m, const std::string& node, const sdk::Value& body);
  void on_drift(const sdk::Message& m, const std::string& node, const sdk::Value& body);
  void on_heartbeat(const sdk::Message& m, const std::string& node, const sdk::Value& body,
                    std::int64_t now_ms);
  void on_recovery(const sdk::Message& m, const std::string& node);
  void on_enrol(const sdk::Message& m, const sdk::Value& body, std::int64_t now_ms);

  // Operator API (docs/protocol.md "API"): the one place requests are dispatched, so that the
  // verification of operator signatures and roles can be added in front of it.
  void on_api(const sdk::Message& m, std::string_view op, const sdk::Value& params,
              std::int64_t now_ms);
  sdk::Result<void> authorize(const sdk::Message& m, std::string_view op);

  sdk::Result<sdk::Value> api_token_issue(const sdk::Value& p, std::int64_t now_ms);
  sdk::Result<sdk::Value> api_token_list(const sdk::Value& p, std::int64_t now_ms);
  sdk::Result<sdk::Value> api_token_revoke(const sdk::Value& p, std::int64_t now_ms);
  sdk::Result<sdk::Value> api_nodes(const sdk::Value& p, std::int64_t now_ms);
  sdk::Result<sdk::Value> api_node_show(const sdk::Value& p, std::int64_t now_ms);
  sdk::Result<sdk::Value> api_declare(const sdk::Value& p, std::int64_t now_ms);
  sdk::Result<sdk::Value> api_report(const sdk::Value& p, std::int64_t now_ms);
  sdk::Result<sdk::Value> api_history(const sdk::Value& p, std::int64_t now_ms);
  sdk::Result<sdk::Value> api_rollback(const sdk::Value& p, std::int64_t now_ms);

  /// Writes a new revision of `node` whose resources are `resources` (one Store::declare), then
  /// pushes it on mesh.decl.<node>. A failed push is logged, not an error: the node fetches its
  /// latest declaration when it reconnects.
  sdk::Result<sdk::Value> declare(const std::string& node, const sdk::Value& resources,
                                  std::int64_t now_ms);
  sdk::Result<sdk::NodeRecord> enrolled(const std::string& node);

  std::shared_ptr<sdk::Store> store_;
  std::shared_ptr<sdk::Transport> transport_;
  ControlOptions options_;
  ContactSink contacts_;
};

}  // namespace mesh::control::detail
