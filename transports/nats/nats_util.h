// Nox Mesh NATS transport — small helpers over nats.c shared by the transport's files: error
// texts and codes, owners of nats.c objects, the log budget of traffic-caused lines. Private.
#pragma once

#include <nats/nats.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "mesh/common/logging.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/transport.h"

namespace mesh::transports::nats {
using sdk::ErrorCode;
using sdk::fail;
using sdk::LinkEvent;
using sdk::Result;
}  // namespace mesh::transports::nats

namespace mesh::transports::nats::detail {

/// nats.c's text of `s`.
std::string status_text(natsStatus s);

/// "<what>: <nats.c's detailed error text or the status text>".
std::string describe(natsStatus s, const std::string& what);

/// The text between the first pair of double quotes ("Permissions Violation for Publish to
/// \"a.b\"" names a.b), or empty.
std::string quoted_subject(const std::string& text);

/// The connection's last error text, or empty.
std::string last_error_text(natsConnection* nc);

/// The URL of the server `nc` is connected to, or empty.
std::string connected_url(natsConnection* nc);

/// `parts` joined with commas.
std::string join(const std::vector<std::string>& parts);

/// Errors of natsConnection_Connect.
ErrorCode connect_error_code(natsStatus s);

/// Errors of operations on an established connection object.
ErrorCode op_error_code(natsStatus s);

/// Lines that traffic can cause at will (nats.c's asynchronous errors — "Slow Consumer, messages
/// dropped" fires for every burst past a pending limit —, malformed headers): at most 10 a second
/// for the whole process, the next line through counting what was suppressed.
common::LogBudget& traffic_log_budget();

struct FreeDeleter {
  void operator()(const void* p) const noexcept { std::free(const_cast<void*>(p)); }
};
struct MsgDeleter {
  void operator()(natsMsg* m) const noexcept { natsMsg_Destroy(m); }
};
struct OptionsDeleter {
  void operator()(natsOptions* o) const noexcept { natsOptions_Destroy(o); }
};
using MsgPtr = std::unique_ptr<natsMsg, MsgDeleter>;
using OptionsPtr = std::unique_ptr<natsOptions, OptionsDeleter>;

}  // namespace mesh::transports::nats::detail
