// Nox Mesh NATS transport — messages between sdk::Message and nats.c's natsMsg, both ways, with
// the checks made before anything is sent. Private.
#pragma once

#include <string>

#include "nats_util.h"

namespace mesh::transports::nats::detail {

/// Header names: printable ASCII without blanks or ':'.
bool valid_header_name(const std::string& name);
/// Header values: no line break.
bool valid_header_value(const std::string& value);
/// nats.c 3.4.1 cannot parse a received header block in which a value is empty or only blanks
/// (natsMsgHeader_Keys fails: "no value found for key ..."), and every header of that message is
/// lost, so such values are refused on send.
bool blank_header_value(const std::string& value);

/// Header section size as sent ("NATS/1.0\r\n" + "k: v\r\n"... + "\r\n").
std::size_t header_bytes(const sdk::Message& msg);

/// Converts a received nats.c message. nats.c keeps header names in a hash map, so the order of
/// distinct names is not the wire order: names come sorted, each name's values in wire order.
/// Values arrive with surrounding blanks trimmed. When nats.c cannot parse the header block the
/// message is delivered without headers and `header_error` says why.
sdk::Message to_message(natsMsg* msg, std::string* header_error = nullptr);

/// Builds a nats.c message after checking subject, reply, headers and size (the server's
/// max_payload as `nc` knows it).
Result<MsgPtr> make_message(natsConnection* nc, const sdk::Message& msg);

}  // namespace mesh::transports::nats::detail
