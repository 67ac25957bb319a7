// Small text helpers for tests.
#pragma once

#include <cstddef>
#include <string>

namespace mesh::testing {

/// How many times `needle` occurs in `text`, counting non-overlapping occurrences from the start
/// (a log line counted once per line). `needle` must not be empty. Thread-safe (pure).
inline std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = 0; (at = text.find(needle, at)) != std::string::npos; at += needle.size()) ++n;
  return n;
}

}  // namespace mesh::testing
