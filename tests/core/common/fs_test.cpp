// Files (fs.cpp): atomic writes.
#include <gtest/gtest.h>

#include <filesystem>

#include "mesh/common/crypto.h"
#include "mesh/common/fs.h"

namespace mesh::common {
namespace {

TEST(FsTest, AtomicWriteReplacesAndLeavesNoTemp) {
  auto dir = std::filesystem::temp_directory_path() / ("mesh-fs-" + random_token(6));
  std::filesystem::create_directories(dir);
  auto file = (dir / "f").string();
  ASSERT_TRUE(write_file_atomic(file, "one", 0600));
  ASSERT_TRUE(write_file_atomic(file, "two", 0600));
  EXPECT_EQ(*read_file(file), "two");
  EXPECT_EQ(std::filesystem::status(file).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) (void)e, ++n;
  EXPECT_EQ(n, 1);
  auto bad = write_file_atomic((dir / "missing" / "f").string(), "x");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("missing"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mesh::common
