// Nox Mesh SDK — the base of every plugin, the context the host hands it, and the export macro.
#pragma once

#include <cstdint>
#include <exception>
#include <string>

#include "mesh/sdk/abi.h"
#include "mesh/sdk/logger.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/schema.h"
#include "mesh/sdk/value.h"

namespace mesh::sdk {

/// What the host gives a plugin at creation. Owned by the host; outlives the plugin object.
struct HostContext {
  std::uint32_t abi_major = MESH_SDK_ABI_MAJOR;  ///< the host's ABI major
  std::uint32_t abi_minor = MESH_SDK_ABI_MINOR;  ///< the host's ABI minor
  Logger* logger = nullptr;                      ///< never null; thread-safe
  /// A directory the plugin may keep files in (created by the host, mode 0700), or empty.
  std::string state_dir;
  /// "host" (mesh-host), "control" (mesh-control) or "tool" (tests, mesh-host apply).
  std::string role;
};

/// Base class of every plugin. The host configures it once, right after creation, with its
/// config table (already validated against `config_schema()`), then uses it per its kind.
class Plugin {
 public:
  explicit Plugin(const HostContext& host) : host_(host) {}
  virtual ~Plugin() = default;
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  /// The keys this plugin accepts in its config table (e.g. the `[transport]` table less
  /// `plugin`). Default: none. The host rejects unknown keys before calling configure().
  virtual const Schema& config_schema() const noexcept {
    static const Schema empty{};
    return empty;
  }

  /// Applies configuration. `config` is a JSON object with defaults filled in. Called once,
  /// before any other method, on the host's main thread. Errors: InvalidArgument with the key in
  /// `path` for values the schema cannot express (a missing file, a bad URL).
  Result<void> configure(const Value& config) noexcept {
    try {
      return do_configure(config);
    } catch (const std::exception& e) {
      return fail(ErrorCode::Internal, std::string("exception in configure: ") + e.what());
    } catch (...) {
      return fail(ErrorCode::Internal, "unknown exception in configure");
    }
  }

 protected:
  virtual Result<void> do_configure(const Value& /*config*/) { return {}; }
  Logger& log() const noexcept { return *host_.logger; }
  const HostContext& host() const noexcept { return host_; }

 private:
  const HostContext& host_;
};

/// Wraps a call in a try/catch that turns exceptions into Internal errors. Used by the
/// non-virtual public methods of every plugin interface.
template <class F>
auto guard(const char* what, F&& f) noexcept -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return fail(ErrorCode::Internal, std::string("exception in ") + what + ": " + e.what());
  } catch (...) {
    return fail(ErrorCode::Internal, std::string("unknown exception in ") + what);
  }
}

}  // namespace mesh::sdk

// After HostContext: the fingerprint records its size. MESH_PLUGIN below uses it.
#include "mesh/sdk/cxx_abi.h"

/// Defines the plugin's one exported symbol. Use once per plugin library, at namespace scope:
///
///   MESH_PLUGIN(provider, "file", "0.1.0", "regular files", mesh::plugins::file::FileProvider)
///
/// `CLASS` must be constructible from `const mesh::sdk::HostContext&`. Exceptions thrown by its
/// constructor are caught and logged; `create` then returns nullptr. The descriptor's `cxx_abi`
/// points to the C++ ABI fingerprint of the plugin's own compilation
/// (`mesh::sdk::cxx_abi_of_this_build()`, evaluated at compile time), which the host compares
/// with its own before calling `create`.
#define MESH_PLUGIN(KIND, NAME, VERSION, DESCRIPTION, CLASS)                                  \
  namespace {                                                                                 \
  mesh::sdk::Plugin* mesh_plugin_create_(const mesh::sdk::HostContext* host) noexcept {       \
    try {                                                                                     \
      return new CLASS(*host);                                                                \
    } catch (const std::exception& e) {                                                       \
      if (host && host->logger)                                                               \
        host->logger->error(std::string("plugin " NAME ": constructor failed: ") + e.what()); \
    } catch (...) {                                                                           \
      if (host && host->logger) host->logger->error("plugin " NAME ": constructor failed");   \
    }                                                                                         \
    return nullptr;                                                                           \
  }                                                                                           \
  void mesh_plugin_destroy_(mesh::sdk::Plugin* p) noexcept { delete p; }                      \
  constexpr mesh_cxx_abi mesh_plugin_cxx_abi_ = mesh::sdk::cxx_abi_of_this_build();           \
  const mesh_plugin_info mesh_plugin_info_ = {MESH_SDK_ABI_MAJOR,                             \
                                              MESH_SDK_ABI_MINOR,                             \
                                              sizeof(mesh_plugin_info),                       \
                                              #KIND,                                          \
                                              NAME,                                           \
                                              VERSION,                                        \
                                              DESCRIPTION,                                    \
                                              &mesh_plugin_create_,                           \
                                              &mesh_plugin_destroy_,                          \
                                              &mesh_plugin_cxx_abi_};                         \
  }                                                                                           \
  MESH_PLUGIN_EXPORT const mesh_plugin_info* mesh_plugin_info_v1() noexcept {                 \
    return &mesh_plugin_info_;                                                                \
  }
