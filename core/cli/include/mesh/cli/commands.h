// Commands of `mesh` registered from their own files (core/cli/src/cmd_<area>.cpp): each adds
// its subcommands to the app before parsing and, when one of them was given, sets `run`, which
// run_cli calls after the global options are read. Internal to mesh_cli.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>

#include "mesh/cli/client.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::cli {

/// What a registered command is given when it runs. References valid for the call only.
struct CommandEnv {
  /// Connects with the global options; on failure prints the error to `err`, sets `exit_code`
  /// and returns nullptr.
  std::function<std::unique_ptr<Client>(int& exit_code)> connect;
  /// The global --output value ("text", "json", "junit", or another report's name).
  std::string output;
  std::ostream& out;
  std::ostream& err;
  /// Renders a deploy report with the report plugin `--output` names (loaded before the command
  /// runs; not for json). Errors: the plugin's own.
  std::function<sdk::Result<std::string>(const sdk::Value& report, std::int64_t now_ms)> render_report;
};

/// Set by a registered command's parse callback; returns the exit code.
using CommandRun = std::function<int(CommandEnv&)>;

/// `mesh module push|list|show`, `mesh node label`, `mesh assign`, `mesh unassign`,
/// `mesh assignments`, `mesh deploy` (cmd_fleet.cpp). `app` must already have the `node`
/// subcommand. Not thread-safe (called once per run_cli).
void register_fleet_commands(CLI::App& app, CommandRun& run);

/// `mesh content push FILE` (cmd_content.cpp, decision record 111). Not thread-safe (called once
/// per run_cli).
void register_content_commands(CLI::App& app, CommandRun& run);

}  // namespace mesh::cli
