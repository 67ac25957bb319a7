// `mesh publish FILE.deb` and `mesh repository key` (decision record 59): the CLI side of the
// upload to the control plane's `publish` stage. Internal to the mesh CLI.
#pragma once

#include <CLI/CLI.hpp>
#include <tl/expected.hpp>

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>

#include "mesh/cli/client.h"

namespace mesh::cli {

/// A command that failed: the exit code and the message (without "error: ").
struct CommandError {
  int code;
  std::string message;
};

/// Connects as every other command does (the global options, the identity).
using ConnectFn = std::function<tl::expected<std::unique_ptr<Client>, CommandError>()>;

/// The commands registered by register_publish_commands().
class PublishCommands {
 public:
  /// True when one of them was given on the command line (after CLI11 parsed it).
  bool parsed() const;
  /// Runs the one that was given; returns the exit code. `json`: --output json. Errors are
  /// printed to `err` as "error: ..." lines.
  int run(const ConnectFn& connect, bool json, std::ostream& out, std::ostream& err);

 private:
  friend std::shared_ptr<PublishCommands> register_publish_commands(CLI::App& app);
  CLI::App* publish_ = nullptr;
  CLI::App* repository_ = nullptr;
  CLI::App* repository_key_ = nullptr;
  std::string file_;
  std::string chunk_ = "4MiB";
};

/// Adds `publish FILE` and `repository key` to `app`. The result must outlive app.parse().
std::shared_ptr<PublishCommands> register_publish_commands(CLI::App& app);

}  // namespace mesh::cli
