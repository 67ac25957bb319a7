#include "mesh/testing/plugins.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <utility>

#include "mesh/sdk/cxx_abi.h"

namespace mesh::testing {

const std::string& plugin_dir() {
  static const std::string dir = MESH_TEST_PLUGIN_DIR;
  return dir;
}

std::string plugin_path(const std::string& kind, const std::string& name) {
  return plugin_dir() + "/" + loader::plugin_file_name(kind, name);
}

TestHost::TestHost(std::string role, std::string state_dir) {
  context.logger = &logger;
  context.role = std::move(role);
  context.state_dir = std::move(state_dir);
}

PluginLibrary::PluginLibrary(const std::string& kind, const std::string& name)
    : path_(plugin_path(kind, name)) {
  handle_ = ::dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* why = ::dlerror();
    throw std::runtime_error("cannot open " + path_ + ": " + (why ? why : "unknown reason"));
  }
}

PluginLibrary::~PluginLibrary() { close(); }

const mesh_plugin_info* PluginLibrary::info() const {
  if (handle_ == nullptr) return nullptr;
  using InfoFn = const mesh_plugin_info* (*)() noexcept;
  auto fn = reinterpret_cast<InfoFn>(::dlsym(handle_, MESH_PLUGIN_INFO_SYMBOL));
  return fn ? fn() : nullptr;
}

int PluginLibrary::close() noexcept {
  if (handle_ == nullptr) return 0;
  const int rc = ::dlclose(handle_);
  handle_ = nullptr;
  return rc;
}

bool expect_descriptor(const mesh_plugin_info* info, const std::string& kind,
                       const std::string& name) {
  EXPECT_NE(info, nullptr) << "no descriptor for " << kind << " " << name;
  if (info == nullptr) return false;
  bool ok = true;
  auto check = [&](bool holds) {
    ok = ok && holds;
    return holds;
  };
  EXPECT_TRUE(check(info->abi_major == MESH_SDK_ABI_MAJOR)) << "abi_major " << info->abi_major;
  EXPECT_TRUE(check(info->abi_minor <= MESH_SDK_ABI_MINOR)) << "abi_minor " << info->abi_minor;
  EXPECT_TRUE(check(info->struct_size == sizeof(mesh_plugin_info)))
      << "struct_size " << info->struct_size;
  EXPECT_TRUE(check(info->kind != nullptr && kind == info->kind))
      << "kind " << (info->kind ? info->kind : "(null)");
  EXPECT_TRUE(check(info->name != nullptr && name == info->name))
      << "name " << (info->name ? info->name : "(null)");
  EXPECT_TRUE(check(info->version != nullptr && *info->version != '\0')) << "version";
  EXPECT_TRUE(check(info->description != nullptr && *info->description != '\0'))
      << "description";
  EXPECT_TRUE(check(info->create != nullptr && info->destroy != nullptr)) << "create/destroy";
  EXPECT_TRUE(check(info->cxx_abi != nullptr)) << "no C++ ABI fingerprint";
  if (info->cxx_abi) {
    const auto diff = sdk::cxx_abi_differences(*info->cxx_abi, sdk::cxx_abi_of_this_build());
    EXPECT_TRUE(check(diff.empty())) << "C++ ABI: " << sdk::describe_cxx_abi(*info->cxx_abi);
  }
  return ok;
}

sdk::Result<loader::LoadedPlugin> load_plugin(const std::string& kind, const std::string& name,
                                              const loader::LoadOptions& options) {
  return loader::load_plugin(plugin_dir(), kind, name, options);
}

}  // namespace mesh::testing
