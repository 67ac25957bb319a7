// Nox Mesh plugin support — bytes as lower-case hexadecimal text.
//
// Part of NoxMesh::support (header-only, links nothing).
#pragma once

#include <string>
#include <string_view>

namespace mesh::support {

/// Each byte of `bytes` as two lower-case hex digits, most significant nibble first ("\x01\xab"
/// gives "01ab"): the form of SHA-256 digests in Nox Mesh state, reports and container digests.
/// @param bytes any bytes (not text: no encoding is assumed).
/// @return 2 * bytes.size() characters from [0-9a-f]. Never throws except std::bad_alloc. Pure,
///         thread-safe.
inline std::string to_hex(std::string_view bytes) {
  constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

}  // namespace mesh::support
