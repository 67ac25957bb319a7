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
};

/// `tl::expected<T, Error>` (C++20 has no std::expected; GCC 12 ships none), marked
/// `[[nodiscard]]`: a call whose Result is dropped is a compiler warning (-Wunused-result with
/// GCC, -Wunused-value with clang), so no error is lost by accident. Discard one on purpose
/// with `(void)call();` and a comment saying why ignoring it is right.
///
/// A thin class rather than an alias, because an alias cannot carry the attribute: it adds no
/// member and no state (same size and layout as `tl::expected<T, Error>`), inherits every
/// constructor, and converts both ways with `tl::expected<T, Error>` (a `map()` or
/// `map_error()` result assigns to a Result). Everything else is tl::expected's interface
/// (https://tl.tartanllama.xyz/en/latest/api/expected.html). Thread safety: as `T`.
template <class T>
class [[nodiscard]] Result : public tl::expected<T, Error> {
 public:
  using Base = tl::expected<T, Error>;
  using Base::Base;
  Result() = default;
  Result(const Base& other) : Base(other) {}             // NOLINT: implicit on purpose
  Result(Base&& other) : Base(std::move(other)) {}       // NOLINT: implicit on purpose
};

/// Builds the error side of a Result: `return fail(ErrorCode::InvalidArgument, "bad", "properties.mode");`
inline tl::unexpected<Error> fail(ErrorCode code, std::string message, std::string path = {}) {
  return tl::unexpected<Error>(Error{code, std::move(message), std::move(path)});
}

/// Re-raises an Error on the error side, e.g. `if (!r) return fail(r.error());`.
inline tl::unexpected<Error> fail(Error error) { return tl::unexpected<Error>(std::move(error)); }

}  // namespace mesh::sdk

/// `MESH_TRY(expr)` and `MESH_TRY(name, expr)`: early return of a Result's error.
///
/// - `MESH_TRY(expr);` evaluates `expr` (any Result, including `Result<void>`); when it holds
///   an error, the enclosing function returns that Error (`return mesh::sdk::fail(error)`), so
///   the enclosing function must return some `Result<U>`. Its value, if any, is dropped.
/// - `MESH_TRY(name, expr);` does the same and otherwise declares `auto name`, the value moved
///   out of the Result (so `T` must be move-constructible; `Result<void>` has no value: use the
///   one-argument form). It also declares `name_result_` (the Result itself, moved from) in the
///   same scope, so it is a declaration statement: not the lone body of an `if` or a loop
///   without braces, and each `name` only once per scope.
///
/// Portable standard C++ (C++11 variadic macros; no GCC/clang statement expression, no
/// `__VA_OPT__`): the form is picked by the number of macro arguments. An `expr` with a comma
/// outside parentheses (`f<A, B>()`) must be wrapped in parentheses: `MESH_TRY(v, (f<A, B>()))`.
/// MSVC needs its conforming preprocessor (/Zc:preprocessor). The expression is evaluated
/// exactly once.
#define MESH_TRY(...) MESH_TRY_PICK_(__VA_ARGS__, MESH_TRY_BIND_, MESH_TRY_DROP_, MESH_TRY_NONE_)(__VA_ARGS__)
#define MESH_TRY_PICK_(a1, a2, form, ...) form
#define MESH_TRY_DROP_(expr)                                                                \
  do {                                                                                      \
    if (auto mesh_try_r_ = (expr); !mesh_try_r_)                                            \
      return ::mesh::sdk::fail(std::move(mesh_try_r_).error());                             \
  } while (0)
#define MESH_TRY_BIND_(name, expr)                                                          \
  auto name##_result_ = (expr);                                                             \
  if (!name##_result_) return ::mesh::sdk::fail(std::move(name##_result_).error());         \
  auto name = std::move(*name##_result_)
