// The host's version from dpkg and its upgrade state files (docs/decisions/0076).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "mesh/common/fs.h"
#include "mesh/common/process.h"
#include "mesh/common/protocol.h"
#include "mesh/host/upgrade.h"
#include "mesh/host/version.h"
#include "mesh/testing/temp_dir.h"

namespace mesh::host {
namespace {

namespace fs = std::filesystem;
using mesh::testing::TempDir;

TEST(HostVersionTest, AFileNoPackageOwnsHasTheBuildsVersion) {
  TempDir dir;
  const std::string exe = (dir.path() / "mesh-host").string();
  std::ofstream(exe) << "#!/bin/sh\n";
  auto v = query_host_version(exe);
  EXPECT_EQ(v.version, protocol::kHostVersion);
  EXPECT_EQ(v.package, "");
  EXPECT_EQ(query_host_version("relative/path").version, protocol::kHostVersion);
}

TEST(HostVersionTest, AFileAPackageOwnsHasThatPackagesVersion) {
  // dpkg's own program: owned by the package `dpkg` on any Debian system.
  if (::access("/usr/bin/dpkg-query", X_OK) != 0) GTEST_SKIP() << "no dpkg-query here";
  auto expected = common::run_process({"/usr/bin/dpkg-query", "-W", "-f=${Version}", "dpkg"}, std::chrono::seconds(10));
  ASSERT_TRUE(expected.succeeded()) << expected.output;
  auto v = query_host_version("/usr/bin/dpkg");
  EXPECT_EQ(v.package, "dpkg");
  EXPECT_EQ(v.version, expected.output);
  EXPECT_NE(v.version, protocol::kHostVersion);
}

TEST(HostVersionTest, TheRunningProgramIsNamedAbsolutely) {
  EXPECT_EQ(self_executable().front(), '/');
  EXPECT_TRUE(fs::exists(self_executable()));
}

TEST(UpgradeStateTest, WritesAndReadsKeyValueLinesAtomicallyWithPrivateModes) {
  TempDir dir;
  const std::string up = upgrade_dir(dir.path().string());
  ASSERT_TRUE(write_state_file(up, kPendingFile,
                               {{"package", "nox-mesh-host"}, {"from_version", "0.1.0-1"}, {"to_version", "0.2.0-1"},
                                {"revision", "12"}, {"at_ms", "1796022001000"}}));
  struct stat st {};
  ASSERT_EQ(::stat(up.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((up + "/pending").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // What a shell script reads: plain key=value lines.
  auto text = common::read_file(up + "/pending");
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, "at_ms=1796022001000\nfrom_version=0.1.0-1\npackage=nox-mesh-host\nrevision=12\nto_version=0.2.0-1\n");
  auto back = read_state_file(up, kPendingFile);
  ASSERT_TRUE(back && *back);
  EXPECT_EQ((**back)["to_version"], "0.2.0-1");
  EXPECT_EQ(decimal_field(**back, "revision"), 12u);
  EXPECT_EQ(decimal_field(**back, "package"), std::nullopt);
  EXPECT_EQ(decimal_field(**back, "missing"), std::nullopt);
  ASSERT_TRUE(remove_state_file(up, kPendingFile));
  auto gone = read_state_file(up, kPendingFile);
  ASSERT_TRUE(gone);
  EXPECT_FALSE(*gone);
  EXPECT_TRUE(remove_state_file(up, kPendingFile)) << "removing what is not there is fine";
}

TEST(UpgradeStateTest, AFileTheScriptWroteIsReadAndABadLineIsNamed) {
  TempDir dir;
  const std::string up = dir.path().string();
  std::ofstream(up + "/rolled-back") << "# by host-rollback\nfailed_version=0.3.0-1\n\nfailed_revision=13\r\n"
                                        "restored_version=0.2.0-1\nat_ms=1\n";
  auto rb = read_state_file(up, kRolledBackFile);
  ASSERT_TRUE(rb && *rb) << (rb ? "" : rb.error().message);
  EXPECT_EQ((**rb)["failed_revision"], "13");
  EXPECT_EQ((**rb).size(), 4u);
  std::ofstream(up + "/stopped") << "failed_version=0.3.0-1\nthis line has no equals sign\n";
  auto bad = read_state_file(up, kStoppedFile);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, up + "/stopped:2: expected key=value, got 'this line has no equals sign'");
}

TEST(UpgradeStateTest, AFileWhoseValuesAreNotWhatDecision76SaysIsRefusedNamingTheKey) {
  TempDir dir;
  const std::string up = dir.path().string();
  std::ofstream(up + "/pending") << "package=nox-mesh-host\nfrom_version=0.1.0\nto_version=../../x y\nrevision=4\n";
  auto p = read_state_file(up, kPendingFile);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, sdk::ErrorCode::InvalidArgument);
  EXPECT_EQ(p.error().message.rfind(up + "/pending: to_version: '../../x y' is not a version", 0), 0u)
      << p.error().message;
  std::ofstream(up + "/pending") << "package=nox-mesh-host\nfrom_version=0.1.0\nto_version=0.2.0\nrevision=abc\n";
  p = read_state_file(up, kPendingFile);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message, up + "/pending: revision: 'abc' is not a decimal number");
  std::ofstream(up + "/rolled-back") << "failed_version=$(touch /tmp/x)\nfailed_revision=3\nrestored_version=0.1.0\n";
  auto rb = read_state_file(up, kRolledBackFile);
  ASSERT_FALSE(rb);
  EXPECT_NE(rb.error().message.find("failed_version: '$(touch /tmp/x)' is not a version"), std::string::npos)
      << rb.error().message;
  std::ofstream(up + "/rolled-back") << "failed_version=0.2.0\nrestored_version=0.1.0\n";
  rb = read_state_file(up, kRolledBackFile);
  ASSERT_FALSE(rb);
  EXPECT_EQ(rb.error().message, up + "/rolled-back: failed_revision: missing");
  std::ofstream(up + "/rolled-back") << "failed_version=0.2.0\nfailed_revision=3\nrestored_version=0.1.0\nextra=1\n";
  EXPECT_TRUE(read_state_file(up, kRolledBackFile)) << "a key decision 76 does not name is allowed";
}

TEST(UpgradeStateTest, AValueWithALineBreakIsRefusedAndNothingIsWritten) {
  TempDir dir;
  const std::string up = dir.path().string();
  auto r = write_state_file(up, kStoppedFile, {{"reason", "two\nlines"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "state file stopped: the value of reason holds a line break");
  EXPECT_FALSE(fs::exists(up + "/stopped"));
}

}  // namespace
}  // namespace mesh::host
