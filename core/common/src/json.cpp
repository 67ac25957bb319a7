#include "mesh/common/json.h"

#include <boost/json/stream_parser.hpp>
#include <simdjson.h>

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_set>

namespace mesh::common {
namespace {

using sdk::ErrorCode;
using sdk::Value;

/// Documents up to this size — the broker's default message limit, so every pushed declaration
/// under the default — are parsed by the thread's cached parser (which then keeps buffers for at
/// most this size: ~14 MB allocated, touched only as far as the documents reached); larger ones
/// (a local `mesh-host apply` of 20,000 files is 2.8 MB, a large state.json) by a parser of
/// their own, released when parse_json returns.
constexpr std::size_t kCachedParserBytes = 1u << 20;

sdk::Result<Value> convert(simdjson::dom::element el, std::string& path) {
  using simdjson::dom::element_type;
  switch (el.type()) {
    case element_type::NULL_VALUE: return Value();
    case element_type::BOOL: return Value(bool(el.get_bool().value_unsafe()));
    case element_type::INT64: return Value(std::int64_t(el.get_int64().value_unsafe()));
    case element_type::UINT64: {
      // Above INT64_MAX: keep as double rather than wrap around.
      return Value(double(el.get_uint64().value_unsafe()));
    }
    case element_type::DOUBLE: return Value(double(el.get_double().value_unsafe()));
    case element_type::STRING: return Value(std::string(el.get_string().value_unsafe()));
    case element_type::ARRAY: {
      Value::Array out;
      std::size_t i = 0;
      const auto base = path.size();
      simdjson::dom::array arr;
      if (el.get_array().get(arr)) return sdk::fail(ErrorCode::Internal, "JSON array access", path);
      out.reserve(arr.size());  // O(1) from simdjson's tape: one allocation per array
      for (auto child : arr) {
        path += '[';
        path += std::to_string(i++);
        path += ']';
        auto v = convert(child, path);
        if (!v) return v;
        out.push_back(std::move(*v));
        path.resize(base);
      }
      return Value(std::move(out));
    }
    case element_type::OBJECT: {
      Value::Object out;
      simdjson::dom::object obj;
      if (el.get_object().get(obj)) return sdk::fail(ErrorCode::Internal, "JSON object access", path);
      const auto base = path.size();
      std::unordered_set<std::string_view> seen;
      const std::size_t members = obj.size();
      out.reserve(members);  // one allocation per object, not one per doubling
      const bool big = members > 16;
      for (auto field : obj) {
        std::string_view key = field.key;
        bool dup = false;
        if (big) {
          dup = !seen.insert(key).second;
        } else {
          for (const auto& m : out) dup = dup || m.first == key;
        }
        if (dup)
          return sdk::fail(ErrorCode::InvalidArgument, "duplicate key '" + std::string(key) + "'",
                           path.empty() ? std::string(key) : path + "." + std::string(key));
        if (!path.empty()) path += '.';
        path += key;
        auto v = convert(field.value, path);
        if (!v) return v;
        out.emplace_back(std::string(key), std::move(*v));
        path.resize(base);
      }
      return Value(std::move(out));
    }
  }
  return sdk::fail(ErrorCode::Internal, "unknown JSON element type", path);
}

// Where the syntax error in `text` is, as " at line L, column C" (1-based; the column counts
// characters), or "" when it cannot be told. Only on the error path: simdjson's DOM API reports
// no offset, Boost.JSON's parser stops at the first byte it cannot take.
std::string error_position(std::string_view text) {
  boost::json::parse_options opt;
  opt.max_depth = 1u << 20;  // depth is reported by simdjson; only the syntax error is wanted
  boost::json::stream_parser p({}, opt);
  boost::system::error_code ec;
  std::size_t offset = p.write_some(text.data(), text.size(), ec);
  if (!ec) {
    if (offset < text.size()) {
      // A complete value followed by more: the first byte after it that is not white space.
      while (offset < text.size() && (text[offset] == ' ' || text[offset] == '\t' || text[offset] == '\n' ||
                                      text[offset] == '\r'))
        ++offset;
      if (offset == text.size()) return "";
    } else {
      p.finish(ec);
      if (!ec) return "";
      offset = text.size();  // the text ended too early
    }
  }
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++column;
    }
  }
  return " at line " + std::to_string(line) + ", column " + std::to_string(column);
}

}  // namespace

sdk::Result<Value> parse_json(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "document is " + std::to_string(text.size()) + " bytes, over the limit of " +
                         std::to_string(limits.max_bytes) + " bytes");
  if (text.size() >= 3 && text.substr(0, 3) == "\xef\xbb\xbf")
    return sdk::fail(ErrorCode::InvalidArgument,
                     "document starts with a UTF-8 byte order mark (BOM), which JSON does not allow: save it as "
                     "UTF-8 without a BOM");
  if (!simdjson::validate_utf8(text.data(), text.size()))
    return sdk::fail(ErrorCode::InvalidArgument, "document is not valid UTF-8");
  // One parser per thread: reusing it keeps its buffers warm (the hot path: messages and
  // declarations of up to kCachedParserBytes). Its buffers are ~14 bytes per byte of the largest
  // document it took (the tape alone 8), so a larger document gets a parser of its own, freed on
  // return: a 2.8 MB declaration kept 36 MB allocated for the life of the process before
  // (docs/benchmarks.md, "First apply: memory").
  thread_local simdjson::dom::parser cached;
  std::optional<simdjson::dom::parser> own;
  const bool large = text.size() > kCachedParserBytes;
  simdjson::dom::parser& parser = large ? own.emplace(text.size()) : cached;
  // simdjson counts the document itself as a level.
  if (large || parser.max_depth() != limits.max_depth + 1) {
    const std::size_t capacity = large ? text.size() : std::max<std::size_t>(text.size(), 4096);
    if (auto e = parser.allocate(capacity, limits.max_depth + 1))
      return sdk::fail(ErrorCode::Internal, std::string("JSON parser: ") + simdjson::error_message(e));
  }  // else parse() grows the cached parser to the text's size (at most kCachedParserBytes)
  simdjson::padded_string padded(text);
  simdjson::dom::element root;
  auto err = parser.parse(padded).get(root);
  if (err == simdjson::DEPTH_ERROR)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "nesting deeper than " + std::to_string(limits.max_depth) + " levels");
  if (err)
    return sdk::fail(ErrorCode::InvalidArgument,
                     std::string("not valid JSON") + error_position(text) + ": " + simdjson::error_message(err));
  std::string path;
  return convert(root, path);
}

}  // namespace mesh::common
