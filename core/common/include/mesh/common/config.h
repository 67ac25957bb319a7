// TOML configuration files (toml++), checked table by table against sdk::Schema so that an
// unknown key or a wrong type is an error naming the file, the line and the key — never a silent
// default. Plugin config tables are checked against the plugin's own config_schema().
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/sdk/result.h"
#include "mesh/sdk/schema.h"
#include "mesh/sdk/value.h"

namespace mesh::common {

class ConfigFile {
 public:
  /// Parses `path`. Errors: NotFound / PermissionDenied (unreadable), InvalidArgument
  /// ("host.toml:3:9: parse error: ..."). Dates and times in TOML are refused (no key uses them).
  static sdk::Result<ConfigFile> load(const std::string& path);
  /// Parses TOML text (for tests); `path` is used in messages only.
  static sdk::Result<ConfigFile> parse(std::string_view text, const std::string& path);

  const std::string& path() const noexcept { return path_; }
  const sdk::Value& root() const noexcept { return root_; }
  /// The table named `name` (`transport`, `provider.file`), or an empty object when absent.
  sdk::Value table(std::string_view name) const;

  /// Refuses top-level keys/tables other than `allowed` ("unknown table [timer] (valid: ...)").
  sdk::Result<void> check_tables(const std::vector<std::string>& allowed) const;
  /// Checks table `name` against `schema` (ignoring keys in `skip`, e.g. "plugin"), with defaults
  /// filled in on success. Errors are InvalidArgument: "<file>:<line>: <table>.<key>: <message>",
  /// path "<table>.<key>".
  sdk::Result<sdk::Value> check_table(std::string_view name, const sdk::Schema& schema,
                                      const std::vector<std::string>& skip = {}) const;
  /// `value`, the value of key path `key` ("plugins.dir"), as a non-empty list of non-empty
  /// strings, in order: a string is a list of one. Errors are InvalidArgument with file and line
  /// (error_at): "must be a string or a list of strings", "must not be empty", "entry 1 must be a
  /// string", "entry 1 must not be empty", "entry 2 ('/a') repeats entry 0". Thread-safe.
  sdk::Result<std::vector<std::string>> string_or_list(std::string_view key, const sdk::Value& value) const;
  /// Formats an error about key path `key` ("transport.servers") with file and line.
  sdk::Error error_at(std::string_view key, const std::string& message) const;

 private:
  std::string path_;
  sdk::Value root_;
  std::map<std::string, int, std::less<>> lines_;  // "table.key" → 1-based line
};

}  // namespace mesh::common
