// The control plane's intake of messages in parts (docs/protocol.md "Messages in parts"): parts
// are kept in a bounded buffer (protocol::parts::Reassembler, bounded by limits.max_assembled)
// and only a complete whole, whose digest matched, goes through the normal checks: size (against
// limits.max_assembled), protocol version, proof, JSON. The buffer is this instance's own: the
// answer to each part names this instance, and the sender sends the later parts of the whole to
// this instance's subject (decision record 170), so that the parts of one whole never spread
// over several instances of the queue group.
#include "service.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <thread>

#include "mesh/common/protocol.h"

namespace mesh::control::detail {

namespace {

// For the tests of an instance killed between the parts of a whole (tests/integration/
// cluster_parts_test.cpp): a pause before each answer to a part that did not complete its whole,
// so that a kill lands between two parts.
std::chrono::milliseconds part_pause() {
  static const std::chrono::milliseconds pause = [] {
    const char* t = std::getenv("NOX_MESH_CONTROL_PART_PAUSE_MS_FOR_TEST");
    return std::chrono::milliseconds(t ? std::strtol(t, nullptr, 10) : 0);
  }();
  return pause;
}

}  // namespace

void Service::take_part(const sdk::Message& m, std::int64_t now_ms) {
  const std::size_t kind = m.subject.rfind("mesh.api.", 0) == 0 ? 0 : m.subject.rfind("mesh.enrol", 0) == 0 ? 1 : 2;
  auto whole = intake_[kind].add(m, now_ms);
  if (!whole) return refuse(m, whole.error());
  if (!*whole) {
    if (const std::string* index = m.header(protocol::parts::kHeaderPart); index && *index == "0")
      common::logger()->debug("parts started subject={} parts={} instance={}", m.subject.substr(0, 128),
                              m.header(protocol::parts::kHeaderParts) ? *m.header(protocol::parts::kHeaderParts) : "-",
                              options_.instance_id);
    // Not complete yet: tell the sender to go on (flow control; carries nothing to trust), and
    // where — this instance, which holds the parts so far.
    if (m.reply.empty()) return;
    if (part_pause().count() > 0) std::this_thread::sleep_for(part_pause());
    auto r = protocol::make_message(m.reply);
    r.set_header(protocol::kHeaderStatus, protocol::parts::kStatusPart);
    if (!options_.instance_id.empty()) r.set_header(protocol::kHeaderInstance, options_.instance_id);
    return reply(std::move(r));
  }
  common::logger()->debug("assembled subject={} bytes={} instance={}", (*whole)->subject.substr(0, 128),
                          (*whole)->body.size(), options_.instance_id);
  dispatch(**whole, now_ms, options_.max_assembled);
}

}  // namespace mesh::control::detail
