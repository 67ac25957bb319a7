// Nox Mesh SDK — typed results. Every fallible SDK call returns Result<T>; nothing returns a bare
// bool, and no exception crosses the plugin boundary.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include <tl/expected.hpp>

namespace mesh::sdk {

/// What kind of failure an Error is. Only `Transient` and `Unavailable` are worth retrying as-is.
enum class ErrorCode {
  InvalidArgument,   ///< bad input: a property, a config key, a declaration. Not retryable.
  NotFound,          ///< the named thing does not exist. Not retryable.
  AlreadyExists,     ///< the thing exists and may not be created again. Not retryable.
  PermissionDenied,  ///< refused: credentials, signature, role, token. Not retryable.
  FailedPrecondition,///< the system is not in a state where this can run (lock held, wrong ABI).
  Failed,            ///< the operation ran and did not achieve its goal (apt 404, unit exited).
  Transient,         ///< temporary; retrying later may succeed (broker down, store busy).
  Unavailable,       ///< a dependency cannot be reached (engine not answering, no broker).
  Timeout,           ///< a bounded wait ran out. Retryable at the caller's discretion.
  Cancelled,         ///< the CancelToken was triggered.
  Unsupported,       ///< this plugin cannot do that here.
  Internal,          ///< a bug: an exception caught at the boundary, an invariant broken.
};

/// Stable lower-case name of a code ("invalid_argument", ...); used in logs and JSON reports.
constexpr const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidArgument: return "invalid_argument";
    case ErrorCode::NotFound: return "not_found";
    case ErrorCode::AlreadyExists: return "already_exists";
    case ErrorCode::PermissionDenied: return "permission_denied";
    case ErrorCode::FailedPrecondition: return "failed_precondition";
    case ErrorCode::Failed: return "failed";
    case ErrorCode::Transient: return "transient";
    case ErrorCode::Unavailable: return "unavailable";
    case ErrorCode::Timeout: return "timeout";
    case ErrorCode::Cancelled: return "cancelled";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::Internal: return "internal";
  }
  return "internal";
}

/// A failure with a human-readable message and, when it concerns a part of a resource or config,
/// the path to that part (`properties.mode`, `transport.servers[1]`). `path` is empty otherwise.
struct Error {
  ErrorCode code = ErrorCode::Internal;
  std::string message;
  std::string path;

  /// "path: message" when a path is set, else the message.
  std::string describe() const {
    return path.empty() ? message : path + ": " + message;
  }
  bool retryable() const noexcept {
    return code == ErrorCode::Transient || code == ErrorCode::Unavailable ||
           code == ErrorCode::Timeout;
  }
};

/// `tl::expected<T, Error>` (C++20 has no std::expected; GCC 12 ships none).
template <class T>
using Result = tl::expected<T, Error>;

/// Builds the error side of a Result: `return fail(ErrorCode::InvalidArgument, "bad", "properties.mode");`
inline tl::unexpected<Error> fail(ErrorCode code, std::string message, std::string path = {}) {
  return tl::unexpected<Error>(Error{code, std::move(message), std::move(path)});
}

/// Re-raises an Error on the error side, e.g. `if (!r) return fail(r.error());`.
inline tl::unexpected<Error> fail(Error error) { return tl::unexpected<Error>(std::move(error)); }

}  // namespace mesh::sdk
