// The wire protocol of docs/protocol.md: subjects, headers, version checks and reply helpers.
// Shared by mesh-host, mesh-control and mesh so that all three speak exactly one contract.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "mesh/sdk/result.h"
#include "mesh/sdk/transport.h"
#include "mesh/sdk/value.h"

namespace mesh::protocol {

inline constexpr int kMajor = 1;
inline constexpr int kMinor = 0;
inline constexpr const char* kVersion = "1.0";
inline constexpr const char* kQueueGroup = "mesh-control";

inline constexpr const char* kHeaderProtocol = "Mesh-Protocol";
inline constexpr const char* kHeaderNode = "Mesh-Node";
inline constexpr const char* kHeaderRevision = "Mesh-Revision";
inline constexpr const char* kHeaderDigest = "Mesh-Digest";
inline constexpr const char* kHeaderStatus = "Mesh-Status";
/// On a reply to mesh.content.<node>: the whole content's size in bytes (decision record 111).
inline constexpr const char* kHeaderContentSize = "Mesh-Content-Size";

/// Host software version (also in heartbeats).
inline constexpr const char* kHostVersion = "0.1.0";

inline std::string decl_subject(std::string_view node) { return "mesh.decl." + std::string(node); }
inline std::string latest_subject(std::string_view node) { return "mesh.latest." + std::string(node); }
inline std::string report_subject(std::string_view node) { return "mesh.report." + std::string(node); }
inline std::string drift_subject(std::string_view node) { return "mesh.drift." + std::string(node); }
inline std::string heartbeat_subject(std::string_view node) { return "mesh.heartbeat." + std::string(node); }
inline std::string recovery_subject(std::string_view node) { return "mesh.recovery." + std::string(node); }
inline std::string briefing_subject(std::string_view node) { return "mesh.briefing." + std::string(node); }
/// A node's request for a range of content by digest (decision record 111).
inline std::string content_subject(std::string_view node) { return "mesh.content." + std::string(node); }
inline constexpr const char* kEnrolSubject = "mesh.enrol";
inline std::string api_subject(std::string_view op) { return "mesh.api." + std::string(op); }

/// Instance subjects (docs/protocol.md "Messages in parts", decision record 170). Every
/// mesh-control instance also subscribes, outside the queue group, to
/// `mesh.instance.<instance id>.>`: a message published on `mesh.instance.<id>.<subject>` reaches
/// that instance only, which handles it exactly as if it had come on `<subject>` (the subject its
/// proof covers). Senders use it for the rest of a message in parts once an instance took its
/// first part, and `mesh publish` for the rest of an upload.
inline constexpr const char* kInstanceSubjectPrefix = "mesh.instance.";
/// Header of the control plane's answer to a part (Mesh-Status `part`), and of nothing else: the
/// id of the instance that took it, where the sender is to send the next parts.
inline constexpr const char* kHeaderInstance = "Mesh-Instance";
/// True for an instance id as `<state_dir>/instance.id` holds it: 32 lower-case hex characters.
inline bool valid_instance_id(std::string_view id) {
  if (id.size() != 32) return false;
  for (char c : id)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}
/// "mesh.instance.<instance>.<subject>". `instance` must be valid_instance_id (not checked here).
inline std::string instance_subject(std::string_view instance, std::string_view subject) {
  return std::string(kInstanceSubjectPrefix) + std::string(instance) + "." + std::string(subject);
}

/// Reply inbox prefixes (the nats transport's `inbox_prefix`). With broker permissions
/// (docs/security.md) a node may subscribe only to `_INBOX.node.<node>.>` and the enrolment user
/// only to `_INBOX.enrol.>`, so nobody reads replies meant for a node but that node. Distinct
/// from nats.c's default `_INBOX.<22-character NUID>`, and from each other for every node name.
inline constexpr const char* kNodeInboxPrefix = "_INBOX.node";
inline constexpr const char* kEnrolInboxPrefix = "_INBOX.enrol";
/// The control plane's own inboxes (decision record 185): every connection of mesh-control (its
/// transport, the jetstream-kv store's JetStream requests and ordered consumers) takes its
/// replies under it. With broker permissions only the control plane's nkey may subscribe there,
/// and the control plane never answers a request whose reply subject lies under it, so that no
/// client reads the store's replies or makes the control plane answer into its own requests.
inline constexpr const char* kControlInboxPrefix = "_INBOX.control";
/// "_INBOX.node.<node>" (a node name is always one subject token).
inline std::string node_inbox_prefix(std::string_view node) {
  return std::string(kNodeInboxPrefix) + "." + std::string(node);
}

/// The last token of a subject ("mesh.report.web-01" → "web-01").
inline std::string_view subject_node(std::string_view subject) {
  auto dot = subject.rfind('.');
  return dot == std::string_view::npos ? subject : subject.substr(dot + 1);
}

/// True for 1–64 chars of [a-z0-9_-] starting with a letter or digit.
inline bool valid_node_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (i > 0 && (c == '-' || c == '_'));
    if (!ok) return false;
  }
  return true;
}

/// A message with the protocol header set.
inline sdk::Message make_message(std::string subject, std::string body = {}) {
  sdk::Message m;
  m.subject = std::move(subject);
  m.body = std::move(body);
  m.headers.emplace_back(kHeaderProtocol, kVersion);
  return m;
}

/// Checks the Mesh-Protocol header: present, and of our major. Errors: Unsupported.
inline sdk::Result<void> check_version(const sdk::Message& m) {
  const std::string* v = m.header(kHeaderProtocol);
  if (!v) return sdk::fail(sdk::ErrorCode::Unsupported, "message on " + m.subject + " has no " + kHeaderProtocol + " header");
  auto dot = v->find('.');
  if (dot == std::string::npos || v->substr(0, dot) != std::to_string(kMajor))
    return sdk::fail(sdk::ErrorCode::Unsupported, "message on " + m.subject + " speaks protocol " + *v +
                                                      ", this program speaks " + kVersion);
  return {};
}

/// The Mesh-Revision header as a number: 1 to 20 decimal digits, nothing else (no sign, no space,
/// no "0x"), at most 2^64-1. Errors: InvalidArgument with path "Mesh-Revision" when the header is
/// missing or is not such a number ("-1" is refused, never read as 2^64-1). Zero parses; whether
/// it is acceptable is the caller's rule.
inline sdk::Result<std::uint64_t> revision_header(const sdk::Message& m) {
  const std::string* h = m.header(kHeaderRevision);
  if (!h) return sdk::fail(sdk::ErrorCode::InvalidArgument, std::string("no ") + kHeaderRevision + " header", kHeaderRevision);
  const std::string shown = h->size() > 32 ? h->substr(0, 32) + "..." : *h;
  std::uint64_t value = 0;
  bool ok = !h->empty() && h->size() <= 20;
  for (char c : *h) {
    if (!ok) break;
    const auto digit = static_cast<unsigned>(c - '0');
    ok = c >= '0' && c <= '9' && value <= (UINT64_MAX - digit) / 10;
    if (ok) value = value * 10 + digit;
  }
  if (!ok)
    return sdk::fail(sdk::ErrorCode::InvalidArgument,
                     std::string(kHeaderRevision) + ": '" + shown + "' is not a revision (decimal digits, at most 2^64-1)",
                     kHeaderRevision);
  return value;
}

/// A success reply (Mesh-Status: ok) carrying `body`.
inline sdk::Message ok_reply(const sdk::Message& request, std::string body) {
  auto m = make_message(request.reply, std::move(body));
  m.set_header(kHeaderStatus, "ok");
  return m;
}

/// An error reply (Mesh-Status: error) with {"error": {"code","message","path"}}, plus the keys
/// of `detail` (an object, or nullptr) other than those three: declare's "diagnostics".
inline sdk::Message error_reply(const sdk::Message& request, const sdk::Error& e,
                                const sdk::Value* detail = nullptr) {
  sdk::Value err = sdk::Value::object();
  err.set("code", sdk::to_string(e.code));
  err.set("message", e.message);
  err.set("path", e.path);
  if (detail && detail->is_object())
    for (const auto& [k, v] : detail->as_object())
      if (k != "code" && k != "message" && k != "path") err.set(k, v);
  sdk::Value body = sdk::Value::object();
  body.set("error", std::move(err));
  auto m = make_message(request.reply, body.to_json());
  m.set_header(kHeaderStatus, "error");
  return m;
}

/// Maps a code name back ("invalid_argument" → InvalidArgument); Internal when unknown.
inline sdk::ErrorCode error_code_from_string(std::string_view s) {
  using sdk::ErrorCode;
  for (ErrorCode c : {ErrorCode::InvalidArgument, ErrorCode::NotFound, ErrorCode::AlreadyExists,
                      ErrorCode::PermissionDenied, ErrorCode::FailedPrecondition, ErrorCode::Failed,
                      ErrorCode::Transient, ErrorCode::Unavailable, ErrorCode::Timeout,
                      ErrorCode::Cancelled, ErrorCode::Unsupported, ErrorCode::Internal})
    if (s == sdk::to_string(c)) return c;
  return ErrorCode::Internal;
}

}  // namespace mesh::protocol
