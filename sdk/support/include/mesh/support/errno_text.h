// Nox Mesh plugin support — the text of an errno value, thread-safe.
//
// Part of NoxMesh::support (header-only, links nothing): for plugins and programs that print a
// system call's failure as "open /etc/x: Permission denied".
#pragma once

#include <string.h>  // strerror_r

#include <string>

namespace mesh::support {
namespace detail {

// strerror_r has two signatures: the GNU one (g++ and clang++ on glibc define _GNU_SOURCE)
// returns the text, which may or may not be in `buf`; the XSI one returns 0 or an error number
// and always writes `buf`. Overloading on the return type picks whichever the C library declares.
inline std::string strerror_result(const char* text, const char*, int) { return text ? text : ""; }
inline std::string strerror_result(int rc, const char* buf, int err) {
  return rc == 0 ? std::string(buf) : "Unknown error " + std::to_string(err);
}

}  // namespace detail

/// The C library's message for the errno value `err` ("Permission denied" for EACCES, "Unknown
/// error 4711" for a value it does not know), through strerror_r(3), never strerror(3), whose
/// buffer other threads may overwrite.
/// @param err an errno value (any int; not read from `errno`: pass it, saved before any other
///            call could change it).
/// @return the message, without a trailing newline; never empty. Never throws except
///         std::bad_alloc. Thread-safe (the text is built in a buffer of the call).
inline std::string errno_text(int err) {
  char buf[256] = {};
  return detail::strerror_result(strerror_r(err, buf, sizeof buf), buf, err);
}

}  // namespace mesh::support
