#include "build_stage.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <mutex>
#include <set>
#include <system_error>

#include "build_runner.h"
#include "mesh/sdk/duration.h"
#include "mesh/support/errno_text.h"

namespace mesh::stages::build {
namespace {

namespace fs = std::filesystem;
using sdk::Attribute;
using sdk::ErrorCode;
using sdk::Value;
using sdk::ValueType;

constexpr const char* kDefaultMaxArtifact = "1GiB";
constexpr const char* kDefaultMaxTotal = "4GiB";

// The work directories of the builds running in this process (so a configure never removes one).
std::mutex active_mutex;
std::set<std::string> active_dirs;

// Keys the pipeline runner adds to every stage's params (never in a pipeline file).
const char* const kReserved[] = {"version", "build_user"};

// The tool's last lines, on one line ("; last lines: a; b"): the error is a one-line summary
// (shown by `mesh pipeline show` and in the run's `error`); every line is in the stage's log.
std::string last_lines(const std::vector<std::string>& tail) {
  if (tail.empty()) return " (no output)";
  std::string out = "; last lines:";
  bool first = true;
  for (const auto& l : tail) {
    std::string line = l.substr(0, 400);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    out += (first ? " " : "; ") + line;
    first = false;
  }
  return first ? " (no output)" : out;
}

// Keeps the newest `keep` run directories under `dir` (named by run id, zero-padded).
void prune_runs(const fs::path& dir, std::int64_t keep) {
  std::error_code ec;
  std::vector<fs::path> runs;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) runs.push_back(it->path());
  std::sort(runs.begin(), runs.end());
  while (static_cast<std::int64_t>(runs.size()) > keep) {
    fs::remove_all(runs.front(), ec);
    runs.erase(runs.begin());
  }
}

}  // namespace

sdk::Result<std::string> substitute(const std::string& text, const std::string& version, std::uint64_t run,
                                    const std::string& pipeline, const std::string& path) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    auto open = text.find("{{", i);
    if (open == std::string::npos) {
      out += text.substr(i);
      break;
    }
    out += text.substr(i, open - i);
    auto close = text.find("}}", open + 2);
    if (close == std::string::npos)
      return sdk::fail(ErrorCode::InvalidArgument, "'{{' without '}}' in '" + text + "'", path);
    std::string name = text.substr(open + 2, close - open - 2);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (name == "version") out += version;
    else if (name == "run") out += std::to_string(run);
    else if (name == "pipeline") out += pipeline;
    else
      return sdk::fail(ErrorCode::InvalidArgument,
                       "unknown placeholder '{{" + name + "}}' (valid: {{version}}, {{run}}, {{pipeline}})", path);
    i = close + 2;
  }
  return out;
}

const sdk::Schema& BuildStage::config_schema() const noexcept {
  static const sdk::Schema s{
      "build",
      "runs a pipeline's build command without a shell, as [pipelines] build_user, and keeps its artifacts",
      {Attribute{"work_root", ValueType::String, false,
                 "where each build's fresh work directory is made (must be reachable by the build user)", {},
                 Value("/tmp")},
       Attribute{"keep_runs", ValueType::Int, false, "artifacts of this many newest runs are kept", {}, Value(20),
                 1.0, 100000.0}}};
  return s;
}

const sdk::Schema& BuildStage::settings_schema() const noexcept {
  static const sdk::Schema s{
      "build",
      "a build step of a pipeline",
      {Attribute{"command", ValueType::StringList, true,
                 "the program and its arguments (no shell); a bare name is looked up in /usr/local/bin:/usr/bin:/bin"},
       Attribute{"artifacts", ValueType::StringList, false,
                 "patterns of files of the work directory to keep (fnmatch, e.g. \"*.deb\"); each must match", {},
                 Value::array()},
       Attribute{"timeout", ValueType::Duration, false, "time limit of the command", {}, Value("30m"), 1000.0,
                 7.0 * 24 * 3600 * 1000},
       Attribute{"environment", ValueType::StringMap, false, "more environment variables of the command", {},
                 Value::object()},
       Attribute{"max_artifact_size", ValueType::Size, false,
                 "largest artifact kept (default 1GiB, the upload limit of mesh publish); a larger one fails the stage",
                 {}, Value(kDefaultMaxArtifact)},
       Attribute{"max_artifacts_total", ValueType::Size, false,
                 "most bytes of artifacts this stage keeps for a run, all files together", {},
                 Value(kDefaultMaxTotal)}}};
  return s;
}

sdk::Result<void> BuildStage::do_configure(const Value& config) {
  work_root_ = config.get_string("work_root", "/tmp");
  keep_runs_ = config.get_int("keep_runs", 20);
  std::error_code ec;
  if (work_root_.empty() || work_root_[0] != '/' || !fs::is_directory(work_root_, ec))
    return sdk::fail(ErrorCode::InvalidArgument, "must be an existing absolute directory", "work_root");
  remove_leftovers();
  return {};
}

// A `mesh-build-*` directory of work_root that no build of this process uses was left by a
// mesh-control that died during a build (kill -9, a crash, a power cut): only this stage makes
// them, and one mesh-control owns its work_root (decision record 74), so it is removed.
void BuildStage::remove_leftovers() {
  std::error_code ec;
  std::vector<fs::path> leftovers;
  for (fs::directory_iterator it(work_root_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("mesh-build-", 0) != 0) continue;
    std::error_code sec;
    if (it->symlink_status(sec).type() != fs::file_type::directory) continue;
    leftovers.push_back(it->path());
  }
  std::lock_guard lock(active_mutex);
  for (const auto& dir : leftovers) {
    if (active_dirs.count(dir.string())) continue;
    std::error_code rec;
    fs::remove_all(dir, rec);  // never follows a link
    if (rec) log().warn("build: cannot remove the leftover work directory " + dir.string() + ": " + rec.message());
    else log().info("build: removed the leftover work directory " + dir.string() +
                    " (of a build whose mesh-control died; no build of this one uses it)");
  }
}

struct BuildStage::Prepared {
  BuildSpec spec;
  std::vector<std::string> extra;
  std::vector<std::string> patterns;
  std::string timeout_text;
  std::uint64_t max_artifact = 0;
  std::uint64_t max_total = 0;
  std::string max_artifact_text, max_total_text;
};

sdk::Result<BuildStage::Prepared> BuildStage::prepare(const sdk::StageInput& in, std::uint64_t run) const {
  // The settings, less what the runner adds.
  Value settings = Value::object();
  for (const auto& [k, v] : in.params.as_object())
    if (std::find(std::begin(kReserved), std::end(kReserved), k) == std::end(kReserved)) settings.set(k, v);
  if (auto ok = sdk::validate_against(settings_schema(), settings, ""); !ok) return sdk::fail(ok.error());
  settings = sdk::apply_defaults(settings_schema(), std::move(settings));
  const std::string version = in.params.get_string("version");

  Prepared p;
  BuildSpec& spec = p.spec;
  const auto& command = settings.find("command")->as_array();
  if (command.empty()) return sdk::fail(ErrorCode::InvalidArgument, "must name a program", "command");
  for (std::size_t i = 0; i < command.size(); ++i) {
    MESH_TRY(arg, substitute(command[i].as_string(), version, run, in.pipeline, "command[" + std::to_string(i) + "]"));
    spec.command.push_back(std::move(arg));
  }
  p.extra = {"MESH_VERSION=" + version, "MESH_RUN=" + std::to_string(run), "MESH_PIPELINE=" + in.pipeline};
  for (const auto& [k, v] : settings.find("environment")->as_object()) {
    MESH_TRY(value, substitute(v.as_string(), version, run, in.pipeline, "environment." + k));
    p.extra.push_back(k + "=" + value);
  }
  for (const auto& pattern : settings.find("artifacts")->as_array()) p.patterns.push_back(pattern.as_string());
  p.timeout_text = settings.get_string("timeout", "30m");
  MESH_TRY(timeout, sdk::parse_duration(p.timeout_text));
  spec.timeout = timeout;
  p.max_artifact_text = settings.get_string("max_artifact_size", kDefaultMaxArtifact);
  MESH_TRY(max_artifact, sdk::parse_size(p.max_artifact_text));
  p.max_artifact = static_cast<std::uint64_t>(max_artifact);
  p.max_total_text = settings.get_string("max_artifacts_total", kDefaultMaxTotal);
  MESH_TRY(max_total, sdk::parse_size(p.max_total_text));
  p.max_total = static_cast<std::uint64_t>(max_total);
  MESH_TRY(user, resolve_build_user(in.params.get_string("build_user")));
  spec.user = std::move(user);
  MESH_TRY(exe, find_program(spec.command[0]));
  (void)exe;
  return p;
}

sdk::Result<void> BuildStage::do_check(const sdk::StageInput& in, sdk::StageContext& /*context*/) {
  MESH_TRY(prepared, prepare(in, 0));
  (void)prepared;
  return {};
}

sdk::Result<sdk::StageOutput> BuildStage::do_run(const sdk::StageInput& in, sdk::StageContext& context,
                                                 const sdk::CancelToken& cancel) {
  const std::uint64_t run = context.run_id();
  MESH_TRY(prepared, prepare(in, run));
  BuildSpec spec = std::move(prepared.spec);
  const std::vector<std::string>& extra = prepared.extra;
  const std::vector<std::string>& patterns = prepared.patterns;

  // A fresh work directory the build user owns, removed at the end whatever happens.
  std::string tmpl = (fs::path(work_root_) / "mesh-build-XXXXXX").string();
  if (!::mkdtemp(tmpl.data()))
    return sdk::fail(ErrorCode::Failed, "cannot make a work directory in " + work_root_ + ": " +
                                            support::errno_text(errno));
  struct Remove {
    std::string dir;
    explicit Remove(std::string d) : dir(std::move(d)) {
      std::lock_guard lock(active_mutex);
      active_dirs.insert(dir);
    }
    ~Remove() {
      std::error_code ec;
      fs::remove_all(dir, ec);
      std::lock_guard lock(active_mutex);
      active_dirs.erase(dir);
    }
  } remove{tmpl};
  spec.work_dir = tmpl;
  spec.environment = build_environment(spec.user, spec.work_dir, extra);

  context.log("$ " + describe_command(spec.command) + "   (as " + spec.user.name + ", in a fresh directory)");
  MESH_TRY(outcome, run_build(spec, [&](std::string_view line) { context.log(line); }, cancel));
  const std::string what = "build command '" + describe_command(spec.command) + "'";
  if (outcome.cancelled) return sdk::fail(ErrorCode::Cancelled, what + " was cancelled" + last_lines(outcome.tail));
  if (outcome.timed_out)
    return sdk::fail(ErrorCode::Timeout,
                     what + " ran out of its time limit of " + prepared.timeout_text + last_lines(outcome.tail));
  if (outcome.exit_code != 0)
    return sdk::fail(ErrorCode::Failed,
                     what + (outcome.exit_code < 0 ? " was killed by signal " + std::to_string(-outcome.exit_code)
                                                   : " exited with status " + std::to_string(outcome.exit_code)) +
                         last_lines(outcome.tail));

  const std::string raise_single = " (max_artifact_size = \"" + prepared.max_artifact_text +
                                   "\"; raise it in the stage's settings)";
  auto found = collect_artifacts(spec.work_dir, patterns, prepared.max_artifact);
  if (!found) {
    sdk::Error e = found.error();
    if (e.code == ErrorCode::FailedPrecondition) e.code = ErrorCode::Failed;
    e.message = what + " succeeded but " + e.message + (e.path == "max_artifact_size" ? raise_single : "") +
                last_lines(outcome.tail);
    return sdk::fail(e);
  }
  // Every bound is checked before anything is copied.
  std::uint64_t total = 0;
  for (const auto& a : *found) total += a.size;
  if (total > prepared.max_total)
    return sdk::fail(ErrorCode::Failed,
                     what + " succeeded but its " + std::to_string(found->size()) + " artifacts have " +
                         std::to_string(total) + " bytes together, over the limit of " +
                         std::to_string(prepared.max_total) + " bytes (max_artifacts_total = \"" +
                         prepared.max_total_text + "\"; raise it in the stage's settings); nothing was kept",
                     "max_artifacts_total");
  // Kept beyond this stage (the context's work directory goes when run() returns).
  char id[24];
  std::snprintf(id, sizeof id, "%012llu", static_cast<unsigned long long>(run));
  const fs::path base = fs::path(host().state_dir.empty() ? work_root_ : host().state_dir) / "artifacts";
  const fs::path keep = base / id;
  std::error_code ec;
  fs::remove_all(keep, ec);
  fs::create_directories(keep, ec);
  if (ec) return sdk::fail(ErrorCode::Failed, "cannot make " + keep.string() + ": " + ec.message());
  ::chmod(base.c_str(), 0700);
  Value::Array files;
  auto drop_kept = [&] {
    std::error_code rec;
    fs::remove_all(keep, rec);
  };
  for (const auto& a : *found) {
    const fs::path to = keep / a.name;
    fs::create_directories(to.parent_path(), ec);
    if (ec) {
      drop_kept();
      return sdk::fail(ErrorCode::Failed, "cannot keep artifact " + a.name + ": " + ec.message());
    }
    // The copy is bounded too, and must be the bytes hashed.
    auto copied = copy_bounded(a.path, to.string(), prepared.max_artifact, a.name);
    if (!copied) {
      drop_kept();
      sdk::Error e = copied.error();
      e.code = ErrorCode::Failed;
      if (e.path == "max_artifact_size") e.message += raise_single;
      return sdk::fail(e);
    }
    if (copied->first != a.sha256 || copied->second != a.size) {
      drop_kept();
      return sdk::fail(ErrorCode::Failed, "artifact " + a.name + " changed while it was kept; nothing was kept");
    }
    Value f = Value::object();
    f.set("name", a.name);
    f.set("path", to.string());
    f.set("sha256", a.sha256);
    f.set("size", static_cast<std::int64_t>(a.size));
    files.push_back(std::move(f));
    context.log("artifact " + a.name + " sha256 " + a.sha256 + " (" + std::to_string(a.size) + " bytes)");
  }
  prune_runs(base, keep_runs_);
  sdk::StageOutput out;
  out.artifacts.set("files", Value(std::move(files)));
  out.artifacts.set("command", describe_command(spec.command));
  out.artifacts.set("elapsed_ms", static_cast<std::int64_t>(outcome.elapsed.count()));
  return out;
}

}  // namespace mesh::stages::build
