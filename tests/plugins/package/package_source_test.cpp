// The package provider's `source` (an apt sources file apt reads as root): refused before apt
// runs when it is reached through a symbolic link or can be changed by someone other than root
// and the host's user (plugins/paths/safe_path.h). Needs neither root nor apt.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "package_provider.h"

namespace mesh::plugins::package {
namespace {

namespace fs = std::filesystem;
using sdk::ErrorCode;
using sdk::Value;

struct Dir {
  Dir() : path(fs::temp_directory_path() / ("mesh-package-source-" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~Dir() { fs::remove_all(path); }
  fs::path path;
};

sdk::Result<sdk::State> apply_with_source(const std::string& source) {
  sdk::NullLogger logger;
  sdk::HostContext host;
  host.logger = &logger;
  host.role = "tool";
  PackageProvider p(host);
  auto ok = p.configure(sdk::apply_defaults(p.config_schema(), Value::object()));
  if (!ok) return sdk::fail(ok.error());
  sdk::Resource r;
  r.rid = {"package", "nox-mesh-test-a"};
  r.properties.set("source", source);
  r.properties = sdk::apply_defaults(p.schema(), r.properties);
  sdk::Plan plan{r.rid, sdk::PlanAction::Create, {{"properties.ensure", Value(), Value("present")}}, r};
  sdk::CancelToken cancel;
  return p.apply(plan, cancel);
}

TEST(PackageSourceTest, SourcesFileThroughASymlinkIsRefused) {
  Dir d;
  fs::create_directories(d.path / "real");
  std::ofstream(d.path / "real" / "x.list") << "deb [trusted=yes] http://127.0.0.1:1/ ./\n";
  fs::create_directory_symlink(d.path / "real", d.path / "link");
  auto r = apply_with_source((d.path / "link" / "x.list").string());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::PermissionDenied) << r.error().describe();
  EXPECT_EQ(r.error().path, "properties.source");
  EXPECT_NE(r.error().message.find("is a symbolic link"), std::string::npos) << r.error().message;
}

TEST(PackageSourceTest, SourcesFileOthersCanWriteIsRefused) {
  Dir d;
  const fs::path f = d.path / "x.list";
  std::ofstream(f) << "deb [trusted=yes] http://127.0.0.1:1/ ./\n";
  ASSERT_EQ(::chmod(f.c_str(), 0666), 0);
  auto r = apply_with_source(f.string());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::PermissionDenied) << r.error().describe();
  EXPECT_NE(r.error().message.find("writable by everyone"), std::string::npos) << r.error().message;
  ASSERT_EQ(::chmod(d.path.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(f.c_str(), 0644), 0);
  auto in_open_dir = apply_with_source(f.string());
  ASSERT_FALSE(in_open_dir);
  EXPECT_NE(in_open_dir.error().message.find(d.path.string() + " is writable by everyone"), std::string::npos)
      << in_open_dir.error().message;
}

}  // namespace
}  // namespace mesh::plugins::package
