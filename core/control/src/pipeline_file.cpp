// Pipeline files (mesh/control/pipeline.h, decision record 61).
#include "mesh/control/pipeline.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "mesh/common/config.h"

namespace mesh::control {
namespace {

using sdk::ErrorCode;
using sdk::Value;

bool name_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'; }

bool valid_stage_name(std::string_view s) {
  if (s.empty() || s.size() > 63 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9'))) return false;
  for (char c : s)
    if (!name_char(c)) return false;
  return true;
}

}  // namespace

bool valid_pipeline_name(std::string_view s) noexcept {
  if (s.empty() || s.size() > 63 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9'))) return false;
  for (char c : s)
    if (!name_char(c) && c != '.') return false;
  return true;
}

sdk::Result<Pipeline> parse_pipeline(std::string_view text, const std::string& path, const std::string& name,
                                     const StageSettingsLookup& settings) {
  MESH_TRY(file, common::ConfigFile::parse(text, path));
  const Value& root = file.root();
  Pipeline p;
  p.name = name;
  p.file = path;
  for (const auto& [k, v] : root.as_object()) {
    if (k == "description") {
      if (!v.is_string()) return sdk::fail(file.error_at(k, "must be a string"));
      p.description = v.as_string();
    } else if (k != "stage") {
      return sdk::fail(file.error_at(k, "unknown key '" + k + "' (valid: description, stage)"));
    }
  }
  const Value* stages = root.find("stage");
  if (!stages || !stages->is_array() || stages->as_array().empty())
    return sdk::fail(file.error_at(stages ? "stage" : "",
                                   stages ? "must be [[stage]] tables, at least one"
                                          : "no [[stage]]: a pipeline has at least one stage"));
  std::set<std::string> names;
  for (std::size_t i = 0; i < stages->as_array().size(); ++i) {
    const Value& s = stages->as_array()[i];
    const std::string at = "stage[" + std::to_string(i) + "]";
    if (!s.is_object()) return sdk::fail(file.error_at(at, "must be a table ([[stage]])"));
    PipelineStage stage;
    const Value* plugin = s.find("plugin");
    if (!plugin) return sdk::fail(file.error_at(at, "no 'plugin': name the stage plugin that runs it"));
    if (!plugin->is_string() || plugin->as_string().empty())
      return sdk::fail(file.error_at(at + ".plugin", "must be a stage plugin's name"));
    stage.plugin = plugin->as_string();
    const sdk::Schema* schema = settings ? settings(stage.plugin) : nullptr;
    if (!schema)
      return sdk::fail(file.error_at(at + ".plugin", "no stage plugin '" + stage.plugin +
                                                         "' is loaded (control.toml [stages] load)"));
    stage.name = stage.plugin;
    if (const Value* n = s.find("name")) {
      if (!n->is_string() || !valid_stage_name(n->as_string()))
        return sdk::fail(file.error_at(at + ".name", "must be a stage name ([a-z0-9][a-z0-9_-]{0,62})"));
      stage.name = n->as_string();
    }
    if (!valid_stage_name(stage.name))
      return sdk::fail(file.error_at(at + ".name", "'" + stage.name + "' is not a stage name: set 'name'"));
    if (!names.insert(stage.name).second)
      return sdk::fail(file.error_at(at + ".name", "stage '" + stage.name +
                                                       "' is named twice (give one of them another 'name')"));
    Value rest = Value::object();
    for (const auto& [k, v] : s.as_object())
      if (k != "plugin" && k != "name") rest.set(k, v);
    if (auto ok = sdk::validate_against(*schema, rest, at); !ok) {
      const auto& e = ok.error();
      return sdk::fail(file.error_at(e.path.empty() ? at : e.path, e.message));
    }
    stage.settings = sdk::apply_defaults(*schema, std::move(rest));
    p.stages.push_back(std::move(stage));
  }
  return p;
}

sdk::Result<Pipeline> load_pipeline(const std::string& dir, const std::string& name,
                                    const StageSettingsLookup& settings) {
  if (!valid_pipeline_name(name))
    return sdk::fail(ErrorCode::InvalidArgument,
                     "'" + name.substr(0, 64) + "' is not a pipeline name ([a-z0-9][a-z0-9._-]{0,62})", "name");
  if (dir.empty())
    return sdk::fail(ErrorCode::FailedPrecondition,
                     "no pipelines here: control.toml has no [pipelines] dir", "name");
  const std::string path = (std::filesystem::path(dir) / (name + ".toml")).string();
  // The file decides the build command and what is deployed under the operator's name: only a
  // file that no one but mesh-control's own user (or root) can have written is run. The checks
  // are made on the opened descriptors (fstat), the file opened relative to the checked
  // directory with O_NOFOLLOW: nothing can be swapped between the check and the read.
  auto refuse = [&](const std::string& what, const std::string& why) {
    return sdk::fail(ErrorCode::InvalidArgument,
                     what + ": " + why + ": not run (a pipeline file and its directory must be owned by "
                                         "mesh-control's user or root and writable by no one else)",
                     "name");
  };
  auto owner_ok = [](const struct stat& st) { return st.st_uid == ::geteuid() || st.st_uid == 0; };
  auto describe_mode = [](mode_t m) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
    return std::string(buf);
  };
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return sdk::fail(ErrorCode::NotFound, "no pipeline '" + name + "' (cannot open the directory " + dir + ": " +
                                              std::strerror(errno) + ")",
                     "name");
  struct stat dst {};
  if (::fstat(dfd, &dst) != 0 || !S_ISDIR(dst.st_mode)) {
    ::close(dfd);
    return refuse(path, "the pipelines directory " + dir + " is not a directory");
  }
  if (!owner_ok(dst)) {
    ::close(dfd);
    return refuse(path, "the pipelines directory " + dir + " is owned by uid " + std::to_string(dst.st_uid));
  }
  if (dst.st_mode & (S_IWGRP | S_IWOTH)) {
    ::close(dfd);
    return refuse(path, "the pipelines directory " + dir + " is writable by group or others (mode " +
                            describe_mode(dst.st_mode) + ")");
  }
  const std::string file = name + ".toml";
  const int fd = ::openat(dfd, file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  const int open_errno = errno;
  ::close(dfd);
  if (fd < 0) {
    if (open_errno == ENOENT)
      return sdk::fail(ErrorCode::NotFound, "no pipeline '" + name + "' (no file " + path + ")", "name");
    if (open_errno == ELOOP) return refuse(path, "a symbolic link");
    return sdk::fail(ErrorCode::NotFound, "cannot read " + path + ": " + std::strerror(open_errno), "name");
  }
  struct stat st {};
  std::string why;
  if (::fstat(fd, &st) != 0) why = std::string("cannot stat it: ") + std::strerror(errno);
  else if (!S_ISREG(st.st_mode)) why = "not a regular file";
  else if (!owner_ok(st)) why = "owned by uid " + std::to_string(st.st_uid);
  else if (st.st_mode & (S_IWGRP | S_IWOTH)) why = "writable by group or others (mode " + describe_mode(st.st_mode) + ")";
  if (!why.empty()) {
    ::close(fd);
    return refuse(path, why);
  }
  std::string text;
  {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int e = errno;
        ::close(fd);
        return sdk::fail(ErrorCode::NotFound, "cannot read " + path + ": " + std::strerror(e), "name");
      }
      if (n == 0) break;
      text.append(buf, static_cast<std::size_t>(n));
      if (text.size() > (1u << 20)) {
        ::close(fd);
        return sdk::fail(ErrorCode::InvalidArgument, path + ": larger than 1 MiB", "name");
      }
    }
    ::close(fd);
  }
  return parse_pipeline(text, path, name, settings);
}

}  // namespace mesh::control
