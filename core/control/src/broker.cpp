#include "mesh/control/broker.h"

#include <signal.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include <spdlog/spdlog.h>

#include "mesh/common/crypto.h"
#include "mesh/common/fs.h"
#include "mesh/common/logging.h"
#include "mesh/common/nkey.h"
#include "mesh/common/process.h"
#include "mesh/common/protocol.h"

namespace mesh::control {
namespace {

using sdk::ErrorCode;

std::string quoted_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", \"" : "\"") + items[i] + "\"";
  return out + "]";
}

std::string permissions(const std::vector<std::string>& publish, const std::vector<std::string>& subscribe,
                        const std::vector<std::string>& subscribe_deny = {},
                        const std::vector<std::string>& publish_deny = {}) {
  return "permissions: {publish: {allow: " + quoted_list(publish) +
         (publish_deny.empty() ? "" : ", deny: " + quoted_list(publish_deny)) + "}, subscribe: {allow: " +
         quoted_list(subscribe) + (subscribe_deny.empty() ? "" : ", deny: " + quoted_list(subscribe_deny)) + "}}";
}

sdk::Result<std::string> password(const std::string& path, const char* key) {
  auto text = common::read_file(path, 4096);
  if (!text) return sdk::fail(ErrorCode::InvalidArgument, std::string("broker.") + key + ": " + text.error().message);
  std::string p = *text;
  while (!p.empty() && (p.back() == '\n' || p.back() == '\r')) p.pop_back();
  if (p.empty() || p.find_first_of("\"\\\n") != std::string::npos)
    return sdk::fail(ErrorCode::InvalidArgument,
                     std::string("broker.") + key + ": the password in " + path +
                         " must be one non-empty line without '\"' or '\\'");
  return p;
}

}  // namespace

std::string node_broker_seed(const ControlKeys& keys, const std::string& node, std::uint64_t generation,
                             const std::string& public_key_hex) {
  return common::mac("nox-mesh broker nkey v1\n" + node + "\n" + std::to_string(generation) + "\n" + public_key_hex,
                     keys.heartbeat_master);
}

std::vector<std::string> store_stream_publish(const std::string& stream) {
  if (stream.empty()) return {};
  const std::string& s = stream;
  // What nats.c asks of the servers for the store (stream_log.cpp and compaction): the stream
  // made or found, messages read by sequence, ordered consumers made, reset and flow-controlled,
  // the log purged up to a sequence, and the store's own subjects published.
  return {"$JS.API.INFO",
          "$JS.API.STREAM.CREATE." + s,
          "$JS.API.STREAM.UPDATE." + s,
          "$JS.API.STREAM.INFO." + s,
          "$JS.API.STREAM.MSG.GET." + s,
          "$JS.API.DIRECT.GET." + s,
          "$JS.API.DIRECT.GET." + s + ".>",
          "$JS.API.STREAM.PURGE." + s,
          "$JS.API.CONSUMER.CREATE." + s,
          "$JS.API.CONSUMER.CREATE." + s + ".>",
          "$JS.API.CONSUMER.INFO." + s + ".>",
          "$JS.API.CONSUMER.DELETE." + s + ".>",
          "$JS.FC." + s + ".>",
          "$JS.ACK." + s + ".>",
          s + ".>"};
}

std::string control_broker_seed(const ControlKeys& keys) {
  return common::mac("nox-mesh broker nkey v1\ncontrol plane", keys.heartbeat_master);
}

std::vector<BrokerNode> broker_nodes(const ControlKeys& keys, const std::vector<sdk::NodeRecord>& nodes) {
  std::vector<BrokerNode> out;
  out.reserve(nodes.size());
  for (const auto& n : nodes) {
    if (n.public_key.empty()) continue;
    out.push_back(BrokerNode{common::nkey_user_public(common::keypair_from_seed(
                                 node_broker_seed(keys, n.name, n.generation, n.public_key)).public_key),
                             n.name, n.generation});
  }
  return out;
}

std::string control_broker_public(const ControlKeys& keys) {
  return common::nkey_user_public(common::keypair_from_seed(control_broker_seed(keys)).public_key);
}

sdk::Result<ParsedAuthorization> parse_authorization(const std::string& text) {
  ParsedAuthorization out;
  if (text.rfind("# Written by mesh-control", 0) != 0)
    return sdk::fail(ErrorCode::InvalidArgument, "not written by mesh-control (its first line differs)");
  auto valid_nkey = [](std::string_view k) {
    if (k.size() != 56 || k.front() != 'U') return false;
    for (char c : k)
      if (!((c >= 'A' && c <= 'Z') || (c >= '2' && c <= '7'))) return false;
    return true;
  };
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + at, end - at);
    at = end + 1;
    constexpr std::string_view kNkey = "    {nkey: \"";
    if (line.rfind(kNkey, 0) != 0) continue;
    const std::string_view key = line.substr(kNkey.size(), 56);
    if (!valid_nkey(key) || line.size() < kNkey.size() + 57 || line[kNkey.size() + 56] != '"')
      return sdk::fail(ErrorCode::InvalidArgument,
                       "a user line holds no valid nkey: " + std::string(line.substr(0, 80)));
    constexpr std::string_view kNode = "}  # node ";
    const auto mark = line.rfind(kNode);
    if (mark == std::string_view::npos) {
      if (!out.control_nkey.empty())
        return sdk::fail(ErrorCode::InvalidArgument, "two nkey users that are not nodes");
      out.control_nkey = std::string(key);
      continue;
    }
    // "… }  # node <name> generation <n>": the name, the generation and the nkey are all the
    // line is taken for; its permissions are written again from them.
    const std::string_view rest = line.substr(mark + kNode.size());
    const auto space = rest.find(" generation ");
    if (space == std::string_view::npos)
      return sdk::fail(ErrorCode::InvalidArgument,
                       "a node line without its generation: " + std::string(line.substr(0, 80)));
    const std::string name(rest.substr(0, space));
    const std::string gen(rest.substr(space + 12));
    if (!protocol::valid_node_name(name) || gen.empty() || gen.size() > 20 ||
        gen.find_first_not_of("0123456789") != std::string::npos)
      return sdk::fail(ErrorCode::InvalidArgument, "a node line with a bad name or generation: " +
                                                       std::string(line.substr(0, 80)));
    out.nodes.push_back(BrokerNode{std::string(key), name, std::stoull(gen)});
  }
  if (out.control_nkey.empty()) return sdk::fail(ErrorCode::InvalidArgument, "no control plane user");
  return out;
}

sdk::Result<std::string> authorization_text(const BrokerSettings& broker, const ControlKeys& keys,
                                            const std::vector<sdk::NodeRecord>& nodes) {
  return authorization_text_for(broker, keys, broker_nodes(keys, nodes));
}

sdk::Result<std::string> authorization_text_for(const BrokerSettings& broker, const ControlKeys& keys,
                                                const std::vector<BrokerNode>& nodes) {
  std::string out =
      "# Written by mesh-control (Nox Mesh); rewritten at every enrolment: do not edit.\n"
      "# Include it from the nats-server configuration: include \"" + broker.authorization_file + "\"\n"
      "authorization {\n  users = [\n";
  const std::string control_public = control_broker_public(keys);
  std::vector<std::string> control_publish{"mesh.decl.*", "_INBOX.>"};
  for (auto& s : store_stream_publish(broker.store_stream)) control_publish.push_back(std::move(s));
  out += "    {nkey: \"" + control_public + "\", " +
         permissions(control_publish,
                     {"mesh.api.>", "mesh.latest.*", "mesh.report.*", "mesh.drift.*", "mesh.heartbeat.*",
                      "mesh.recovery.*", "mesh.content.*", "mesh.briefing.*", "mesh.enrol",
                      // Each instance's own subject (decision record 170); the instances share
                      // this user, so it may read any instance's.
                      std::string(protocol::kInstanceSubjectPrefix) + ">", "_INBOX.>"}) +
         "}\n";
  if (!broker.enrol_password_file.empty()) {
    auto p = password(broker.enrol_password_file, "enrol_password_file");
    if (!p) return sdk::fail(p.error());
    // Unenrolled hosts share this user; their replies come on their own prefix, so a stolen
    // enrolment password reads enrolment replies only (their secrets are sealed to each host).
    out += "    {user: \"" + broker.enrol_user + "\", password: \"" + *p + "\", " +
           permissions({"mesh.enrol"}, {std::string(protocol::kEnrolInboxPrefix) + ".>"}) + "}\n";
  }
  if (!broker.operator_password_file.empty()) {
    auto p = password(broker.operator_password_file, "operator_password_file");
    if (!p) return sdk::fail(p.error());
    // `mesh` keeps nats.c's default inboxes (_INBOX.<random>); the nodes', the enrolment's and
    // the control plane's own (its store's JetStream replies: decision record 185) are denied,
    // both ways (publishing there is outside the allow list anyway).
    const std::string control_inbox = std::string(protocol::kControlInboxPrefix) + ".>";
    out += "    {user: \"" + broker.operator_user + "\", password: \"" + *p + "\", " +
           permissions({"mesh.api.>", protocol::instance_subject("*", "mesh.api.>")}, {"_INBOX.>"},
                       {std::string(protocol::kNodeInboxPrefix) + ".>", std::string(protocol::kEnrolInboxPrefix) + ".>",
                        control_inbox},
                       {control_inbox}) +
           "}\n";
  }
  for (const auto& n : nodes) {
    const std::string& pub = n.nkey;
    const std::string& x = n.name;
    out += "    {nkey: \"" + pub + "\", " +
           // No _INBOX publish (a node answers no request, so it cannot forge replies), and
           // replies only on its own inbox prefix (so it cannot read another node's). The later
           // parts of its reports, drift reports and briefings in parts go to the instance that
           // took the first (decision record 170), still under its own name.
           permissions({"mesh.report." + x, "mesh.drift." + x, "mesh.heartbeat." + x, "mesh.latest." + x,
                        "mesh.recovery." + x, "mesh.content." + x, "mesh.briefing." + x,
                        protocol::instance_subject("*", "mesh.report." + x),
                        protocol::instance_subject("*", "mesh.drift." + x),
                        protocol::instance_subject("*", "mesh.briefing." + x)},
                       {"mesh.decl." + x, protocol::node_inbox_prefix(x) + ".>"}) +
           "}  # node " + x + " generation " + std::to_string(n.generation) + "\n";
  }
  out += "  ]\n}\n";
  return out;
}

sdk::Result<bool> update_broker(const BrokerSettings& broker, const ControlKeys& keys,
                                const std::vector<sdk::NodeRecord>& nodes) {
  return update_broker_for(broker, keys, broker_nodes(keys, nodes));
}

sdk::Result<bool> update_broker_for(const BrokerSettings& broker, const ControlKeys& keys,
                                    const std::vector<BrokerNode>& nodes) {
  auto text = authorization_text_for(broker, keys, nodes);
  if (!text) return sdk::fail(text.error());
  // Unchanged (a restart): no write and no reload, so that a client connecting during a reload
  // is never refused for nothing.
  if (auto old = common::read_file(broker.authorization_file, 64 << 20); old && *old == *text) return false;
  // 0640: nats-server may run as another user in the file's group.
  if (auto ok = common::write_file_atomic(broker.authorization_file, *text, 0640); !ok) return sdk::fail(ok.error());
  bool signalled = false;
  for (const auto& pid_file : broker.pid_files) {
    auto pid_text = common::read_file(pid_file, 64);
    if (!pid_text) continue;  // that server is not running (yet): it reads the file when it starts
    const long pid = std::strtol(pid_text->c_str(), nullptr, 10);
    if (pid <= 1) return sdk::fail(ErrorCode::InvalidArgument, pid_file + " does not hold a process id");
    // A pid file left by a server that died may name another program now (its number reused):
    // only a nats-server is sent SIGHUP, which ends most other programs.
    if (!common::process_runs(pid, "nats-server")) {
      if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)
        common::logger()->warn("broker pid_file {} names pid {}, which is not a nats-server: not signalled (a stale "
                               "pid file whose number another process took?)",
                               pid_file, pid);
      continue;
    }
    if (::kill(static_cast<pid_t>(pid), SIGHUP) != 0) {
      // A stale pid file of a server that died: the others are still reloaded.
      if (errno == ESRCH) continue;
      return sdk::fail(ErrorCode::Failed, "cannot signal nats-server (pid " + std::to_string(pid) + " from " +
                                              pid_file + ") to reload: " + std::strerror(errno));
    }
    signalled = true;
  }
  return signalled;
}

}  // namespace mesh::control
