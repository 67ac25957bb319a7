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

// read_file_padded: the bytes of read_file, then kPadding zero bytes; the same refusals.
TEST(FsTest, APaddedReadHoldsTheFileThenZeros) {
  auto dir = std::filesystem::temp_directory_path() / ("mesh-fs-" + random_token(6));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "f").string();
  std::string content(200000, 'x');
  content[12345] = '\0';
  ASSERT_TRUE(write_file_atomic(file, content, 0600));
  auto padded = read_file_padded(file);
  ASSERT_TRUE(padded) << padded.error().message;
  EXPECT_EQ(padded->view(), content);
  for (std::size_t i = 0; i < PaddedText::kPadding; ++i) ASSERT_EQ(padded->data[content.size() + i], '\0');
  auto empty = (dir / "e").string();
  ASSERT_TRUE(write_file_atomic(empty, "", 0600));
  ASSERT_TRUE(read_file_padded(empty));
  EXPECT_EQ(read_file_padded(empty)->size, 0u);
  auto big = read_file_padded(file, 1000);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, sdk::ErrorCode::InvalidArgument);
  EXPECT_EQ(big.error().message, read_file(file, 1000).error().message);
  auto missing = read_file_padded((dir / "missing").string());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, sdk::ErrorCode::NotFound);
  EXPECT_EQ(missing.error().message, read_file((dir / "missing").string()).error().message);
  std::filesystem::remove_all(dir);
}

// AtomicFileWriter: written in pieces, visible only at commit(); abandoned, it leaves the old
// file and no temp file.
TEST(FsTest, AFileWrittenInPiecesAppearsWholeAtCommitOnly) {
  auto dir = std::filesystem::temp_directory_path() / ("mesh-fs-" + random_token(6));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "f").string();
  ASSERT_TRUE(write_file_atomic(file, "old", 0644));
  auto entries = [&] {
    int n = 0;
    for (auto& e : std::filesystem::directory_iterator(dir)) (void)e, ++n;
    return n;
  };
  {
    auto w = AtomicFileWriter::create(file, 0600);
    ASSERT_TRUE(w) << w.error().message;
    ASSERT_TRUE(w->write("one,"));
    ASSERT_TRUE(w->write(std::string(100000, 'x')));
    ASSERT_TRUE(w->write(""));
    EXPECT_EQ(*read_file(file), "old");  // not visible before the commit
    EXPECT_EQ(entries(), 2);             // the temp file beside it
    ASSERT_TRUE(w->commit());
    EXPECT_FALSE(w->write("late"));      // committed: closed
    EXPECT_FALSE(w->commit());
  }
  EXPECT_EQ(*read_file(file), "one," + std::string(100000, 'x'));
  EXPECT_EQ(std::filesystem::status(file).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_EQ(entries(), 1);
  {
    auto w = AtomicFileWriter::create(file, 0600);
    ASSERT_TRUE(w);
    ASSERT_TRUE(w->write("never"));
    AtomicFileWriter moved = std::move(*w);  // the temp file goes with the move
    EXPECT_EQ(entries(), 2);
  }  // destroyed without a commit: the temp file is removed, the file is as it was
  EXPECT_EQ(entries(), 1);
  EXPECT_EQ(read_file(file)->size(), 100004u);
  auto bad = AtomicFileWriter::create((dir / "missing" / "f").string());
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, sdk::ErrorCode::NotFound);
  EXPECT_NE(bad.error().message.find("missing"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mesh::common
