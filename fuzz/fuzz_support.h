// Shared helpers of the libFuzzer targets: reading a fuzz input field by field, quiet logging,
// and reporting a broken invariant as a crash (so that libFuzzer saves the input).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "mesh/common/logging.h"
#include "mesh/sdk/result.h"

namespace mesh::fuzz {

/// Refusals are the expected outcome of almost every input: logging them would be most of the
/// run time and all of the output.
inline void quiet_logging() { (void)common::init_logging("fuzz", "off"); }

/// A fuzz input consumed from the front: selector bytes, then separated fields, then the rest.
class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size)
      : rest_(reinterpret_cast<const char*>(data), size) {}

  /// The next byte, or 0 when the input is used up.
  std::uint8_t byte() {
    if (rest_.empty()) return 0;
    const auto b = static_cast<std::uint8_t>(rest_.front());
    rest_.remove_prefix(1);
    return b;
  }
  /// Everything up to the next `sep` (which is consumed), or the whole rest when there is none.
  std::string_view field(char sep = '\n') {
    const auto at = rest_.find(sep);
    std::string_view f = rest_.substr(0, at);
    rest_.remove_prefix(at == std::string_view::npos ? rest_.size() : at + 1);
    return f;
  }
  /// Everything not consumed yet.
  std::string_view rest() const { return rest_; }
  bool empty() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

/// A broken invariant: prints what and why, then aborts (libFuzzer saves the input as crash-*).
[[noreturn]] inline void finding(std::string_view what, std::string_view detail = {}) {
  std::fprintf(stderr, "\n==== fuzz finding: %.*s\n%.*s\n", static_cast<int>(what.size()),
               what.data(), static_cast<int>(detail.size()), detail.data());
  std::abort();
}

/// The error codes a check of hostile input may return. Anything else (Internal in particular:
/// an exception caught by a plugin boundary or a handler) means the code under test broke.
inline bool clean_refusal(sdk::ErrorCode c) {
  return c == sdk::ErrorCode::InvalidArgument || c == sdk::ErrorCode::Unsupported ||
         c == sdk::ErrorCode::NotFound || c == sdk::ErrorCode::AlreadyExists ||
         c == sdk::ErrorCode::PermissionDenied || c == sdk::ErrorCode::FailedPrecondition;
}

}  // namespace mesh::fuzz
