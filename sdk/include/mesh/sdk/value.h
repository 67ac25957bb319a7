// Nox Mesh SDK — Value: the JSON-shaped data that crosses the plugin boundary (resource
// properties, observed state, plugin config). The SDK owns this type so that no third-party JSON
// type (simdjson, Boost.JSON) becomes part of the plugin ABI; see
// docs/decisions (the "own Value type" record). The host parses JSON with simdjson and TOML with
// toml++ and converts into Value.
//
// Objects keep insertion order and unique keys (the host's parser rejects duplicates).
// Thread safety: a Value is a plain value type; const access from several threads is safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace mesh::sdk {

class Value {
 public:
  using Array = std::vector<Value>;
  using Member = std::pair<std::string, Value>;
  using Object = std::vector<Member>;
  enum class Kind { Null, Bool, Int, Double, String, Array, Object };

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(static_cast<std::int64_t>(i)) {}
  Value(std::int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(Array a) : v_(std::move(a)) {}
  Value(Object o) : v_(std::move(o)) {}

  /// An empty object `{}`.
  static Value object() { return Value(Object{}); }
  /// An empty array `[]`.
  static Value array() { return Value(Array{}); }

  Kind kind() const noexcept { return static_cast<Kind>(v_.index()); }
  bool is_null() const noexcept { return kind() == Kind::Null; }
  bool is_bool() const noexcept { return kind() == Kind::Bool; }
  bool is_int() const noexcept { return kind() == Kind::Int; }
  bool is_double() const noexcept { return kind() == Kind::Double; }
  bool is_number() const noexcept { return is_int() || is_double(); }
  bool is_string() const noexcept { return kind() == Kind::String; }
  bool is_array() const noexcept { return kind() == Kind::Array; }
  bool is_object() const noexcept { return kind() == Kind::Object; }

  /// Typed access. Precondition: the kind matches (else std::bad_variant_access is thrown, which
  /// the SDK's boundary wrappers turn into an Internal error).
  bool as_bool() const { return std::get<bool>(v_); }
  std::int64_t as_int() const { return std::get<std::int64_t>(v_); }
  double as_double() const {
    return is_int() ? static_cast<double>(std::get<std::int64_t>(v_)) : std::get<double>(v_);
  }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  /// The string, to change or move from (a reader taking a parsed value apart, e.g. the host
  /// moving a resource's id into its ResourceId). Same precondition as the const overload.
  std::string& as_string() { return std::get<std::string>(v_); }
  const Array& as_array() const { return std::get<Array>(v_); }
  Array& as_array() { return std::get<Array>(v_); }
  const Object& as_object() const { return std::get<Object>(v_); }
  Object& as_object() { return std::get<Object>(v_); }

  /// Member lookup on an object; nullptr when absent or when this is not an object. O(n).
  const Value* find(std::string_view key) const noexcept {
    if (!is_object()) return nullptr;
    for (const auto& [k, v] : std::get<Object>(v_))
      if (k == key) return &v;
    return nullptr;
  }
  /// Sets (replacing) a member; turns a null Value into an object first.
  Value& set(std::string key, Value value) {
    if (is_null()) v_ = Object{};
    auto& obj = std::get<Object>(v_);
    for (auto& [k, v] : obj)
      if (k == key) { v = std::move(value); return v; }
    obj.emplace_back(std::move(key), std::move(value));
    return obj.back().second;
  }
  /// Removes a member if present; returns whether it was there.
  bool erase(std::string_view key) {
    if (!is_object()) return false;
    auto& obj = std::get<Object>(v_);
    for (auto it = obj.begin(); it != obj.end(); ++it)
      if (it->first == key) { obj.erase(it); return true; }
    return false;
  }

  /// Convenience getters with a fallback when absent or of another kind.
  std::string get_string(std::string_view key, std::string fallback = {}) const {
    const Value* v = find(key);
    return v && v->is_string() ? v->as_string() : fallback;
  }
  bool get_bool(std::string_view key, bool fallback) const {
    const Value* v = find(key);
    return v && v->is_bool() ? v->as_bool() : fallback;
  }
  std::int64_t get_int(std::string_view key, std::int64_t fallback) const {
    const Value* v = find(key);
    return v && v->is_int() ? v->as_int() : fallback;
  }

  /// Deep equality. Objects compare as sets of members (order does not matter); an Int and a
  /// Double compare equal when numerically equal.
  friend bool operator==(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
      if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
      return a.as_double() == b.as_double();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
      case Kind::Object: {
        const auto& x = a.as_object();
        const auto& y = b.as_object();
        if (x.size() != y.size()) return false;
        for (const auto& [k, v] : x) {
          const Value* w = b.find(k);
          if (!w || !(v == *w)) return false;
        }
        return true;
      }
      default:
        return a.v_ == b.v_;
    }
  }
  friend bool operator!=(const Value& a, const Value& b) { return !(a == b); }

  /// Compact JSON text (RFC 8259): members in insertion order, strings escaped, doubles with 17
  /// significant digits. Never throws except std::bad_alloc.
  std::string to_json() const {
    std::string out;
    write_json(out);
    return out;
  }
  void write_json(std::string& out) const {
    switch (kind()) {
      case Kind::Null: out += "null"; break;
      case Kind::Bool: out += as_bool() ? "true" : "false"; break;
      case Kind::Int: out += std::to_string(as_int()); break;
      case Kind::Double: {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.17g", std::get<double>(v_));
        out += buf;
        break;
      }
      case Kind::String: write_json_string(out, as_string()); break;
      case Kind::Array: {
        out += '[';
        bool first = true;
        for (const auto& v : as_array()) {
          if (!first) out += ',';
          first = false;
          v.write_json(out);
        }
        out += ']';
        break;
      }
      case Kind::Object: {
        out += '{';
        bool first = true;
        for (const auto& [k, v] : as_object()) {
          if (!first) out += ',';
          first = false;
          write_json_string(out, k);
          out += ':';
          v.write_json(out);
        }
        out += '}';
        break;
      }
    }
  }
  /// Appends `s` as a JSON string literal (quotes, escapes for `"`, `\` and control characters).
  /// A byte that does not begin a well-formed UTF-8 sequence (RFC 3629: no overlong forms, no
  /// surrogates, nothing above U+10FFFF) is written as \ufffd, so the text is valid JSON
  /// (RFC 8259 requires UTF-8) whatever the string holds: backend output in a report's reason, a
  /// header echoed in an error. Well-formed text is copied unchanged.
  static void write_json_string(std::string& out, std::string_view s) {
    out += '"';
    for (std::size_t i = 0; i < s.size();) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c >= 0x80) {
        const std::size_t n = utf8_length(s, i);
        if (n == 0) {
          out += "\\ufffd";
          ++i;
        } else {
          out.append(s.data() + i, n);
          i += n;
        }
        continue;
      }
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
    }
    out += '"';
  }

 private:
  /// Length of the well-formed UTF-8 sequence at s[i] (a byte >= 0x80), or 0 when there is none
  /// (the Unicode standard's table 3-7).
  static std::size_t utf8_length(std::string_view s, std::size_t i) noexcept {
    const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = at(i);
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
      n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 3;
      if (c == 0xe0) lo = 0xa0;  // no overlong forms
      if (c == 0xed) hi = 0x9f;  // no surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 4;
      if (c == 0xf0) lo = 0x90;  // no overlong forms
      if (c == 0xf4) hi = 0x8f;  // nothing above U+10FFFF
    } else {
      return 0;
    }
    if (s.size() - i < n || at(i + 1) < lo || at(i + 1) > hi) return 0;
    for (std::size_t k = 2; k < n; ++k)
      if (at(i + k) < 0x80 || at(i + k) > 0xbf) return 0;
    return n;
  }

  std::variant<std::monostate, bool, std::int64_t, double, std::string, Array, Object> v_;
};

/// Appends the canonical JSON text of `value` to `out` (see canonical_json). Never throws except
/// std::bad_alloc. Recursion depth is the value's nesting depth.
inline void write_canonical_json(std::string& out, const Value& value) {
  switch (value.kind()) {
    case Value::Kind::Array: {
      out += '[';
      bool first = true;
      for (const auto& e : value.as_array()) {
        if (!first) out += ',';
        first = false;
        write_canonical_json(out, e);
      }
      out += ']';
      break;
    }
    case Value::Kind::Object: {
      std::vector<const Value::Member*> members;
      members.reserve(value.as_object().size());
      for (const auto& m : value.as_object()) members.push_back(&m);
      std::sort(members.begin(), members.end(),
                [](const Value::Member* a, const Value::Member* b) { return a->first < b->first; });
      out += '{';
      bool first = true;
      for (const auto* m : members) {
        if (!first) out += ',';
        first = false;
        Value::write_json_string(out, m->first);
        out += ':';
        write_canonical_json(out, m->second);
      }
      out += '}';
      break;
    }
    default:
      value.write_json(out);
  }
}

/// The canonical JSON text of `value`: one text for one value, whatever the order its object
/// members were set in, so that it can be hashed. It is Value::to_json with:
/// - the members of every object, at every depth, sorted by key in byte order (the keys' UTF-8
///   bytes compared as unsigned, a prefix first: "" < "A" < "B" < "a" < "a b" < "ab" < "é");
///   arrays keep their order;
/// - no whitespace anywhere;
/// - strings (keys and values) as Value::write_json_string writes them: `"` and `\` escaped,
///   \n \r \t \b \f for those controls, other bytes below 0x20 as \u00XX (lower-case hex),
///   everything else — `/`, DEL, well-formed UTF-8 — copied, and each byte that does not begin
///   a well-formed UTF-8 sequence written as \ufffd;
/// - numbers as Value::write_json writes them: an Int in decimal, a Double with printf's
///   "%.17g" (2.0 is `2`, 0.1 is `0.10000000000000001`, -0.0 is `-0`, 1e300 is
///   `1.0000000000000001e+300`), so an Int and a Double of the same number give different text.
/// Module digests (`mesh deploy`, the fleet library) and the container provider's configuration
/// hash are SHA-256 of this text, stored and compared across versions: the output must stay
/// byte-identical forever (a different canonical form would be a new function). Pure;
/// thread-safe for a `value` nobody is changing. Never throws except std::bad_alloc.
inline std::string canonical_json(const Value& value) {
  std::string out;
  write_canonical_json(out, value);
  return out;
}

}  // namespace mesh::sdk
