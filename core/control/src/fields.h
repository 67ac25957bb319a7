// Typed access to the members of a JSON request body, with errors that name the field.
// Internal to mesh_control.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::control::detail {

class Fields {
 public:
  explicit Fields(const sdk::Value& object, std::string prefix = {})
      : obj_(object), prefix_(std::move(prefix)) {}

  std::string path(std::string_view key) const {
    return prefix_.empty() ? std::string(key) : prefix_ + "." + std::string(key);
  }
  sdk::Error error(std::string_view key, std::string message) const {
    return sdk::Error{sdk::ErrorCode::InvalidArgument, std::move(message), path(key)};
  }

  sdk::Result<std::optional<std::string>> opt_string(std::string_view key) const {
    const sdk::Value* v = obj_.find(key);
    if (!v || v->is_null()) return std::optional<std::string>();
    if (!v->is_string()) return sdk::fail(error(key, "must be a string"));
    return std::optional<std::string>(v->as_string());
  }
  sdk::Result<std::string> string(std::string_view key) const {
    auto v = opt_string(key);
    if (!v) return sdk::fail(v.error());
    if (!*v) return sdk::fail(error(key, "is required"));
    return std::move(**v);
  }
  sdk::Result<std::string> string_or(std::string_view key, std::string fallback) const {
    auto v = opt_string(key);
    if (!v) return sdk::fail(v.error());
    return *v ? std::move(**v) : std::move(fallback);
  }
  sdk::Result<std::optional<std::int64_t>> opt_int(std::string_view key, std::int64_t min,
                                                   std::int64_t max = INT64_MAX) const {
    const sdk::Value* v = obj_.find(key);
    if (!v || v->is_null()) return std::optional<std::int64_t>();
    if (!v->is_int()) return sdk::fail(error(key, "must be an integer"));
    if (v->as_int() < min || v->as_int() > max)
      return sdk::fail(error(key, max == INT64_MAX ? "must be at least " + std::to_string(min)
                                                   : "must be between " + std::to_string(min) +
                                                         " and " + std::to_string(max)));
    return std::optional<std::int64_t>(v->as_int());
  }
  sdk::Result<std::int64_t> integer(std::string_view key, std::int64_t min,
                                    std::int64_t max = INT64_MAX) const {
    auto v = opt_int(key, min, max);
    if (!v) return sdk::fail(v.error());
    if (!*v) return sdk::fail(error(key, "is required"));
    return **v;
  }
  sdk::Result<std::int64_t> integer_or(std::string_view key, std::int64_t fallback,
                                       std::int64_t min, std::int64_t max = INT64_MAX) const {
    auto v = opt_int(key, min, max);
    if (!v) return sdk::fail(v.error());
    return v->value_or(fallback);
  }
  sdk::Result<bool> bool_or(std::string_view key, bool fallback) const {
    const sdk::Value* v = obj_.find(key);
    if (!v || v->is_null()) return fallback;
    if (!v->is_bool()) return sdk::fail(error(key, "must be true or false"));
    return v->as_bool();
  }
  sdk::Result<std::vector<std::string>> string_list(std::string_view key) const {
    std::vector<std::string> out;
    const sdk::Value* v = obj_.find(key);
    if (!v || v->is_null()) return out;
    if (!v->is_array()) return sdk::fail(error(key, "must be a list of strings"));
    const auto& a = v->as_array();
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_string())
        return sdk::fail(error(std::string(key) + "[" + std::to_string(i) + "]", "must be a string"));
      out.push_back(a[i].as_string());
    }
    return out;
  }

 private:
  const sdk::Value& obj_;
  std::string prefix_;
};

}  // namespace mesh::control::detail
