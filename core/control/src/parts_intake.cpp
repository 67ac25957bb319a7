// The control plane's intake of messages in parts (docs/protocol.md "Messages in parts"): parts
// are kept in a bounded buffer (protocol::parts::Reassembler, bounded by limits.max_assembled)
// and only a complete whole, whose digest matched, goes through the normal checks: size (against
// limits.max_assembled), protocol version, proof, JSON.
#include "service.h"

#include <spdlog/spdlog.h>

#include "mesh/common/protocol.h"

namespace mesh::control::detail {

void Service::take_part(const sdk::Message& m, std::int64_t now_ms) {
  const std::size_t kind = m.subject.rfind("mesh.api.", 0) == 0 ? 0 : m.subject.rfind("mesh.enrol", 0) == 0 ? 1 : 2;
  auto whole = intake_[kind].add(m, now_ms);
  if (!whole) return refuse(m, whole.error());
  if (!*whole) {
    // Not complete yet: tell the sender to go on (flow control; carries nothing to trust).
    if (m.reply.empty()) return;
    auto r = protocol::make_message(m.reply);
    r.set_header(protocol::kHeaderStatus, protocol::parts::kStatusPart);
    return reply(std::move(r));
  }
  common::logger()->debug("assembled subject={} bytes={}", (*whole)->subject.substr(0, 128), (*whole)->body.size());
  dispatch(**whole, now_ms, options_.max_assembled);
}

}  // namespace mesh::control::detail
