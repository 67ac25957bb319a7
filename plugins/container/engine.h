// The engine's command line (podman first, docker compatible): building argv, running it with the
// configured global arguments and time limit, and turning its exit and stderr into errors that
// quote the engine's own words.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "mesh/sdk/cancel.h"
#include "mesh/sdk/resource.h"
#include "mesh/sdk/result.h"
#include "process.h"

namespace mesh::plugins::container {

/// The `[provider.container]` table, parsed.
struct EngineConfig {
  std::string engine = "podman";  ///< "podman" or "docker"
  std::string binary;             ///< program to run; the engine's name (PATH) when empty
  std::vector<std::string> global_args;  ///< placed before every subcommand
  std::vector<std::string> run_args;     ///< appended to every run/create
  std::chrono::milliseconds settle{2000};
  std::chrono::milliseconds timeout{300000};  ///< per engine command
  std::chrono::milliseconds stop_timeout{10000};

  const std::string& program() const { return binary.empty() ? engine : binary; }
  bool docker() const { return engine == "docker"; }
};

/// The most telling line of a failed command: the last line of stderr starting with "Error"
/// (podman's `Error: …`, docker's `Error response from daemon: …`), else the last non-empty line
/// of stderr, else of stdout, else "exit code N".
std::string engine_message(const ProcessOutcome& outcome);

/// Non-empty stderr lines of a command that succeeded (podman's warnings, such as "Port mappings
/// have been discarded …"), joined with "; ".
std::string engine_warnings(const ProcessOutcome& outcome);

/// True when a failed inspect/rm said the object does not exist ("no such container", "no such
/// object", "no such image", "image not known"; case-insensitive).
bool says_not_found(const ProcessOutcome& outcome);

/// Runs engine commands. Not thread-safe (the engine calls a provider from one thread at a time).
class Engine {
 public:
  explicit Engine(EngineConfig config) : config_(std::move(config)) {}
  const EngineConfig& config() const { return config_; }

  /// `<program> <global_args…> <args…>`, bounded by config().timeout and `cancel`.
  /// Errors: Unavailable (cannot start the program), Timeout, Cancelled. A non-zero exit is not
  /// an error here: the caller decides.
  sdk::Result<ProcessOutcome> run(const std::vector<std::string>& args,
                                  const sdk::CancelToken* cancel);

  /// Like run(), but a non-zero exit becomes `code` with "<what>: <engine_message>".
  sdk::Result<ProcessOutcome> run_checked(const std::vector<std::string>& args,
                                          const sdk::CancelToken* cancel, const std::string& what,
                                          sdk::ErrorCode code = sdk::ErrorCode::Failed);

  /// Asks the engine for its version once (`podman version --format json`, `docker version
  /// --format {{json .}}`); remembers success only, so an engine that comes up later is found.
  /// Errors: Unavailable with the engine's own message.
  sdk::Result<void> ensure_available(const sdk::CancelToken* cancel);

  /// `container inspect NAME` → State (see state_from_inspect) or nullopt when there is none.
  sdk::Result<std::optional<sdk::State>> inspect_container(const std::string& name,
                                                           const sdk::CancelToken* cancel);

  /// The ID the reference resolves to in local storage, or nullopt when no local image has it.
  sdk::Result<std::optional<std::string>> local_image_id(const std::string& reference,
                                                         const sdk::CancelToken* cancel);

  /// The last `lines` lines the container wrote (stdout, then stderr), trimmed; "" when the
  /// engine cannot say (this is only used to explain another failure).
  std::string logs_tail(const std::string& name, int lines, const sdk::CancelToken* cancel);

 private:
  EngineConfig config_;
  bool available_ = false;
};

}  // namespace mesh::plugins::container
