// Small helpers shared by the files of the control plane's message handlers (service.cpp,
// dispatch.cpp, auth.cpp, host_messages.cpp, enrolment.cpp, api_*.cpp): how an outside value is
// echoed, how times and counters are written into a reply, and the parameter checks several
// operations share. Internal to mesh_control; definitions in service_util.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fields.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/store.h"
#include "mesh/sdk/value.h"

namespace mesh::control::detail {

/// What an error message may echo of its input (decision record 22): a node name or a field's
/// value arrives from anyone on the broker and may be as large as a message. In bytes.
inline constexpr std::size_t kEchoBytes = 64;
/// The whole text of a refusal (message, path), in the log and in the reply: a last guard behind
/// shown() for messages built elsewhere (declaration checks echo keys). In bytes.
inline constexpr std::size_t kMaxRefusalText = 1024;

/// `v` escaped and bounded (common::printable): control characters, escape sequences and
/// invalid UTF-8 never reach a log line or an error message raw; a value longer than `max` bytes
/// shows its first `max` bytes and its size. Thread-safe (pure).
std::string shown(std::string_view v, std::size_t max = kEchoBytes);

/// `ms` (milliseconds since the Unix epoch, UTC) as an RFC 3339 string Value.
sdk::Value ts(std::int64_t ms);
/// ts(*ms), or a JSON null when `ms` is empty.
sdk::Value opt_ts(const std::optional<std::int64_t>& ms);
/// Whole seconds from `ms` to `now_ms` (both epoch milliseconds), at least 0; null when `ms` is
/// empty.
sdk::Value age_s(const std::optional<std::int64_t>& ms, std::int64_t now_ms);
/// `v` as an integer Value (JSON numbers are signed 64-bit: counters never reach 2^63).
sdk::Value int_value(std::uint64_t v);
/// A JSON array of the strings of `list`, in order.
sdk::Value string_list(const std::vector<std::string>& list);
/// The nodes of `delivery`'s targets, in the delivery's order: a JSON array of strings. Pure.
sdk::Value delivery_nodes(const sdk::DeliveryRecord& delivery);
/// What a write of one node's revision answers (declare and rollback, through
/// Service::declare_composed): `{"delivery": ID, "nodes": delivery_nodes, "revision": the first
/// target's revision, 0 without targets}`, in that order, then each member of `extra` when it is
/// an object (set in its order, replacing one of those three of the same name). Pure.
sdk::Value delivery_answer(const sdk::DeliveryRecord& delivery, const sdk::Value* extra = nullptr);

/// An InvalidArgument error on the field `path` (a JSON path, "" for the whole body).
sdk::Error invalid(std::string path, std::string message);

/// The node name in field `key` of `f`. Errors: InvalidArgument naming the field when it is
/// missing, not a string, or not a valid node name (protocol::valid_node_name).
sdk::Result<std::string> node_param(const Fields& f, std::string_view key = "node");

/// A timestamp field: RFC 3339 UTC text, returned as epoch milliseconds, or `fallback` when the
/// field is absent. Errors: InvalidArgument naming the field (not a string, not RFC 3339).
sdk::Result<std::int64_t> time_field(const Fields& f, std::string_view key, std::int64_t fallback);

/// The node of a subject "mesh.<kind>.<node>" with exactly three tokens. Errors:
/// InvalidArgument on path "subject" (other shapes, an invalid node name).
sdk::Result<std::string> subject_node(const std::string& subject);

/// The stored answer of a mutating request (Store::remember_request / answer_request,
/// docs/protocol.md "Nonces"): what its reply said, as JSON text `{"status":"ok","body":…}`
/// or `{"status":"error","error":{code,message,path,…}}` (… the keys of `detail`, an object, when
/// given). Read back by Service::reply_stored_answer.
std::string ok_answer(const sdk::Value& body);
/// See ok_answer.
std::string error_answer(const sdk::Error& e, const sdk::Value* detail = nullptr);

}  // namespace mesh::control::detail
