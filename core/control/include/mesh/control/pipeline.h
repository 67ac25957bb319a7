// Pipeline files (decision record 61): one TOML file per pipeline in the directory named by
// control.toml `[pipelines] dir`, put there by the control host's operator (never uploaded over
// the API). `<dir>/<name>.toml`:
//
//   description = "build, publish and deploy hello"   # optional
//
//   [[stage]]
//   plugin = "build"                 # a stage plugin loaded by mesh-control
//   name = "build"                   # optional, default: the plugin's name; unique in the file
//   command = ["dpkg-deb", "--build", "/srv/src/hello", "hello_{{version}}_all.deb"]
//   artifacts = ["*.deb"]
//
//   [[stage]]
//   plugin = "deploy"
//   module = "hello"
//
// Every key but `plugin` and `name` of a stage is one of the stage's settings, checked against the
// stage plugin's settings schema: an unknown key or a wrong type names the file, the line and the
// key, as control.toml does.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/sdk/result.h"
#include "mesh/sdk/schema.h"
#include "mesh/sdk/value.h"

namespace mesh::control {

/// One `[[stage]]` of a pipeline file.
struct PipelineStage {
  std::string name;    ///< unique in the pipeline; names its artifacts for later stages
  std::string plugin;  ///< the stage plugin that runs it
  sdk::Value settings = sdk::Value::object();  ///< the other keys, checked, defaults filled in
};

struct Pipeline {
  std::string name;  ///< the file's name less `.toml`
  std::string file;  ///< the path it was read from (messages)
  std::string description;
  std::vector<PipelineStage> stages;  ///< in the order of the file; at least one
};

/// What the parser asks about a stage's `plugin`: the schema of its settings, or nullptr when no
/// stage plugin of that name is loaded (the file is then refused naming the plugin). Called on the
/// caller's thread.
using StageSettingsLookup = std::function<const sdk::Schema*(std::string_view plugin)>;

/// True for a pipeline name: `[a-z0-9][a-z0-9._-]{0,62}` (so it is a file name, never a path).
bool valid_pipeline_name(std::string_view name) noexcept;

/// Parses the text of a pipeline file.
/// @param text the TOML text; `path` names it in messages; `name` is the pipeline's name.
/// @param settings see StageSettingsLookup.
/// @return the pipeline with each stage's settings checked and defaults filled in.
/// Errors: InvalidArgument "<path>:<line>: <key>: <message>" with the key path ("stage[1].comand")
/// in `path`: a TOML syntax error, an unknown top-level key, no stage, a stage without `plugin`,
/// an unknown plugin, a repeated or malformed stage name, a setting the stage does not know or of
/// the wrong type. Thread-safe.
sdk::Result<Pipeline> parse_pipeline(std::string_view text, const std::string& path, const std::string& name,
                                     const StageSettingsLookup& settings);

/// Reads `<dir>/<name>.toml` and parses it (parse_pipeline). The file is opened relative to the
/// opened directory with O_NOFOLLOW and both are checked with fstat on their descriptors: the
/// directory must be owned by this process's user or root and not writable by group or others;
/// the file must be a regular file (not a symbolic link), owned by this process's user or root
/// and not writable by group or others (decision record 75).
/// Errors: InvalidArgument on path "name" for an invalid name, and for a file or directory that
/// fails those checks (naming it and why); NotFound naming the pipeline and the directory when
/// there is no such file; parse_pipeline's errors.
sdk::Result<Pipeline> load_pipeline(const std::string& dir, const std::string& name,
                                    const StageSettingsLookup& settings);

}  // namespace mesh::control
