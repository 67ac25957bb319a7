#include "traffic.h"

#include "mesh/common/protocol.h"

namespace mesh::control::detail {

const char* to_string(TrafficClass c) noexcept {
  switch (c) {
    case TrafficClass::Api: return "api";
    case TrafficClass::Enrol: return "enrol";
    case TrafficClass::NodeRequest: return "node_request";
    case TrafficClass::Report: return "report";
    case TrafficClass::Heartbeat: return "heartbeat";
  }
  return "report";
}

TrafficClass traffic_class(std::string_view s) noexcept {
  auto starts = [&](std::string_view p) { return s.substr(0, p.size()) == p; };
  if (starts("mesh.api.")) return TrafficClass::Api;
  if (s == protocol::kEnrolSubject) return TrafficClass::Enrol;
  if (starts("mesh.heartbeat.")) return TrafficClass::Heartbeat;
  if (starts("mesh.latest.") || starts("mesh.recovery.") || starts("mesh.content.")) return TrafficClass::NodeRequest;
  return TrafficClass::Report;
}

const std::array<ClassSubscription, 9>& class_subscriptions() noexcept {
  // Pending limits per subscription (messages, bytes): what may wait in nats.c while the
  // handler — a queue push — runs. Heartbeats are many and tiny; API and report bodies may be as
  // large as a message.
  static const std::array<ClassSubscription, 9> kSubs = {{
      {"mesh.api.>", TrafficClass::Api, {8192, 256 << 20}},
      {protocol::kEnrolSubject, TrafficClass::Enrol, {4096, 16 << 20}},
      {"mesh.latest.*", TrafficClass::NodeRequest, {16384, 16 << 20}},
      {"mesh.recovery.*", TrafficClass::NodeRequest, {16384, 16 << 20}},
      {"mesh.content.*", TrafficClass::NodeRequest, {4096, 16 << 20}},
      {"mesh.report.*", TrafficClass::Report, {16384, 256 << 20}},
      {"mesh.drift.*", TrafficClass::Report, {16384, 64 << 20}},
      {"mesh.briefing.*", TrafficClass::Report, {4096, 64 << 20}},
      // Per subscription; there are ControlOptions::heartbeat_subscriptions of them (decision
      // record 122). A heartbeat is ~400 bytes as nats.c holds it: 128 Ki messages is ~50 MiB.
      {"mesh.heartbeat.*", TrafficClass::Heartbeat, {131072, 64 << 20}},
  }};
  return kSubs;
}

}  // namespace mesh::control::detail
