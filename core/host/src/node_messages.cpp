#include "mesh/host/node_messages.h"

#include "mesh/common/clock.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/sdk/value.h"

namespace mesh::host {

sdk::Result<std::uint64_t> check_declaration_message(const sdk::Message& m, const std::string& node,
                                                     const std::string& control_key, std::size_t max_bytes) {
  using sdk::ErrorCode;
  // A declaration larger than the broker's limit arrives in parts and is reassembled first.
  if (m.body.size() > max_bytes)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "body of " + std::to_string(m.body.size()) + " bytes over the limit of " + std::to_string(max_bytes) +
                         " bytes of a declaration (limits.max_declaration in the host config raises it)");
  if (auto v = protocol::check_version(m); !v) return sdk::fail(v.error());
  const std::string* to = m.header(protocol::kHeaderNode);
  if (!to || *to != node)
    return sdk::fail(ErrorCode::PermissionDenied,
                     "misaddressed: the declaration is for node " + (to ? "'" + *to + "'" : std::string("(none)")));
  auto rev = protocol::revision_header(m);
  if (!rev) return sdk::fail(rev.error());
  if (*rev == 0) return sdk::fail(ErrorCode::InvalidArgument, "Mesh-Revision: must be at least 1", protocol::kHeaderRevision);
  if (auto ok = trust::verify_declaration(m, node, *rev, control_key); !ok) return sdk::fail(ok.error());
  return *rev;
}

sdk::Message heartbeat_message(const std::string& node, std::uint64_t applied_revision, const std::string& host_version,
                               const std::string& state, const std::string& heartbeat_key, std::int64_t at_ms,
                               std::int64_t stamp_ms) {
  sdk::Value hb = sdk::Value::object();
  hb.set("node", node);
  hb.set("at", common::format_rfc3339(at_ms));
  hb.set("applied_revision", static_cast<std::int64_t>(applied_revision));
  hb.set("host_version", host_version);
  hb.set("state", state);
  auto m = protocol::make_message(protocol::heartbeat_subject(node), hb.to_json());
  m.set_header(protocol::kHeaderNode, node);
  trust::mac_heartbeat(m, node, heartbeat_key, stamp_ms);
  return m;
}

}  // namespace mesh::host
