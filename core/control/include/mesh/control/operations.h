// The operator API's operations (docs/protocol.md "API", decision record 46), as the control
// plane's one table of operations describes them: each operation's name, the least role that may
// run it, and whether it changes anything. The routing of `mesh.api.<operation>`, the role check,
// the nonce handling of retries and the table in docs/protocol.md are all derived from that one
// table (core/control/src/operations.cpp); this header shows it without its handlers, for tests
// and documentation.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mesh::control {

/// An operator's role. Ordered: reader < deployer < admin; a role may run what every lower one
/// may run.
enum class Role { reader = 1, deployer = 2, admin = 3 };

/// "reader", "deployer" or "admin". Thread-safe.
std::string_view to_string(Role role) noexcept;
/// The role named `name` (exactly "reader", "deployer" or "admin"); nullopt for anything else.
/// Thread-safe.
std::optional<Role> parse_role(std::string_view name) noexcept;

/// What an operation does to the control plane's state, which decides how its nonce is treated
/// (docs/protocol.md "Nonces"):
enum class Mutating {
  /// Reads only. Not logged as an operation; the same signed request twice is "replayed".
  no,
  /// Writes (tokens, operators, node removal). Logged `api operation=<name> operator=<name>`;
  /// the same signed request twice is "replayed" (its answer is not kept: it may hold a secret,
  /// such as an enrolment token).
  yes,
  /// Writes revisions (declare, rollback, deploy), and is idempotent on its nonce: its answer (result
  /// or refusal) is stored with the nonce, and the same signed request again gets that answer and
  /// writes nothing. Logged like `yes`.
  idempotent,
};

/// "no", "yes" or "idempotent". Thread-safe.
std::string_view to_string(Mutating mutating) noexcept;

/// One row of the table of operations, without its handler.
struct OperationInfo {
  std::string_view name;  ///< as in the subject `mesh.api.<name>`; static storage
  Role role;              ///< the least role that may run it
  Mutating mutating;
};

/// Every operation the control plane answers on `mesh.api.<name>`, in the table's order (the
/// order of docs/protocol.md's table). Thread-safe.
std::vector<OperationInfo> api_operations();

/// The operation named `name`; nullopt for an unknown one (answered `unsupported`). Thread-safe.
std::optional<OperationInfo> find_api_operation(std::string_view name);

/// The table of operations as the Markdown table docs/protocol.md shows under "Operations,
/// roles and retries": a header row, a separator row, then one row per operation
/// "| `name` | role | mutating |", each line ending in '\n'. A test keeps the document equal to
/// it. Thread-safe.
std::string api_operations_markdown();

}  // namespace mesh::control
