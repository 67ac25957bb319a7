// Broker permissions (docs/security.md "Broker permissions"): mesh-control keeps a nats-server
// authorization file — included by the server's config — in which every enrolled node has its own
// nkey allowed to publish only under its own name, and reloads the server after each change.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mesh/control/config.h"
#include "mesh/control/trust.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/store.h"

namespace mesh::control {

/// The 32-byte Ed25519 seed of a node's broker nkey, derived (like the heartbeat key) from the
/// control key and the node's identity: re-enrolment makes a new one and drops the old.
std::string node_broker_seed(const ControlKeys& keys, const std::string& node, std::uint64_t generation,
                             const std::string& public_key_hex);
/// The control plane's own broker nkey seed (32 bytes).
std::string control_broker_seed(const ControlKeys& keys);
/// The control plane's own broker nkey, public ("U…", 56 characters). Thread-safe.
std::string control_broker_public(const ControlKeys& keys);

/// One node's user in the authorization file: its public broker nkey ("U…"), name and generation.
struct BrokerNode {
  std::string nkey;
  std::string name;
  std::uint64_t generation = 0;
};
/// The users of `nodes` (each nkey derived with node_broker_seed; a node without a public key is
/// left out). Thread-safe.
std::vector<BrokerNode> broker_nodes(const ControlKeys& keys, const std::vector<sdk::NodeRecord>& nodes);

/// What an authorization file written by authorization_text() says about its users: the control
/// plane's nkey and each node's nkey, name and generation (the comment ending its line). Nothing
/// else of the file is taken: its permissions are written again from these.
struct ParsedAuthorization {
  std::string control_nkey;
  std::vector<BrokerNode> nodes;
};
/// Parses `text`, which must be a file authorization_text() wrote (decision record 188).
/// Errors: InvalidArgument saying what is not as written (first line, a user line without a
/// valid nkey, a node line without a valid name or generation, no control plane user).
/// Thread-safe; reads only `text`.
sdk::Result<ParsedAuthorization> parse_authorization(const std::string& text);

/// The publish rights the control plane's broker user needs for a `jetstream-kv` store on
/// JetStream stream `stream` (its `$JS.API` subjects, flow control and acks, `<stream>.>`);
/// empty for "" (another store). Only the control plane's user gets them (decision record 0116).
std::vector<std::string> store_stream_publish(const std::string& stream);

/// The authorization file's text: users for the control plane (its nkey: subscribe its request
/// subjects and _INBOX.>, publish mesh.decl.* and _INBOX.>, and store_stream_publish of
/// broker.store_stream), enrolment (publish mesh.enrol,
/// subscribe _INBOX.enrol.>) and operators (publish mesh.api.> and not _INBOX.control.>,
/// subscribe _INBOX.> but not _INBOX.node.>, _INBOX.enrol.> or the control plane's own
/// _INBOX.control.>), both user/password, and one nkey per node in `nodes` with:
///   publish   mesh.report.<n>, mesh.drift.<n>, mesh.heartbeat.<n>, mesh.latest.<n>,
///             mesh.recovery.<n>, mesh.briefing.<n>   (no _INBOX: a node answers no request)
///   subscribe mesh.decl.<n>, _INBOX.node.<n>.>      (its own replies only)
/// Node names are valid subject tokens (protocol::valid_node_name). Not thread-safe w.r.t.
/// concurrent changes of the password files (each is read once per call).
/// Errors: InvalidArgument (an unreadable password file, a password with '"' or '\').
sdk::Result<std::string> authorization_text(const BrokerSettings& broker, const ControlKeys& keys,
                                            const std::vector<sdk::NodeRecord>& nodes);
/// The same for node users given as they are (broker_nodes(), or parse_authorization() of a file).
sdk::Result<std::string> authorization_text_for(const BrokerSettings& broker, const ControlKeys& keys,
                                                const std::vector<BrokerNode>& nodes);

/// Writes the authorization file (atomically, 0640) and sends SIGHUP (a configuration reload) to
/// each running nats-server named by `pid_files` (a missing pid file or a stale pid is skipped).
/// Returns whether it signalled any. An unchanged file is neither rewritten nor reloaded.
sdk::Result<bool> update_broker(const BrokerSettings& broker, const ControlKeys& keys,
                                const std::vector<sdk::NodeRecord>& nodes);
/// The same for node users given as they are.
sdk::Result<bool> update_broker_for(const BrokerSettings& broker, const ControlKeys& keys,
                                    const std::vector<BrokerNode>& nodes);

}  // namespace mesh::control
