// Nox Mesh SDK — the plugin ABI: the one C entry point the host reads before any C++ call.
//
// Every plugin library exports exactly one symbol, `mesh_plugin_info_v1`, returning a pointer to a
// static `mesh_plugin_info`. The host reads `abi_major`/`abi_minor` first and refuses the plugin
// unless the major equals the host's and the plugin's minor is not newer than the host's
// (the rule Falco's plugin loader follows). Only after that check does it call `create`.
//
// Compatibility rule for this header: `mesh_plugin_info` only grows at the end. A newer host reads
// `struct_size` to know which trailing fields an older plugin filled in.
#pragma once

#include <cstdint>

/// ABI major of this SDK. A plugin built with another major is refused. Major 2: provider calls
/// take request/response structs and providers declare capabilities (provider.h,
/// docs/decisions/0038); a major-1 plugin is refused by name, version and file.
#define MESH_SDK_ABI_MAJOR 2u
/// ABI minor of this SDK. A plugin built with a newer minor than the host's is refused.
#define MESH_SDK_ABI_MINOR 0u
/// Release of the SDK (semantic version string); informational.
#define MESH_SDK_VERSION "0.1.0"
/// Name of the one exported symbol.
#define MESH_PLUGIN_INFO_SYMBOL "mesh_plugin_info_v1"

#if defined(__GNUC__)
#define MESH_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))
#else
#define MESH_PLUGIN_EXPORT extern "C"
#endif

namespace mesh::sdk {
class Plugin;
struct HostContext;
}  // namespace mesh::sdk

extern "C" {

/// The plugin descriptor. Static storage in the plugin; the host never writes to it.
struct mesh_plugin_info {
  /// MESH_SDK_ABI_MAJOR at the plugin's build time.
  std::uint32_t abi_major;
  /// MESH_SDK_ABI_MINOR at the plugin's build time.
  std::uint32_t abi_minor;
  /// sizeof(mesh_plugin_info) at the plugin's build time, in bytes.
  std::uint32_t struct_size;
  /// One of "provider", "transport", "store", "stage", "report".
  const char* kind;
  /// Plugin name; the file must be called `mesh-<kind>-<name>.so`. For a provider it is also the
  /// resource type it handles ("file" handles `file:/etc/motd`).
  const char* name;
  /// The plugin's own version (semantic version string).
  const char* version;
  /// One line for `mesh-host plugins` and the docs.
  const char* description;
  /// Creates the plugin object. `host` outlives the object. Returns nullptr on failure (the
  /// exception, if any, was caught and logged through `host->logger`). Called once per load.
  mesh::sdk::Plugin* (*create)(const mesh::sdk::HostContext* host) noexcept;
  /// Destroys an object made by `create`. Called before the library is unloaded.
  void (*destroy)(mesh::sdk::Plugin* plugin) noexcept;
};

}  // extern "C"
