#include "nats_message.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "nats_transport.h"

namespace mesh::transports::nats::detail {

bool valid_header_name(const std::string& name) {
  if (name.empty()) return false;
  for (unsigned char c : name)
    if (c <= 32 || c >= 127 || c == ':') return false;
  return true;
}

bool valid_header_value(const std::string& value) {
  return value.find_first_of("\r\n") == std::string::npos;
}

/// nats.c 3.4.1 cannot parse a received header block in which a value is empty or only blanks
/// (natsMsgHeader_Keys fails: "no value found for key ..."), and every header of that message is
/// lost, so such values are refused on send.
bool blank_header_value(const std::string& value) {
  return value.find_first_not_of(" \t") == std::string::npos;
}

std::size_t header_bytes(const sdk::Message& msg) {
  if (msg.headers.empty()) return 0;
  std::size_t n = 12;
  for (const auto& [k, v] : msg.headers) n += k.size() + v.size() + 4;
  return n;
}

sdk::Message to_message(natsMsg* msg, std::string* header_error) {
  sdk::Message m;
  if (const char* s = natsMsg_GetSubject(msg)) m.subject = s;
  if (const char* r = natsMsg_GetReply(msg)) m.reply = r;
  const char* data = natsMsg_GetData(msg);
  const int len = natsMsg_GetDataLength(msg);
  if (data && len > 0) m.body.assign(data, static_cast<std::size_t>(len));
  const char** keys = nullptr;
  int key_count = 0;
  const natsStatus hs = natsMsgHeader_Keys(msg, &keys, &key_count);
  if (hs != NATS_OK && hs != NATS_NOT_FOUND && header_error)
    *header_error = describe(hs, "cannot parse headers");
  if (hs == NATS_OK && keys) {
    // The pointers are sorted in place (the array is ours, the names nats.c's): no copy of the
    // names, one reserve for the pairs. Every message of the control plane (heartbeats above
    // all) passes here, on the subscription's delivery thread.
    std::unique_ptr<const char*, FreeDeleter> keys_owner(keys);
    std::sort(keys, keys + key_count, [](const char* a, const char* b) { return std::strcmp(a, b) < 0; });
    m.headers.reserve(static_cast<std::size_t>(key_count));
    for (int k = 0; k < key_count; ++k) {
      const char** values = nullptr;
      int value_count = 0;
      if (natsMsgHeader_Values(msg, keys[k], &values, &value_count) != NATS_OK || !values) continue;
      std::unique_ptr<const char*, FreeDeleter> values_owner(values);
      for (int i = 0; i < value_count; ++i) m.headers.emplace_back(keys[k], values[i] ? values[i] : "");
    }
  }
  return m;
}

Result<MsgPtr> make_message(natsConnection* nc, const sdk::Message& msg) {
  if (!valid_subject(msg.subject, false))
    return fail(ErrorCode::InvalidArgument, "invalid subject '" + msg.subject + "'", "subject");
  if (!msg.reply.empty() && !valid_subject(msg.reply, false))
    return fail(ErrorCode::InvalidArgument, "invalid reply subject '" + msg.reply + "'", "reply");
  for (const auto& [k, v] : msg.headers) {
    if (!valid_header_name(k))
      return fail(ErrorCode::InvalidArgument, "invalid header name '" + k + "'", "headers");
    if (!valid_header_value(v))
      return fail(ErrorCode::InvalidArgument, "header '" + k + "' has a line break", "headers");
    if (blank_header_value(v))
      return fail(ErrorCode::InvalidArgument,
                  "header '" + k + "' is empty; nats.c receivers cannot parse empty values",
                  "headers");
  }
  const std::int64_t max = natsConnection_GetMaxPayload(nc);
  const std::size_t size = msg.body.size() + header_bytes(msg);
  if (msg.body.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      (max > 0 && size > static_cast<std::size_t>(max)))
    return fail(ErrorCode::InvalidArgument,
                "message on " + msg.subject + " is " + std::to_string(size) +
                    " bytes (body and headers); the server accepts at most " +
                    std::to_string(max));
  natsMsg* raw = nullptr;
  natsStatus s = natsMsg_Create(&raw, msg.subject.c_str(),
                                msg.reply.empty() ? nullptr : msg.reply.c_str(),
                                msg.body.data(), static_cast<int>(msg.body.size()));
  if (s != NATS_OK) return fail(op_error_code(s), describe(s, "message on " + msg.subject));
  MsgPtr m(raw);
  for (const auto& [k, v] : msg.headers) {
    s = natsMsgHeader_Add(m.get(), k.c_str(), v.c_str());
    if (s != NATS_OK)
      return fail(ErrorCode::InvalidArgument, describe(s, "header '" + k + "'"), "headers");
  }
  return m;
}

}  // namespace mesh::transports::nats::detail

namespace mesh::transports::nats {

bool valid_subject(const std::string& subject, bool wildcards_allowed) noexcept {
  if (subject.empty()) return false;
  std::size_t start = 0;
  for (;;) {
    const std::size_t dot = subject.find('.', start);
    const std::size_t end = dot == std::string::npos ? subject.size() : dot;
    if (end == start) return false;  // empty token
    const std::string_view token(subject.data() + start, end - start);
    for (unsigned char c : token)
      if (c <= 32 || c == 127) return false;
    if (token == "*" || token == ">") {
      if (!wildcards_allowed) return false;
      if (token == ">" && dot != std::string::npos) return false;
    }
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

}  // namespace mesh::transports::nats
