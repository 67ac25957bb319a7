// The operator API's one table of operations {name, handler, role, mutating} (decision record
// 46) and what a handler is given. Everything that depends on which operations exist is derived
// from the table in operations.cpp: the routing of `mesh.api.<name>` (Service::on_api), the
// role check (role_needed, role_allows), which requests are idempotent on their nonce
// (Service::authenticate_operator), which are logged as operations, and the table of
// docs/protocol.md (api_operations_markdown). Adding an operation is adding a row and its
// handler. Internal to mesh_control.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "replay_cache.h"
#include "mesh/control/operations.h"
#include "mesh/control/trust.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::control::detail {

class Service;

/// What the nonce check decided about a verified signed request (docs/protocol.md "Nonces"),
/// from Service::check_signed_request.
struct Admission {
  std::string signer;  ///< "operator:<name>" or "node:<name>": the key of its nonce
  std::string nonce;
  /// Set for a retry of a mutating request already answered: reply with it, do nothing else.
  std::optional<std::string> answer;
  /// Held while a fresh idempotent request runs, so that a retry arriving meanwhile waits. Set
  /// only for Mutating::idempotent operations: it is also what says "store this answer".
  std::unique_ptr<InFlight::Ticket> ticket;
};

/// What an operation's handler is given. References valid for the call only.
struct ApiCall {
  const sdk::Value& params;  ///< the request body: a JSON object (empty body: {})
  std::int64_t now_ms;       ///< the request's receipt time, epoch milliseconds
  const OperatorRecord& who;  ///< the operator, authenticated and allowed by role
  /// The request's nonce check. An idempotent operation stores its answer with it (a result in
  /// the write's own transaction, Service::declare_composed; a refusal in Service::on_api).
  const Admission& request;
  /// When the handler refuses, it may set more keys of the refusal's `error` object here (an
  /// object; e.g. declare's "diagnostics", decision record 48). Kept with a stored refusal.
  sdk::Value* refusal = nullptr;
};

/// An operation's handler: the result is the reply's body; an error is the refusal. Runs on a
/// worker thread; handlers run concurrently with each other.
using ApiHandler = sdk::Result<sdk::Value> (Service::*)(const ApiCall&);

/// One row of the table of operations.
struct Operation {
  std::string_view name;  ///< `mesh.api.<name>`
  ApiHandler handler;
  Role role;           ///< the least role that may run it
  Mutating mutating;   ///< logging and nonce treatment (mesh/control/operations.h)
};

/// The table, in the order of docs/protocol.md's table. Static storage. Thread-safe.
std::span<const Operation> operations();
/// The row named `name`, or nullptr for an unknown operation. Thread-safe.
const Operation* find_operation(std::string_view name);

}  // namespace mesh::control::detail
