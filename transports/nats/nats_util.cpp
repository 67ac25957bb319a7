#include "nats_util.h"

namespace mesh::transports::nats::detail {

std::string status_text(natsStatus s) { return natsStatus_GetText(s); }

/// "<what>: <nats.c's detailed error text or the status text>".
std::string describe(natsStatus s, const std::string& what) {
  natsStatus last = NATS_OK;
  const char* text = nats_GetLastError(&last);
  std::string detail = text && *text && last == s ? text : status_text(s);
  return what + ": " + detail;
}

/// The text between the first pair of double quotes ("Permissions Violation for Publish to
/// \"a.b\"" names a.b), or empty.
std::string quoted_subject(const std::string& text) {
  const auto open = text.find('"');
  if (open == std::string::npos) return {};
  const auto close = text.find('"', open + 1);
  if (close == std::string::npos) return {};
  return text.substr(open + 1, close - open - 1);
}

std::string last_error_text(natsConnection* nc) {
  const char* text = nullptr;
  natsConnection_GetLastError(nc, &text);
  return text ? text : "";
}

std::string connected_url(natsConnection* nc) {
  char buf[512] = {0};
  if (natsConnection_GetConnectedUrl(nc, buf, sizeof buf) == NATS_OK) return buf;
  return {};
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

ErrorCode connect_error_code(natsStatus s) {
  switch (s) {
    case NATS_CONNECTION_AUTH_FAILED:
    case NATS_NOT_PERMITTED:
      return ErrorCode::PermissionDenied;
    case NATS_INVALID_ARG:
    case NATS_ADDRESS_MISSING:
    case NATS_SECURE_CONNECTION_REQUIRED:
    case NATS_SECURE_CONNECTION_WANTED:
      return ErrorCode::InvalidArgument;
    default:
      return ErrorCode::Unavailable;  // NATS_NO_SERVER, NATS_TIMEOUT, NATS_SSL_ERROR, I/O...
  }
}

/// Errors of operations on an established connection object.
ErrorCode op_error_code(natsStatus s) {
  switch (s) {
    case NATS_TIMEOUT: return ErrorCode::Timeout;
    case NATS_MAX_PAYLOAD:
    case NATS_INVALID_SUBJECT:
    case NATS_INVALID_ARG:
    case NATS_INVALID_TIMEOUT:
      return ErrorCode::InvalidArgument;
    case NATS_NOT_PERMITTED: return ErrorCode::PermissionDenied;
    default: return ErrorCode::Unavailable;  // closed, disconnected, buffer full, I/O
  }
}

common::LogBudget& traffic_log_budget() {
  static common::LogBudget budget(10);
  return budget;
}

}  // namespace mesh::transports::nats::detail
