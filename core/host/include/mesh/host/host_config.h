// mesh-host's TOML configuration (INTERFACE.md "Host config"). Every key is checked: an unknown
// key or a wrong type is an error naming the file, the line and the key.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mesh/common/config.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::host {

/// Default of [limits] max_declaration: 64 MiB, the control plane's default limits.max_assembled.
inline constexpr std::size_t kDefaultMaxDeclaration = std::size_t{64} << 20;
/// The key named by every refusal of a declaration for its size.
inline constexpr const char* kMaxDeclarationKey = "limits.max_declaration";

struct HostConfig {
  std::string path;          ///< the file it came from
  std::string node;          ///< [node] name
  std::string state_dir;     ///< [node] state_dir
  /// [plugins] dir: one directory or a list, searched in order (the first holding a plugin wins).
  std::vector<std::string> plugin_dirs;
  std::vector<std::string> load;  ///< [plugins] load: provider names
  std::string transport_plugin;   ///< [transport] plugin (default "nats")
  sdk::Value transport;           ///< [transport] less `plugin` (checked by the plugin's schema later)
  std::chrono::milliseconds heartbeat{30'000};  ///< [timers] heartbeat
  std::chrono::milliseconds drift{30 * 60'000}; ///< [timers] drift
  std::size_t max_message = 0;    ///< [limits] max_message, bytes; 0 = the broker's max_payload
  /// [limits] max_declaration, bytes: the largest declaration applied (a local `mesh-host apply`
  /// file, or a pushed declaration reassembled from its parts); apart from max_message.
  std::size_t max_declaration = kDefaultMaxDeclaration;
  std::uint64_t min_free_mib = 100;  ///< [briefing] min_free_mib: the briefing's disk check
  std::map<std::string, sdk::Value> provider_config;  ///< [provider.<name>] tables
  std::vector<std::string> deny;  ///< [paths] deny: more paths no provider may manage (path_policy.h)
  std::string control_config;     ///< [paths] control_config: a control.toml whose paths are denied
  /// [metrics] textfile: node-exporter textfile the host writes its figures to (absolute, *.prom,
  /// in an existing directory; docs/metrics.md); "" = none.
  std::string metrics_textfile;
  common::ConfigFile file;        ///< the parsed file, for errors about plugin keys
};

/// Loads and checks `path`. Errors: InvalidArgument "host.toml:7: timers.drfit: unknown key
/// 'drfit' (valid: heartbeat, drift)", NotFound/PermissionDenied for an unreadable file.
/// Durations below 1 s are refused for timers. The node name must be a valid node name.
sdk::Result<HostConfig> load_host_config(const std::string& path);

/// The same checks on TOML text (tests).
sdk::Result<HostConfig> parse_host_config(const std::string& text, const std::string& path);

}  // namespace mesh::host
