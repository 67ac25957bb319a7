// Nox Mesh test support — loading the build's plugins from tests: where they are, a HostContext
// to create them with, the library opened as the host opens it, the descriptor checks every
// in-tree plugin must pass, and loading by name through core/loader.
//
// Target `mesh_test_plugins` (links mesh_loader, mesh_sdk and GoogleTest); namespace
// mesh::testing. Nothing here is thread-safe unless said otherwise; tests use it from one thread.
#pragma once

#include <string>

#include "mesh/loader/loader.h"
#include "mesh/sdk/abi.h"
#include "mesh/sdk/logger.h"
#include "mesh/sdk/plugin.h"
#include "mesh/sdk/result.h"

namespace mesh::testing {

/// The build tree's plugin folder (MESH_PLUGIN_OUTPUT_DIR at configure time), where every in-tree
/// plugin library is built. Never empty.
const std::string& plugin_dir();

/// "<plugin_dir()>/mesh-<kind>-<name>.so", e.g. plugin_path("store", "sqlite").
std::string plugin_path(const std::string& kind, const std::string& name);

/// What a plugin is created with in a test: `context.logger` points to `logger` (a NullLogger),
/// `context.role` is `role`, `context.state_dir` is `state_dir` (empty: none), the ABI fields are
/// this SDK's. Keep it alive, in place, for as long as the plugin object: the plugin keeps a
/// reference to `context`. Not copyable or movable.
struct TestHost {
  explicit TestHost(std::string role = "tool", std::string state_dir = {});
  TestHost(const TestHost&) = delete;
  TestHost& operator=(const TestHost&) = delete;

  sdk::NullLogger logger;
  sdk::HostContext context;
};

/// A plugin library opened with dlopen(RTLD_NOW | RTLD_LOCAL), as core/loader opens it, for tests
/// that look at the library itself (its descriptor, its exported symbols, unloading) without any
/// host code. The destructor closes it if close() was not called.
class PluginLibrary {
 public:
  /// Opens plugin_path(kind, name). Throws std::runtime_error naming the file and dlerror()'s
  /// reason when it cannot be opened.
  PluginLibrary(const std::string& kind, const std::string& name);
  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  /// The dlopen handle (for dlsym); nullptr after close().
  void* handle() const noexcept { return handle_; }
  /// The file that was opened.
  const std::string& path() const noexcept { return path_; }
  /// The descriptor returned by the one exported symbol (MESH_PLUGIN_INFO_SYMBOL); nullptr when
  /// the library does not export it or after close(). Static data of the library: valid until
  /// close().
  const mesh_plugin_info* info() const;
  /// dlclose now. Returns dlclose()'s result (0 on success); 0 when already closed.
  int close() noexcept;

 private:
  std::string path_;
  void* handle_ = nullptr;
};

/// Checks, as GoogleTest expectations in the running test, what every in-tree plugin's descriptor
/// must say: this SDK's ABI major, a minor not newer, struct_size == sizeof(mesh_plugin_info),
/// `kind` and `name`, a non-empty version and description, create and destroy, and a C++ ABI
/// fingerprint without a difference from this test's own (sdk::cxx_abi_differences). Returns
/// true when all hold (so a caller can stop early: `ASSERT_TRUE(expect_descriptor(...))`).
bool expect_descriptor(const mesh_plugin_info* info, const std::string& kind,
                       const std::string& name);

/// Loads plugin `kind`/`name` from plugin_dir() through core/loader (loader::load_plugin), with
/// every check the host makes. Errors: those of loader::load_plugin, which name the file.
sdk::Result<loader::LoadedPlugin> load_plugin(const std::string& kind, const std::string& name,
                                              const loader::LoadOptions& options = {});

}  // namespace mesh::testing
