// Text that came from outside the process (a node's report, a broker message, a reply, a file),
// made safe to put in a log line or on an operator's terminal: one helper, used by mesh-host,
// mesh-control and mesh for every such value (docs/security.md "Logs and terminals").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mesh::common {

/// How many bytes of a value a log line or a text view shows by default.
inline constexpr std::size_t kPrintableBytes = 256;

/// `value` as one line of printable text, at most `max_bytes` bytes long before the suffix:
///   - control characters are escaped: `\n`, `\r`, `\t`, the other C0 controls and DEL as `\xNN`
///     (ESC is `\x1b`, NUL `\x00`); the C1 controls (U+0080-U+009F, which some terminals obey like ESC) and the
///     characters that reorder or split lines on screen (U+2028, U+2029, the bidirectional
///     overrides and isolates U+202A-U+202E, U+2066-U+2069, the marks U+200E, U+200F and
///     U+061C — every Bidi_Control character) as `\uNNNN`;
///   - bytes that are not valid UTF-8 as `\xNN`; valid UTF-8 is kept as is;
///   - a backslash is kept as is: applying printable() to its own output changes nothing (a
///     message built from escaped values can be escaped again without doubling), at the price
///     that a literal `\n` in a value reads like an escaped newline (it can never split a line);
///   - when the escaped text would be longer than `max_bytes`, it is cut there (never inside a
///     character or an escape) and `… (N bytes)` is appended, N being the size of `value`.
/// Never throws except std::bad_alloc; thread-safe (pure).
std::string printable(std::string_view value, std::size_t max_bytes = kPrintableBytes);

/// The position of the first character printable() would escape (a control character, a C1
/// control, a line or bidi control, a byte of invalid UTF-8), or std::string_view::npos.
/// For refusing such characters in names and ids. Pure.
std::size_t first_unprintable(std::string_view value) noexcept;

}  // namespace mesh::common
