#include "mesh/loader/loader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "mesh/sdk/provider.h"
#include "mesh/sdk/transport.h"

namespace mesh::loader {
namespace {

namespace fs = std::filesystem;
using sdk::ErrorCode;

const std::string kDir = LOADER_TEST_PLUGIN_DIR;

std::string plugin_path(const std::string& name) {
  return kDir + "/" + plugin_file_name("provider", name);
}

/// A fresh temporary directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "loader-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// True when `path` (resolved) is mapped into this process.
bool mapped(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream ss;
  ss << maps.rdbuf();
  return ss.str().find(fs::canonical(path).string()) != std::string::npos;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(LoaderTest, PluginFileName) {
  EXPECT_EQ(plugin_file_name("provider", "file"), "mesh-provider-file.so");
}

TEST(LoaderTest, LoadsAGoodProvider) {
  TempDir state;
  LoadOptions opts;
  opts.role = "host";
  opts.state_base = state.path();
  auto lp = load_plugin(kDir, "provider", "good", opts);
  ASSERT_TRUE(lp) << lp.error().describe();
  EXPECT_EQ(lp->kind, "provider");
  EXPECT_EQ(lp->name, "good");
  EXPECT_EQ(lp->version, "9.9.9");
  EXPECT_EQ(lp->description, "loader test plugin");
  EXPECT_EQ(lp->path, plugin_path("good"));
  EXPECT_EQ(lp->abi_major, MESH_SDK_ABI_MAJOR);
  EXPECT_EQ(lp->abi_minor, MESH_SDK_ABI_MINOR);

  // dynamic_cast across the library boundary (hidden visibility in the plugin) works.
  auto provider = lp->as<sdk::Provider>();
  ASSERT_NE(provider, nullptr);
  EXPECT_EQ(lp->as<sdk::Transport>(), nullptr);
  EXPECT_EQ(provider->schema().name, "good");
  auto r = provider->read(sdk::ResourceId{"good", "present"});
  ASSERT_TRUE(r) << r.error().describe();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->properties.get_string("value"), "here");

  // The plugin got its own state directory, mode 0700.
  const std::string sd = state.path() + "/plugins/good";
  struct stat st {};
  ASSERT_EQ(::stat(sd.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(LoaderTest, ObjectOutlivingEveryOtherHandleKeepsTheLibraryLoaded) {
  TempDir state;
  LoadOptions opts;
  opts.state_base = state.path();
  const std::string marker = state.path() + "/plugins/good/destroyed";
  std::shared_ptr<sdk::Provider> provider;
  {
    auto lp = load_plugin(kDir, "provider", "good", opts);
    ASSERT_TRUE(lp) << lp.error().describe();
    provider = lp->as<sdk::Provider>();
    ASSERT_NE(provider, nullptr);
    EXPECT_TRUE(mapped(plugin_path("good")));
  }  // the LoadedPlugin (and its shared_ptr<Plugin>) is gone; only `provider` remains
  EXPECT_TRUE(mapped(plugin_path("good")));
  EXPECT_FALSE(fs::exists(marker));
  // Virtual calls into the library still work.
  EXPECT_EQ(provider->schema().name, "good");
  auto r = provider->read(sdk::ResourceId{"good", "absent"});
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_value());

  provider.reset();
  // destroy() ran (the destructor, code in the library, wrote the marker), then the library was
  // unloaded.
  EXPECT_TRUE(fs::exists(marker));
  EXPECT_FALSE(mapped(plugin_path("good")));
}

TEST(LoaderTest, MissingFileIsNotFound) {
  auto lp = load_plugin(kDir, "provider", "nosuch");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::NotFound);
  EXPECT_EQ(lp.error().message, "plugin file " + plugin_path("nosuch") + " does not exist");
}

TEST(LoaderTest, RefusesAMajorOnePluginNamingItAndBothVersions) {
  // A plugin built against the ABI 1 SDK (descriptor 1.1), loaded by an ABI 2 host.
  auto lp = load_plugin(kDir, "provider", "abimajor");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::FailedPrecondition);
  const auto& m = lp.error().message;
  EXPECT_TRUE(contains(m, plugin_path("abimajor"))) << m;
  EXPECT_TRUE(contains(m, "'abimajor' version 9.9.9 is built for SDK ABI 1.1; this program supports " +
                              std::to_string(MESH_SDK_ABI_MAJOR) + "." + std::to_string(MESH_SDK_ABI_MINOR)))
      << m;
  EXPECT_TRUE(contains(m, "rebuild it against this SDK")) << m;
}

TEST(LoaderTest, RefusesANewerAbiMinorNamingBothVersions) {
  auto lp = load_plugin(kDir, "provider", "abiminor");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::FailedPrecondition);
  const auto& m = lp.error().message;
  EXPECT_TRUE(contains(m, plugin_path("abiminor"))) << m;
  const std::string major = std::to_string(MESH_SDK_ABI_MAJOR) + ".";
  const std::string want = "'abiminor' version 9.9.9 is built for SDK ABI " + major +
                           std::to_string(MESH_SDK_ABI_MINOR + 1) + "; this program supports " + major +
                           std::to_string(MESH_SDK_ABI_MINOR);
  EXPECT_TRUE(contains(m, want)) << m;
}

TEST(LoaderTest, RefusesATooSmallDescriptor) {
  auto lp = load_plugin(kDir, "provider", "oldstruct");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::FailedPrecondition);
  EXPECT_TRUE(contains(lp.error().message, plugin_path("oldstruct")));
  EXPECT_TRUE(contains(lp.error().message, "descriptor is 24 bytes")) << lp.error().message;
}

TEST(LoaderTest, RefusesALibraryWithoutTheSymbol) {
  auto lp = load_plugin(kDir, "provider", "nosymbol");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::FailedPrecondition);
  EXPECT_TRUE(contains(lp.error().message, plugin_path("nosymbol")));
  EXPECT_TRUE(contains(lp.error().message, "does not export the symbol mesh_plugin_info_v1"))
      << lp.error().message;
}

TEST(LoaderTest, RefusesAPluginBuiltForTheOldLibstdcxxStringAbi) {
  // Built with -D_GLIBCXX_USE_CXX11_ABI=0: its descriptor is valid, its std::string is not ours.
  // Before the fingerprint check it was accepted, and the first string across the boundary
  // crashed the host.
  auto lp = load_plugin(kDir, "provider", "oldabi");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::FailedPrecondition);
  const auto& m = lp.error().message;
  EXPECT_TRUE(contains(m, plugin_path("oldabi"))) << m;
  EXPECT_TRUE(contains(m, "'oldabi'")) << m;
  // Both fingerprints, and what differs.
  EXPECT_TRUE(contains(m, "_GLIBCXX_USE_CXX11_ABI=0")) << m;
  EXPECT_TRUE(contains(m, "_GLIBCXX_USE_CXX11_ABI=1")) << m;
  EXPECT_TRUE(contains(m, "sizeof(std::string) 8, this program 32")) << m;
}

TEST(LoaderTest, APluginBuiltByAnotherCompilerAgainstTheSameLibraryLoads) {
#ifndef LOADER_TEST_OTHER_COMPILER
  GTEST_SKIP() << "no second C++ compiler was found at configure time";
#else
  // mesh-provider-othercc.so: test_plugin.cpp built by the other compiler (clang++ for a GCC
  // build) against the same libstdc++. The compiler is recorded, never compared.
  TempDir state;
  LoadOptions opts;
  opts.state_base = state.path();
  auto lp = load_plugin(kDir, "provider", "othercc", opts);
  ASSERT_TRUE(lp) << lp.error().describe();
  EXPECT_TRUE(contains(lp->cxx_abi, std::string("compiler ") + LOADER_TEST_OTHER_COMPILER + " "))
      << lp->cxx_abi;
  EXPECT_TRUE(contains(lp->cxx_abi, "_GLIBCXX_USE_CXX11_ABI=1")) << lp->cxx_abi;
  // Strings and Values cross in both directions.
  auto provider = lp->as<sdk::Provider>();
  ASSERT_NE(provider, nullptr);
  EXPECT_EQ(provider->schema().name, "othercc");
  auto r = provider->read(sdk::ResourceId{"othercc", "present"});
  ASSERT_TRUE(r) << r.error().describe();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->properties.get_string("value"), "here");
#endif
}

TEST(LoaderTest, CreateReturningNullIsFailed) {
  auto lp = load_plugin(kDir, "provider", "nullcreate");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::Failed);
  EXPECT_TRUE(contains(lp.error().message, plugin_path("nullcreate")));
  EXPECT_TRUE(contains(lp.error().message, "create() returned nullptr")) << lp.error().message;
}

TEST(LoaderTest, RefusesAKindThatDoesNotMatchTheFileName) {
  auto lp = load_plugin(kDir, "provider", "wrongkind");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::FailedPrecondition);
  EXPECT_TRUE(contains(lp.error().message, plugin_path("wrongkind")));
  EXPECT_TRUE(contains(lp.error().message, "descriptor says kind 'transport' name 'wrongkind'"))
      << lp.error().message;
}

TEST(LoaderTest, RefusesANameThatDoesNotMatchTheFileName) {
  auto lp = load_plugin(kDir, "provider", "wrongname");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::FailedPrecondition);
  EXPECT_TRUE(contains(lp.error().message, plugin_path("wrongname")));
  EXPECT_TRUE(contains(lp.error().message, "name 'other'")) << lp.error().message;
  EXPECT_TRUE(contains(lp.error().message, "mesh-provider-other.so")) << lp.error().message;
}

TEST(LoaderTest, DlopenFailureCarriesTheLoadersReason) {
  TempDir dir;
  const std::string path = dir.path() + "/mesh-provider-garbage.so";
  std::ofstream(path) << "this is not an ELF file, but it is long enough to have a header\n";
  auto lp = load_plugin(dir.path(), "provider", "garbage");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::FailedPrecondition);
  const auto& m = lp.error().message;
  EXPECT_TRUE(contains(m, "cannot load plugin " + path + ": ")) << m;
  // dlerror's own words, e.g. "...: invalid ELF header".
  EXPECT_TRUE(contains(m, "ELF") || contains(m, "file too short")) << m;
}

TEST(LoaderTest, RefusesAMisnamedFileBeforeOpeningIt) {
  TempDir dir;
  const std::string path = dir.path() + "/good.so";
  fs::copy_file(plugin_path("good"), path);
  auto lp = load_plugin_file(path, "");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::FailedPrecondition);
  EXPECT_EQ(lp.error().message, "plugin file " + path + " is not named mesh-<kind>-<name>.so");
  EXPECT_FALSE(mapped(path));
}

TEST(LoaderTest, RefusesAnUnexpectedKind) {
  auto lp = load_plugin_file(plugin_path("good"), "transport");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::FailedPrecondition);
  EXPECT_TRUE(contains(lp.error().message, "expected a transport plugin")) << lp.error().message;
  // Any kind is accepted when none is expected.
  EXPECT_TRUE(load_plugin_file(plugin_path("good"), ""));
}

TEST(LoaderTest, LoadAllReportsEachFile) {
  auto all = load_all(kDir);
  std::map<std::string, bool> ok;
  for (const auto& r : all) {
    if (r) {
      ok[r->name] = true;
    } else {
      // Every failure names its file.
      EXPECT_TRUE(contains(r.error().message, kDir + "/mesh-provider-")) << r.error().message;
    }
  }
#ifdef LOADER_TEST_OTHER_COMPILER
  EXPECT_EQ(all.size(), 10u);
  EXPECT_EQ(ok.size(), 2u);
  EXPECT_TRUE(ok.count("othercc"));
#else
  EXPECT_EQ(all.size(), 9u);
  EXPECT_EQ(ok.size(), 1u);
#endif
  EXPECT_TRUE(ok.count("good"));
  EXPECT_FALSE(ok.count("oldabi"));

  auto none = load_all(kDir + "/nosuch");
  ASSERT_EQ(none.size(), 1u);
  ASSERT_FALSE(none[0]);
  EXPECT_EQ(none[0].error().code, ErrorCode::NotFound);
}

// --- in-memory descriptors -------------------------------------------------------------------

int g_memory_destroyed = 0;

class MemoryProvider final : public sdk::Provider {
 public:
  using Provider::Provider;
  ~MemoryProvider() override { ++g_memory_destroyed; }
  const sdk::Schema& schema() const noexcept override {
    static const sdk::Schema s{"mem", "", {}};
    return s;
  }
  const sdk::HostContext& context() const { return host(); }

 protected:
  sdk::Result<void> do_read(const sdk::ReadRequest&, sdk::ReadResponse&) override { return {}; }
  sdk::Result<void> do_plan(const sdk::PlanRequest& req, sdk::PlanResponse& resp) override {
    resp.plan = sdk::Plan{req.desired.rid, sdk::PlanAction::None, {}, req.desired};
    return {};
  }
  sdk::Result<void> do_apply(const sdk::ApplyRequest&, sdk::ApplyResponse&) override { return {}; }
  sdk::Result<void> do_remove(const sdk::RemoveRequest&, sdk::RemoveResponse&) override { return {}; }
};

sdk::Plugin* mem_create(const sdk::HostContext* host) noexcept { return new MemoryProvider(*host); }
sdk::Plugin* mem_create_null(const sdk::HostContext*) noexcept { return nullptr; }
void mem_destroy(sdk::Plugin* p) noexcept { delete p; }

constexpr mesh_cxx_abi kMemCxxAbi = sdk::cxx_abi_of_this_build();

mesh_plugin_info mem_info() {
  return {MESH_SDK_ABI_MAJOR, MESH_SDK_ABI_MINOR, sizeof(mesh_plugin_info), "provider", "mem",
          "1.2.3", "in memory", &mem_create, &mem_destroy, &kMemCxxAbi};
}

TEST(LoaderTest, LoadsAnInMemoryDescriptor) {
  const auto info = mem_info();
  g_memory_destroyed = 0;
  {
    LoadOptions opts;
    opts.role = "control";
    auto lp = load_descriptor(&info, "provider", opts);
    ASSERT_TRUE(lp) << lp.error().describe();
    EXPECT_EQ(lp->path, "<memory>");
    EXPECT_EQ(lp->name, "mem");
    EXPECT_EQ(lp->version, "1.2.3");
    auto p = std::dynamic_pointer_cast<MemoryProvider>(lp->plugin);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->context().role, "control");
    EXPECT_EQ(p->context().state_dir, "");
    ASSERT_NE(p->context().logger, nullptr);
    p->context().logger->info("hello from the loader test");
  }
  EXPECT_EQ(g_memory_destroyed, 1);
}

TEST(LoaderTest, InMemoryDescriptorGetsTheSameChecks) {
  auto info = mem_info();
  info.abi_major = MESH_SDK_ABI_MAJOR + 1;
  auto lp = load_descriptor(&info, "provider");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::FailedPrecondition);
  EXPECT_TRUE(contains(lp.error().message, "<memory>"));
  const std::string ours = std::to_string(MESH_SDK_ABI_MAJOR) + "." + std::to_string(MESH_SDK_ABI_MINOR);
  EXPECT_TRUE(contains(lp.error().message, "built for SDK ABI " + std::to_string(MESH_SDK_ABI_MAJOR + 1) + "." +
                                               std::to_string(MESH_SDK_ABI_MINOR) + "; this program supports " + ours))
      << lp.error().message;

  info = mem_info();
  info.abi_minor = MESH_SDK_ABI_MINOR + 1;
  EXPECT_FALSE(load_descriptor(&info, ""));

  info = mem_info();
  info.struct_size = 8;
  EXPECT_FALSE(load_descriptor(&info, ""));

  info = mem_info();
  info.kind = "gizmo";
  lp = load_descriptor(&info, "");
  ASSERT_FALSE(lp);
  EXPECT_TRUE(contains(lp.error().message, "unknown plugin kind 'gizmo'"));

  info = mem_info();
  info.name = "Bad Name";
  EXPECT_FALSE(load_descriptor(&info, ""));

  info = mem_info();
  info.create = nullptr;
  EXPECT_FALSE(load_descriptor(&info, ""));

  info = mem_info();
  lp = load_descriptor(&info, "store");
  ASSERT_FALSE(lp);
  EXPECT_TRUE(contains(lp.error().message, "is a provider plugin, expected a store plugin"));

  info = mem_info();
  info.create = &mem_create_null;
  lp = load_descriptor(&info, "provider");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::Failed);

  lp = load_descriptor(nullptr, "provider");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::FailedPrecondition);
}

TEST(LoaderTest, RefusesADescriptorWithoutAFingerprint) {
  auto info = mem_info();
  info.cxx_abi = nullptr;
  auto lp = load_descriptor(&info, "provider");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::FailedPrecondition);
  EXPECT_TRUE(contains(lp.error().message, "<memory> ('mem' 1.2.3) carries no C++ ABI fingerprint"))
      << lp.error().message;

  // A descriptor that ends before the field: the pointer is not even read.
  info = mem_info();
  info.struct_size = static_cast<std::uint32_t>(offsetof(mesh_plugin_info, cxx_abi));
  lp = load_descriptor(&info, "provider");
  ASSERT_FALSE(lp);
  EXPECT_TRUE(contains(lp.error().message, "carries no C++ ABI fingerprint")) << lp.error().message;

  // A fingerprint too short to hold the library and its ABI switch.
  mesh_cxx_abi tiny = kMemCxxAbi;
  tiny.struct_size = 8;
  info = mem_info();
  info.cxx_abi = &tiny;
  EXPECT_FALSE(load_descriptor(&info, "provider"));
}

TEST(LoaderTest, TheFingerprintComparesTheLibraryAndSizesNotTheCompiler) {
  // Another compiler and another release of the same library: loads.
  mesh_cxx_abi other = kMemCxxAbi;
  other.compiler = other.compiler == MESH_CXX_COMPILER_CLANG ? MESH_CXX_COMPILER_GCC
                                                             : MESH_CXX_COMPILER_CLANG;
  other.compiler_version = 140006;
  other.stdlib_version = 20210601;
  auto info = mem_info();
  info.cxx_abi = &other;
  auto lp = load_descriptor(&info, "provider");
  ASSERT_TRUE(lp) << lp.error().describe();
  EXPECT_TRUE(contains(lp->cxx_abi, "14.0.6")) << lp->cxx_abi;

  // Another standard library: refused, both named.
  other = kMemCxxAbi;
  other.stdlib = kMemCxxAbi.stdlib == MESH_CXX_STDLIB_LIBCXX ? MESH_CXX_STDLIB_LIBSTDCXX
                                                              : MESH_CXX_STDLIB_LIBCXX;
  lp = load_descriptor(&info, "provider");
  ASSERT_FALSE(lp);
  EXPECT_EQ(lp.error().code, ErrorCode::FailedPrecondition);
  EXPECT_TRUE(contains(lp.error().message, "built for another C++ ABI (standard library ")) << lp.error().message;
  EXPECT_TRUE(contains(lp.error().message, "libc++")) << lp.error().message;
  EXPECT_TRUE(contains(lp.error().message, "libstdc++")) << lp.error().message;

  // One boundary type of another size: refused, naming it.
  other = kMemCxxAbi;
  other.sizeof_value += 8;
  lp = load_descriptor(&info, "provider");
  ASSERT_FALSE(lp);
  EXPECT_TRUE(contains(lp.error().message,
                       "(sizeof(Value) " + std::to_string(kMemCxxAbi.sizeof_value + 8) +
                           ", this program " + std::to_string(kMemCxxAbi.sizeof_value) + ")"))
      << lp.error().message;

  // A fingerprint from an older SDK that ends before a size field: that field is not compared.
  other = kMemCxxAbi;
  other.sizeof_host_context = 1;
  other.struct_size = static_cast<std::uint32_t>(offsetof(mesh_cxx_abi, sizeof_host_context));
  lp = load_descriptor(&info, "provider");
  ASSERT_TRUE(lp) << lp.error().describe();
  EXPECT_FALSE(contains(lp->cxx_abi, "HostContext")) << lp->cxx_abi;
}

TEST(LoaderTest, ANewerStructFromTheSameMajorIsAccepted) {
  // A plugin built by a later 1.x SDK (once the host knows that minor) may report a larger
  // struct; the host reads only the fields it knows.
  auto info = mem_info();
  info.struct_size = sizeof(mesh_plugin_info) + 16;
  EXPECT_TRUE(load_descriptor(&info, "provider"));
}

}  // namespace
}  // namespace mesh::loader
