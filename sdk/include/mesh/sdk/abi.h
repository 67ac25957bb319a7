// Nox Mesh SDK — the plugin ABI: the one C entry point the host reads before any C++ call.
//
// Every plugin library exports exactly one symbol, `mesh_plugin_info_v1`, returning a pointer to a
// static `mesh_plugin_info`. The host reads `abi_major`/`abi_minor` first and refuses the plugin
// unless the major equals the host's and the plugin's minor is not newer than the host's
// (the rule Falco's plugin loader follows). Only after that check does it call `create`.
//
// Compatibility rule for this header: `mesh_plugin_info` only grows at the end. A newer host reads
// `struct_size` to know which trailing fields an older plugin filled in.
//
// The version fields say which SDK a plugin was built against; they cannot say how its C++ types
// are laid out, which depends on the standard library the plugin was compiled against and its
// configuration (a plugin built with `-D_GLIBCXX_USE_CXX11_ABI=0` has another std::string). So
// the descriptor also points to a `mesh_cxx_abi` fingerprint, filled in at the plugin's compile
// time by MESH_PLUGIN (plugin.h, through mesh/sdk/cxx_abi.h), which the host compares with its
// own before any C++ call (docs/decisions/0040).
#pragma once

#include <cstdint>

/// ABI major of this SDK. A plugin built with another major is refused. Major 2: provider calls
/// take request/response structs and providers declare capabilities (provider.h,
/// docs/decisions/0038); a major-1 plugin is refused by name, version and file.
#define MESH_SDK_ABI_MAJOR 2u
/// ABI minor of this SDK. A plugin built with a newer minor than the host's is refused.
/// Minor 1: ProviderCapabilities::may_replace_host appended (docs/decisions/0076), so a plugin
/// that sets it is never given the smaller struct of a 2.0 host. Minor 2: Store::backup and
/// Store::restore appended (docs/decisions/0085): a control plane calls them only on a store
/// plugin built with minor 2 or later (a 2.1 store's table has no such entries). Minor 3:
/// Store::record_reports and Store::read_many appended (group commit of reports and many reads
/// from one state, docs/decisions/0100 and 0101): a control plane calls them only on a store
/// plugin built with minor 3 or later, and loops over record_apply / record_drift and reads one
/// call at a time for an older one. Also
/// ProviderCapabilities::max_batch and Provider::do_apply_batch appended (docs/decisions/0106):
/// the host calls do_apply_batch only on a provider that set max_batch, which a plugin built
/// before 2.3 cannot, and a 2.3 plugin that sets it is never given a 2.2 host's smaller struct.
/// Minor 4: Store::remember_requests appended (group commit of nonces, docs/decisions/0119): a
/// control plane calls it only on a store plugin built with minor 4 or later and calls
/// remember_request one request at a time for an older one.
#define MESH_SDK_ABI_MINOR 4u
/// Release of the SDK (semantic version string); informational.
#define MESH_SDK_VERSION "0.1.0"
/// Name of the one exported symbol.
#define MESH_PLUGIN_INFO_SYMBOL "mesh_plugin_info_v1"

#if defined(__GNUC__)
#define MESH_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))
#else
#define MESH_PLUGIN_EXPORT extern "C"
#endif

/// `mesh_cxx_abi::stdlib`: the C++ standard library was not recognised.
#define MESH_CXX_STDLIB_UNKNOWN 0u
/// `mesh_cxx_abi::stdlib`: GNU libstdc++ (detected by `__GLIBCXX__`).
#define MESH_CXX_STDLIB_LIBSTDCXX 1u
/// `mesh_cxx_abi::stdlib`: LLVM libc++ (detected by `_LIBCPP_VERSION`).
#define MESH_CXX_STDLIB_LIBCXX 2u

/// `mesh_cxx_abi::compiler`: not recognised.
#define MESH_CXX_COMPILER_UNKNOWN 0u
/// `mesh_cxx_abi::compiler`: GCC (`__GNUC__` without `__clang__`).
#define MESH_CXX_COMPILER_GCC 1u
/// `mesh_cxx_abi::compiler`: Clang (`__clang__`).
#define MESH_CXX_COMPILER_CLANG 2u

namespace mesh::sdk {
class Plugin;
struct HostContext;
}  // namespace mesh::sdk

extern "C" {

/// What the C++ types crossing the plugin boundary depend on, as seen by one compilation (the
/// plugin's, or the host's). Plain 32-bit fields only, so that it reads the same whatever the
/// standard library. Static storage in the plugin; the host never writes to it. Made by
/// `mesh::sdk::cxx_abi_of_this_build()` (mesh/sdk/cxx_abi.h); compared by the loader with
/// `mesh::sdk::cxx_abi_differences()`.
///
/// Like the descriptor it only grows at the end; `struct_size` says which fields the plugin
/// filled, and a field the plugin did not fill is not compared.
///
/// Compared (a difference refuses the plugin): `stdlib`, `stdlib_abi`, `pointer_size` and every
/// `sizeof_*` field. Informational (shown, never compared): `stdlib_version`, `compiler`,
/// `compiler_version` — a plugin built by clang or by another GCC against the same library ABI
/// loads.
///
/// Sources: libstdc++ manual, "Dual ABI" (https://gcc.gnu.org/onlinedocs/libstdc++/manual/
/// using_dual_abi.html: `_GLIBCXX_USE_CXX11_ABI` selects the std::string and std::list layouts;
/// code built with different values must not exchange those types) and "ABI Policy and
/// Guidelines" (`__GLIBCXX__`, `_GLIBCXX_RELEASE`); libc++ `<__config>` (`_LIBCPP_VERSION`,
/// `_LIBCPP_ABI_VERSION`: 1 is the stable ABI, 2 the unstable next one).
struct mesh_cxx_abi {
  /// sizeof(mesh_cxx_abi) at the build that filled it, in bytes.
  std::uint32_t struct_size;
  /// MESH_CXX_STDLIB_LIBSTDCXX, MESH_CXX_STDLIB_LIBCXX or MESH_CXX_STDLIB_UNKNOWN.
  std::uint32_t stdlib;
  /// The library's own ABI switch: libstdc++: `_GLIBCXX_USE_CXX11_ABI` (1 = the C++11 std::string
  /// and std::list, 0 = the old copy-on-write string); libc++: `_LIBCPP_ABI_VERSION`; 0 otherwise.
  std::uint32_t stdlib_abi;
  /// Informational: libstdc++: `__GLIBCXX__` (its release date, YYYYMMDD); libc++:
  /// `_LIBCPP_VERSION` (14000 for LLVM 14, 160000 from LLVM 16 on); 0 otherwise.
  std::uint32_t stdlib_version;
  /// Informational: MESH_CXX_COMPILER_GCC, MESH_CXX_COMPILER_CLANG or MESH_CXX_COMPILER_UNKNOWN.
  std::uint32_t compiler;
  /// Informational: major * 10000 + minor * 100 + patch (GCC 12.2.0 is 120200).
  std::uint32_t compiler_version;
  /// sizeof(void*), in bytes.
  std::uint32_t pointer_size;
  /// sizeof(std::string), in bytes (32 with libstdc++'s C++11 ABI, 8 with the old one).
  std::uint32_t sizeof_string;
  /// sizeof(std::vector<mesh::sdk::Value>), in bytes.
  std::uint32_t sizeof_vector;
  /// sizeof(std::optional<std::string>), in bytes.
  std::uint32_t sizeof_optional;
  /// sizeof(std::function<void()>), in bytes.
  std::uint32_t sizeof_function;
  /// sizeof(mesh::sdk::Value), in bytes.
  std::uint32_t sizeof_value;
  /// sizeof(mesh::sdk::Error), in bytes.
  std::uint32_t sizeof_error;
  /// sizeof(mesh::sdk::Result<mesh::sdk::Value>), in bytes.
  std::uint32_t sizeof_result;
  /// sizeof(mesh::sdk::HostContext), in bytes.
  std::uint32_t sizeof_host_context;
};

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
  /// ABI 2: the C++ ABI fingerprint of the plugin's build (static storage in the plugin), filled
  /// in by MESH_PLUGIN. The host refuses a plugin whose descriptor ends before this field, whose
  /// pointer is null, or whose fingerprint differs from the host's in a compared field (see
  /// `mesh_cxx_abi`); the refusal names the plugin, its file and both fingerprints.
  const mesh_cxx_abi* cxx_abi;
};

}  // extern "C"
