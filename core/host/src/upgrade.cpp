#include "mesh/host/upgrade.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "mesh/common/fs.h"
#include "mesh/common/version_token.h"

namespace mesh::host {

std::string upgrade_dir(const std::string& state_dir) { return state_dir + "/upgrade"; }

sdk::Result<std::optional<StateFields>> read_state_file(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) return std::optional<StateFields>{};
  auto text = common::read_file(path, 64 << 10);
  if (!text) {
    if (text.error().code == sdk::ErrorCode::NotFound) return std::optional<StateFields>{};
    return sdk::fail(text.error());
  }
  StateFields out;
  std::size_t start = 0, line_no = 0;
  while (start < text->size()) {
    std::size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    std::string line = text->substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos || eq == 0)
      return sdk::fail(sdk::ErrorCode::InvalidArgument,
                       path + ":" + std::to_string(line_no) + ": expected key=value, got '" + line.substr(0, 80) + "'");
    out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  if (auto ok = check_state_fields(path, name, out); !ok) return sdk::fail(ok.error());
  return std::optional<StateFields>(std::move(out));
}

sdk::Result<void> check_state_fields(const std::string& path, const std::string& name, const StateFields& fields) {
  struct Rule {
    const char* file;
    std::vector<const char*> versions, decimals;  // required keys of each form
  };
  static const Rule rules[] = {
      {kPendingFile, {"from_version", "to_version"}, {"revision"}},
      {kConfirmedFile, {"version"}, {}},
      {kRolledBackFile, {"failed_version", "restored_version"}, {"failed_revision"}},
      {kStoppedFile, {"failed_version"}, {"failed_revision"}},
  };
  auto bad = [&](const std::string& key, const std::string& why) {
    return sdk::fail(sdk::ErrorCode::InvalidArgument, path + ": " + key + ": " + why);
  };
  for (const auto& r : rules) {
    if (name != r.file) continue;
    for (const char* k : r.versions) {
      auto it = fields.find(k);
      if (it == fields.end()) return bad(k, "missing");
      if (!common::valid_version_token(it->second))
        return bad(k, "'" + it->second.substr(0, 80) + "' is not a version (" + common::kVersionTokenForm + ")");
    }
    for (const char* k : r.decimals) {
      if (fields.find(k) == fields.end()) return bad(k, "missing");
      if (!decimal_field(fields, k)) return bad(k, "'" + fields.at(k).substr(0, 80) + "' is not a decimal number");
    }
  }
  if (fields.count("at_ms") && !decimal_field(fields, "at_ms"))
    return bad("at_ms", "'" + fields.at("at_ms").substr(0, 80) + "' is not a decimal number");
  return {};
}

sdk::Result<void> write_state_file(const std::string& dir, const std::string& name, const StateFields& fields) {
  std::string text;
  for (const auto& [k, v] : fields) {
    if (k.empty() || k.find_first_of("=\n\r") != std::string::npos)
      return sdk::fail(sdk::ErrorCode::InvalidArgument, "state file " + name + ": key '" + k + "' is not a plain name");
    if (v.find_first_of("\n\r") != std::string::npos)
      return sdk::fail(sdk::ErrorCode::InvalidArgument, "state file " + name + ": the value of " + k +
                                                            " holds a line break");
    text += k + "=" + v + "\n";
  }
  if (auto ok = common::make_dirs(dir, 0700); !ok) return ok;
  return common::write_file_atomic(dir + "/" + name, text, 0600);
}

sdk::Result<void> remove_state_file(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return {};
    return sdk::fail(sdk::ErrorCode::Failed, "remove " + path + ": " + std::strerror(errno));
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

std::optional<std::uint64_t> decimal_field(const StateFields& fields, const std::string& key) {
  auto it = fields.find(key);
  if (it == fields.end() || it->second.empty() || it->second.size() > 19) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : it->second) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

}  // namespace mesh::host
