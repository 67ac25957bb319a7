// Nox Mesh SDK — schemas: declarative descriptions of a resource's properties or of a plugin's
// config table (after fluent-bit's config maps and Terraform's schema-first resources). The host
// validates input against the schema before plugin code sees it, and generates docs from it.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/sdk/duration.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::sdk {

/// The JSON shape an attribute accepts.
enum class ValueType {
  String,     ///< JSON string (UTF-8)
  Bool,       ///< JSON true/false
  Int,        ///< JSON integer (int64)
  Number,     ///< JSON number (int or double)
  StringList, ///< JSON array of strings
  StringMap,  ///< JSON object whose values are strings
  Any,        ///< anything; the plugin validates it itself
  /// JSON string in the SDK's duration grammar (mesh/sdk/duration.h: "500ms", "15s", "2m",
  /// "1h", "1d"); min/max are in milliseconds.
  Duration,
  /// JSON string "<digits><unit>" with unit B, KiB, MiB, GiB, TiB (powers of 1024) or kB, MB,
  /// GB, TB (powers of 1000), e.g. "64MiB", "512B"; no sign, no space, no fraction, at most 15
  /// digits, at most 2^63-1 bytes (parse_size). min/max are in bytes.
  Size,
};

constexpr const char* to_string(ValueType t) noexcept {
  switch (t) {
    case ValueType::String: return "string";
    case ValueType::Bool: return "bool";
    case ValueType::Int: return "integer";
    case ValueType::Number: return "number";
    case ValueType::StringList: return "list of strings";
    case ValueType::StringMap: return "map of strings";
    case ValueType::Any: return "any";
    case ValueType::Duration: return "duration";
    case ValueType::Size: return "size";
  }
  return "any";
}

/// Parses a size as ValueType::Size describes it ("64MiB" → 67108864, "1kB" → 1000, "0B" → 0).
/// Returns bytes. Errors: InvalidArgument "'<text>' is not a size like 512B, 64MiB, 1GB" (no
/// path) for anything else, or a value above 2^63-1 bytes. Pure function; thread-safe.
inline Result<std::int64_t> parse_size(std::string_view text) {
  auto bad = [&] {
    return fail(ErrorCode::InvalidArgument,
                "'" + std::string(text) + "' is not a size like 512B, 64MiB, 1GB");
  };
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 15) return bad();
  std::int64_t n = 0;
  for (std::size_t i = 0; i < digits; ++i) n = n * 10 + (text[i] - '0');  // ≤ 15 digits: no overflow
  const std::string_view unit = text.substr(digits);
  std::int64_t per = 0;
  if (unit == "B") per = 1;
  else if (unit == "KiB") per = std::int64_t{1} << 10;
  else if (unit == "MiB") per = std::int64_t{1} << 20;
  else if (unit == "GiB") per = std::int64_t{1} << 30;
  else if (unit == "TiB") per = std::int64_t{1} << 40;
  else if (unit == "kB") per = 1000;
  else if (unit == "MB") per = 1000'000;
  else if (unit == "GB") per = 1000'000'000;
  else if (unit == "TB") per = 1000'000'000'000;
  else return bad();
  if (n > std::numeric_limits<std::int64_t>::max() / per) return bad();
  return n * per;
}

/// How a resource id must look, per provider schema (Schema::id_format). The declaration check
/// refuses an id that does not match before any provider sees it.
enum class IdFormat {
  Any,           ///< any non-empty string without control characters (the generic rule)
  AbsolutePath,  ///< starts with '/'; no "." or ".." component, no "//", no trailing '/' (except "/")
  UnitName,      ///< systemd unit name: [A-Za-z0-9:_.\\@-]+ with a unit suffix ("nginx.service"),
                 ///< at most 255 bytes (systemd.unit(5), "Description")
  PackageName,   ///< Debian package name: [a-z0-9][a-z0-9+.-]+, at least 2 characters
                 ///< (Debian Policy §5.6.1), no architecture qualifier
  ContainerName, ///< [a-zA-Z0-9][a-zA-Z0-9_.-]* (podman's and docker's name rule), ≤ 255 bytes
};

constexpr const char* to_string(IdFormat f) noexcept {
  switch (f) {
    case IdFormat::Any: return "any";
    case IdFormat::AbsolutePath: return "absolute_path";
    case IdFormat::UnitName: return "unit_name";
    case IdFormat::PackageName: return "package_name";
    case IdFormat::ContainerName: return "container_name";
  }
  return "any";
}

/// Checks `id` against `format`. Returns the reason when it does not match ("must be an absolute
/// path without '.' or '..' components"), or "" when it does. Pure function; thread-safe.
inline std::string check_id_format(IdFormat format, std::string_view id) {
  auto in = [](char c, std::string_view set) { return set.find(c) != std::string_view::npos; };
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  switch (format) {
    case IdFormat::Any: return "";
    case IdFormat::AbsolutePath: {
      const char* why = "must be an absolute path without '.' or '..' components, '//' or a trailing '/'";
      if (id.empty() || id[0] != '/') return why;
      if (id == "/") return "";
      if (id.back() == '/') return why;
      std::size_t pos = 1;
      while (pos <= id.size()) {
        std::size_t next = id.find('/', pos);
        if (next == std::string_view::npos) next = id.size();
        const std::string_view part = id.substr(pos, next - pos);
        if (part.empty() || part == "." || part == "..") return why;
        pos = next + 1;
      }
      return "";
    }
    case IdFormat::UnitName: {
      const char* why = "must be a systemd unit name like nginx.service (letters, digits, ':_.\\@-', with a type suffix)";
      if (id.empty() || id.size() > 255) return why;
      for (char c : id)
        if (!alnum(c) && !in(c, ":_.\\@-")) return why;
      const auto dot = id.rfind('.');
      if (dot == std::string_view::npos || dot == 0 || dot + 1 == id.size()) return why;
      return "";
    }
    case IdFormat::PackageName: {
      const char* why = "must be a Debian package name like nginx (a-z, 0-9, '+', '-', '.'; 2 or more characters, starting with a letter or digit; no architecture qualifier)";
      auto lower = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
      if (id.size() < 2 || !lower(id[0])) return why;
      for (char c : id)
        if (!lower(c) && !in(c, "+-.")) return why;
      return "";
    }
    case IdFormat::ContainerName: {
      const char* why = "must be a container name (a letter or digit, then letters, digits, '_', '.', '-')";
      if (id.empty() || id.size() > 255 || !alnum(id[0])) return why;
      for (char c : id)
        if (!alnum(c) && !in(c, "_.-")) return why;
      return "";
    }
  }
  return "";
}

/// One property (or config key). Aggregate: brace-initialise the leading members in order.
struct Attribute {
  std::string name;
  ValueType type = ValueType::String;
  bool required = false;
  /// What it means, with its unit when it has one ("settle window, in seconds").
  std::string description;
  /// For String attributes: the only accepted values; empty means any string.
  std::vector<std::string> allowed = {};
  /// Value used when absent (documentation and `apply_defaults`); nullopt means "no default".
  std::optional<Value> default_value = std::nullopt;
  /// Inclusive bounds: for Int and Number the value, for Duration milliseconds, for Size bytes.
  /// nullopt means unbounded. Ignored for other types.
  std::optional<double> min = std::nullopt;
  std::optional<double> max = std::nullopt;
  /// Computed by the provider (shown by describe and in read-back), never declared: a declared
  /// value is refused ("is read-only").
  bool read_only = false;
  /// A secret: its value is never logged, echoed in a report or quoted in an error message
  /// (messages about it say "(sensitive value)"); redact() replaces it.
  bool sensitive = false;
};

/// A schema: a named set of attributes plus groups of mutually exclusive attributes.
struct Schema {
  /// For providers the resource type ("file"); for configs the table name ("transport").
  std::string name;
  std::string description;
  std::vector<Attribute> attributes;
  /// Each inner list names attributes of which at most one may be given (`content`,
  /// `content_base64`).
  std::vector<std::vector<std::string>> exclusive = {};
  /// For provider schemas: how a resource id must look (checked by the declaration check).
  IdFormat id_format = IdFormat::Any;

  const Attribute* find(std::string_view attr) const noexcept {
    for (const auto& a : attributes)
      if (a.name == attr) return &a;
    return nullptr;
  }
};

/// The text an error message shows for a declared value: the value itself (quoted) unless the
/// attribute is sensitive.
inline std::string shown_value(const Attribute& a, const std::string& v) {
  return a.sensitive ? std::string("(sensitive value)") : "'" + v + "'";
}

/// Checks `object` against `schema` and returns EVERY problem (empty when it conforms): it must
/// be a JSON object; every member must be a known attribute, not read-only, of the right type
/// (one of `allowed` when set; a Duration or Size in its grammar; within min/max); every
/// required attribute must be present; at most one of each exclusive group. Errors are
/// InvalidArgument with `path = prefix + "." + name` (prefix is e.g. "properties"), in member
/// order then attribute order then group order. Unknown keys name the valid ones. A sensitive
/// attribute's value is never quoted. Pure function; thread-safe.
inline std::vector<Error> validate_all(const Schema& schema, const Value& object,
                                       std::string_view prefix) {
  std::vector<Error> out;
  const std::string pre = prefix.empty() ? std::string() : std::string(prefix) + ".";
  auto add = [&](std::string message, std::string path) {
    out.push_back(Error{ErrorCode::InvalidArgument, std::move(message), std::move(path)});
  };
  if (!object.is_object()) {
    add("must be an object", std::string(prefix));
    return out;
  }
  for (const auto& [key, value] : object.as_object()) {
    const Attribute* a = schema.find(key);
    if (!a) {
      std::string valid;
      for (const auto& at : schema.attributes)
        if (!at.read_only) valid += (valid.empty() ? "" : ", ") + at.name;
      add("unknown " + std::string(prefix == "properties" ? "property" : "key") + " '" + key +
              "' (valid: " + (valid.empty() ? "none" : valid) + ")",
          pre + key);
      continue;
    }
    if (a->read_only) {
      add("is read-only (computed by the provider); remove it", pre + key);
      continue;
    }
    bool ok = false;
    switch (a->type) {
      case ValueType::String: ok = value.is_string(); break;
      case ValueType::Bool: ok = value.is_bool(); break;
      case ValueType::Int: ok = value.is_int(); break;
      case ValueType::Number: ok = value.is_number(); break;
      case ValueType::StringList:
        ok = value.is_array();
        if (ok)
          for (const auto& e : value.as_array()) ok = ok && e.is_string();
        break;
      case ValueType::StringMap:
        ok = value.is_object();
        if (ok)
          for (const auto& [k, e] : value.as_object()) ok = ok && e.is_string();
        break;
      case ValueType::Any: ok = true; break;
      case ValueType::Duration:
      case ValueType::Size: ok = value.is_string(); break;
    }
    if (!ok) {
      const bool as_text = a->type == ValueType::Duration || a->type == ValueType::Size;
      add(std::string("must be a ") + to_string(a->type) +
              (a->type == ValueType::Duration ? " string like 500ms, 15s, 2m, 1h"
               : as_text                      ? " string like 512B, 64MiB, 1GB"
                                              : ""),
          pre + key);
      continue;
    }
    if (a->type == ValueType::String && !a->allowed.empty()) {
      bool found = false;
      std::string list;
      for (const auto& s : a->allowed) {
        found = found || s == value.as_string();
        list += (list.empty() ? "" : ", ") + s;
      }
      if (!found) add(shown_value(*a, value.as_string()) + " is not one of: " + list, pre + key);
      continue;
    }
    std::optional<double> number;
    std::string unit;
    if (a->type == ValueType::Duration) {
      auto d = parse_duration(value.as_string());
      if (!d) {
        add(a->sensitive ? "(sensitive value) is not a duration like 500ms, 15s, 2m, 1h"
                         : d.error().message,
            pre + key);
        continue;
      }
      number = static_cast<double>(d->count());
      unit = "ms";
    } else if (a->type == ValueType::Size) {
      auto s = parse_size(value.as_string());
      if (!s) {
        add(a->sensitive ? "(sensitive value) is not a size like 512B, 64MiB, 1GB" : s.error().message,
            pre + key);
        continue;
      }
      number = static_cast<double>(*s);
      unit = " bytes";
    } else if (a->type == ValueType::Int) {
      number = static_cast<double>(value.as_int());
    } else if (a->type == ValueType::Number) {
      number = value.as_double();
    }
    if (number) {
      auto bound = [&](double b) {
        std::string t = std::to_string(b);
        if (b == static_cast<double>(static_cast<std::int64_t>(b)))
          t = std::to_string(static_cast<std::int64_t>(b));
        return t + unit;
      };
      if (a->min && *number < *a->min)
        add("must be at least " + bound(*a->min) + (a->sensitive ? "" : " (is " + bound(*number) + ")"),
            pre + key);
      else if (a->max && *number > *a->max)
        add("must be at most " + bound(*a->max) + (a->sensitive ? "" : " (is " + bound(*number) + ")"),
            pre + key);
    }
  }
  for (const auto& a : schema.attributes)
    if (a.required && !object.find(a.name)) add("is required", pre + a.name);
  for (const auto& group : schema.exclusive) {
    std::string seen;
    for (const auto& name : group) {
      if (!object.find(name)) continue;
      if (!seen.empty()) add("cannot be given together with '" + seen + "'", pre + name);
      else seen = name;
    }
  }
  return out;
}

/// validate_all, stopping at the first error (for config tables, where the first is enough).
/// Returns success or that first error. Pure function; thread-safe.
inline Result<void> validate_against(const Schema& schema, const Value& object,
                                     std::string_view prefix) {
  auto errors = validate_all(schema, object, prefix);
  if (errors.empty()) return {};
  return fail(std::move(errors.front()));
}

/// A copy of `object` (a properties object) with the value of every sensitive attribute
/// replaced by the string "(sensitive value)": what may be logged, rendered or reported.
/// Non-objects are returned unchanged. Pure function; thread-safe.
inline Value redact(const Schema& schema, Value object) {
  if (!object.is_object()) return object;
  for (auto& [key, value] : object.as_object())
    if (const Attribute* a = schema.find(key); a && a->sensitive) value = Value("(sensitive value)");
  return object;
}

/// Returns a copy of `object` with each absent attribute that has a default filled in.
inline Value apply_defaults(const Schema& schema, Value object) {
  if (object.is_null()) object = Value::object();
  for (const auto& a : schema.attributes)
    if (a.default_value && !object.find(a.name)) object.set(a.name, *a.default_value);
  return object;
}

}  // namespace mesh::sdk
