// `mesh pipeline run NAME --version V [--wait D]` and `mesh pipeline show RUN` (decision record
// 62): the CLI side of the control plane's pipeline runner. Internal to the mesh CLI.
#pragma once

#include <CLI/CLI.hpp>
#include <tl/expected.hpp>

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>

#include "mesh/cli/client.h"
#include "mesh/sdk/value.h"

namespace mesh::cli::pipeline_cmd {

/// A connection failure: the exit code and the message (without "error: ").
struct ConnectError {
  int code;
  std::string message;
};
/// Connects as every other command does (the global options, the identity).
using ConnectFn = std::function<tl::expected<std::unique_ptr<Client>, ConnectError>()>;

/// The commands registered by register_commands().
class PipelineCommands {
 public:
  /// True when one of them was given on the command line (after CLI11 parsed it).
  bool parsed() const;
  /// Runs the one that was given; returns the exit code: 0 (started; or, with --wait, succeeded),
  /// 1 (the run failed), 2 (bad input, refused), 3 (unreachable, or --wait ran out while the run
  /// still ran). `json`: --output json (the run's record as the control plane keeps it).
  int run(const ConnectFn& connect, bool json, std::ostream& out, std::ostream& err);

 private:
  friend std::shared_ptr<PipelineCommands> register_commands(CLI::App& app);
  CLI::App* pipeline_ = nullptr;
  CLI::App* run_ = nullptr;
  CLI::App* show_ = nullptr;
  std::string name_;
  std::string version_;
  std::string wait_;
  std::string run_id_;
};

/// Adds `pipeline run` and `pipeline show` to `app`. The result must outlive app.parse().
std::shared_ptr<PipelineCommands> register_commands(CLI::App& app);

/// A run's record (pipeline.show) as text for people: one line for the run, then one per stage
/// with its outcome, times, error, artifacts and last log lines. Every line printable. Pure.
std::string render_run(const sdk::Value& run, std::size_t log_lines = 10);

}  // namespace mesh::cli::pipeline_cmd
