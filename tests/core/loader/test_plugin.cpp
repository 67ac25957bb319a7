// One source, several test plugins: compile definitions bend the descriptor into each of the
// shapes the loader must refuse (see CMakeLists.txt). The good shape is a tiny provider whose
// destructor writes a marker file into its state dir, so a test can see that it ran (and that
// it ran while the library was still mapped: it is code in this library).
#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "mesh/sdk/provider.h"

#ifndef TP_KIND
#define TP_KIND "provider"
#endif
#ifndef TP_ABI_MAJOR
#define TP_ABI_MAJOR MESH_SDK_ABI_MAJOR
#endif
#ifndef TP_ABI_MINOR
#define TP_ABI_MINOR MESH_SDK_ABI_MINOR
#endif
#ifndef TP_STRUCT_SIZE
#define TP_STRUCT_SIZE sizeof(mesh_plugin_info)
#endif

namespace {

using namespace mesh::sdk;

class TestProvider final : public Provider {
 public:
  explicit TestProvider(const HostContext& host) : Provider(host) {
    log().info("test provider created");
  }
  ~TestProvider() override {
    if (host().state_dir.empty()) return;
    const std::string marker = host().state_dir + "/destroyed";
    int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      (void)!::write(fd, "yes\n", 4);
      ::close(fd);
    }
  }
  const Schema& schema() const noexcept override {
    static const Schema s{TP_NAME, "test resource", {Attribute{"value", ValueType::String, false, "a value"}}};
    return s;
  }

 protected:
  Result<void> do_read(const ReadRequest& req, ReadResponse& resp) override {
    if (req.rid.id != "present") return {};
    State s;
    s.properties.set("value", "here");
    resp.state = std::move(s);
    return {};
  }
  Result<void> do_plan(const PlanRequest& req, PlanResponse& resp) override {
    resp.plan = Plan{req.desired.rid, PlanAction::None, {}, req.desired};
    return {};
  }
  Result<void> do_apply(const ApplyRequest&, ApplyResponse&) override { return {}; }
  Result<void> do_remove(const RemoveRequest&, RemoveResponse&) override { return {}; }
};

Plugin* tp_create(const HostContext* host) noexcept {
#ifdef TP_CREATE_NULL
  host->logger->error("refusing to create (test plugin)");
  return nullptr;
#else
  try {
    return new TestProvider(*host);
  } catch (...) {
    return nullptr;
  }
#endif
}

void tp_destroy(Plugin* p) noexcept { delete p; }

// This compilation's own fingerprint, as MESH_PLUGIN fills it in.
constexpr mesh_cxx_abi tp_cxx_abi = mesh::sdk::cxx_abi_of_this_build();

const mesh_plugin_info tp_info = {TP_ABI_MAJOR,
                                  TP_ABI_MINOR,
                                  static_cast<std::uint32_t>(TP_STRUCT_SIZE),
                                  TP_KIND,
                                  TP_NAME,
                                  "9.9.9",
                                  "loader test plugin",
                                  &tp_create,
                                  &tp_destroy,
                                  &tp_cxx_abi};

}  // namespace

#ifdef TP_NO_SYMBOL
MESH_PLUGIN_EXPORT const mesh_plugin_info* mesh_plugin_info_v0() noexcept { return &tp_info; }
#else
MESH_PLUGIN_EXPORT const mesh_plugin_info* mesh_plugin_info_v1() noexcept { return &tp_info; }
#endif
