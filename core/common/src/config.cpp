#include "mesh/common/config.h"

#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

#include <sstream>

#include "mesh/common/fs.h"
#include "mesh/common/text.h"

namespace mesh::common {
namespace {

using sdk::ErrorCode;
using sdk::Value;

sdk::Result<Value> convert(const toml::node& node, const std::string& key,
                           std::map<std::string, int, std::less<>>& lines,
                           const std::string& file) {
  if (!key.empty()) lines[key] = static_cast<int>(node.source().begin.line);
  if (auto t = node.as_table()) {
    Value obj = Value::object();
    for (auto&& [k, v] : *t) {
      std::string sub = key.empty() ? std::string(k.str()) : key + "." + std::string(k.str());
      auto c = convert(v, sub, lines, file);
      if (!c) return c;
      obj.set(std::string(k.str()), std::move(*c));
    }
    return obj;
  }
  if (auto a = node.as_array()) {
    Value arr = Value::array();
    std::size_t i = 0;
    for (auto&& v : *a) {
      auto c = convert(v, key + "[" + std::to_string(i++) + "]", lines, file);
      if (!c) return c;
      arr.as_array().push_back(std::move(*c));
    }
    return arr;
  }
  if (auto s = node.as_string()) return Value(s->get());
  if (auto i = node.as_integer()) return Value(static_cast<std::int64_t>(i->get()));
  if (auto f = node.as_floating_point()) return Value(f->get());
  if (auto b = node.as_boolean()) return Value(b->get());
  return sdk::fail(ErrorCode::InvalidArgument,
                   file + ":" + std::to_string(node.source().begin.line) + ": " + key +
                       ": dates and times are not accepted here",
                   key);
}

}  // namespace

sdk::Result<ConfigFile> ConfigFile::parse(std::string_view text, const std::string& path) {
  ConfigFile cf;
  cf.path_ = path;
  try {
    toml::table tbl = toml::parse(text, path);
    auto v = convert(tbl, "", cf.lines_, path);
    if (!v) return sdk::fail(v.error());
    cf.root_ = std::move(*v);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << path << ":" << e.source().begin.line << ":" << e.source().begin.column
        << ": parse error: " << e.description();
    return sdk::fail(ErrorCode::InvalidArgument, msg.str());
  }
  return cf;
}

sdk::Result<ConfigFile> ConfigFile::load(const std::string& path) {
  auto text = read_file(path, 1 << 20);
  if (!text) return sdk::fail(text.error().code, "config " + text.error().message);
  return parse(*text, path);
}

Value ConfigFile::table(std::string_view name) const {
  const Value* cur = &root_;
  std::string_view rest = name;
  while (!rest.empty()) {
    auto dot = rest.find('.');
    auto part = rest.substr(0, dot);
    cur = cur->find(part);
    if (!cur) return Value::object();
    rest = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
  }
  return *cur;
}

sdk::Error ConfigFile::error_at(std::string_view key, const std::string& message) const {
  std::string where = path_;
  // Use the line of the key, or of its nearest enclosing table.
  std::string k(key);
  while (!k.empty()) {
    auto it = lines_.find(k);
    if (it != lines_.end()) {
      where += ":" + std::to_string(it->second);
      break;
    }
    auto cut = k.find_last_of(".[");
    if (cut == std::string::npos) break;
    k.resize(cut);
  }
  return sdk::Error{ErrorCode::InvalidArgument, where + ": " + std::string(key) + ": " + message,
                    std::string(key)};
}

sdk::Result<std::vector<std::string>> ConfigFile::string_or_list(std::string_view key,
                                                                const Value& value) const {
  std::vector<std::string> out;
  if (value.is_string()) {
    if (value.as_string().empty()) return sdk::fail(error_at(key, "must not be empty"));
    out.push_back(value.as_string());
    return out;
  }
  if (!value.is_array()) return sdk::fail(error_at(key, "must be a string or a list of strings"));
  if (value.as_array().empty()) return sdk::fail(error_at(key, "must not be empty"));
  for (std::size_t i = 0; i < value.as_array().size(); ++i) {
    const Value& v = value.as_array()[i];
    const std::string entry = "entry " + std::to_string(i);
    if (!v.is_string()) return sdk::fail(error_at(key, entry + " must be a string"));
    if (v.as_string().empty()) return sdk::fail(error_at(key, entry + " must not be empty"));
    for (std::size_t j = 0; j < out.size(); ++j)
      if (out[j] == v.as_string())
        return sdk::fail(error_at(key, entry + " ('" + printable(v.as_string()) + "') repeats entry " +
                                           std::to_string(j)));
    out.push_back(v.as_string());
  }
  return out;
}

sdk::Result<void> ConfigFile::check_tables(const std::vector<std::string>& allowed) const {
  for (const auto& [k, v] : root_.as_object()) {
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == k;
    if (!ok) {
      std::string valid;
      for (const auto& a : allowed) valid += (valid.empty() ? "" : ", ") + a;
      return sdk::fail(error_at(k, std::string(v.is_object() ? "unknown table" : "unknown key") +
                                       " (valid tables: " + valid + ")"));
    }
    if (!v.is_object()) return sdk::fail(error_at(k, "must be a table"));
  }
  return {};
}

sdk::Result<Value> ConfigFile::check_table(std::string_view name, const sdk::Schema& schema,
                                           const std::vector<std::string>& skip) const {
  Value t = table(name);
  if (!t.is_object()) return sdk::fail(error_at(name, "must be a table"));
  Value filtered = Value::object();
  for (const auto& [k, v] : t.as_object()) {
    bool skipped = false;
    for (const auto& s : skip) skipped = skipped || s == k;
    if (!skipped) filtered.set(k, v);
  }
  auto ok = sdk::validate_against(schema, filtered, name);
  if (!ok) {
    const auto& e = ok.error();
    return sdk::fail(error_at(e.path.empty() ? std::string(name) : e.path, e.message));
  }
  return sdk::apply_defaults(schema, std::move(filtered));
}

}  // namespace mesh::common
