#include "mesh/common/json.h"

#include <simdjson.h>

#include <algorithm>
#include <string>
#include <unordered_set>

namespace mesh::common {
namespace {

using sdk::ErrorCode;
using sdk::Value;

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
      const bool big = obj.size() > 16;
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

}  // namespace

sdk::Result<Value> parse_json(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "document is " + std::to_string(text.size()) + " bytes, over the limit of " +
                         std::to_string(limits.max_bytes) + " bytes");
  if (!simdjson::validate_utf8(text.data(), text.size()))
    return sdk::fail(ErrorCode::InvalidArgument, "document is not valid UTF-8");
  // One parser per thread: reusing it keeps its buffers warm (the declaration hot path).
  thread_local simdjson::dom::parser parser;
  // simdjson counts the document itself as a level.
  if (parser.max_depth() != limits.max_depth + 1) {
    if (auto e = parser.allocate(std::max<std::size_t>(text.size(), 4096), limits.max_depth + 1))
      return sdk::fail(ErrorCode::Internal, std::string("JSON parser: ") + simdjson::error_message(e));
  }
  simdjson::padded_string padded(text);
  simdjson::dom::element root;
  auto err = parser.parse(padded).get(root);
  if (err == simdjson::DEPTH_ERROR)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "nesting deeper than " + std::to_string(limits.max_depth) + " levels");
  if (err)
    return sdk::fail(ErrorCode::InvalidArgument,
                     std::string("not valid JSON: ") + simdjson::error_message(err));
  std::string path;
  return convert(root, path);
}

}  // namespace mesh::common
