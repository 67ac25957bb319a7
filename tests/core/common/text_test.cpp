// common::printable and common::first_unprintable: what a log line or a text view shows of a
// value that came from outside.
#include <gtest/gtest.h>

#include <iostream>

#include "mesh/common/text.h"
#include "mesh/common/error_text.h"
#include "mesh/common/version_token.h"

namespace mesh::common {
namespace {

TEST(PrintableTest, EscapesControlCharactersAndKeepsUtf8) {
  EXPECT_EQ(printable("file:/etc/motd"), "file:/etc/motd");
  EXPECT_EQ(printable("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(printable(std::string_view("x\0y", 3)), "x\\x00y");
  EXPECT_EQ(printable("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
  EXPECT_EQ(printable("del\x7f"), "del\\x7f");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");  // é €
  // C1 CSI (U+009B), line separator, right-to-left override.
  EXPECT_EQ(printable("a\xc2\x9b" "b\xe2\x80\xa8" "c\xe2\x80\xae" "d"), "a\\u009bb\\u2028c\\u202ed");
  // Every Bidi_Control character, the marks too (found by an attacker: U+200F and U+061C got
  // into a file name).
  EXPECT_EQ(printable("a\xe2\x80\x8f" "b\xd8\x9c" "c\xe2\x80\x8e" "d"), "a\\u200fb\\u061cc\\u200ed");
  // Invalid UTF-8: a lone continuation byte, an overlong '/', a surrogate, a truncated sequence.
  EXPECT_EQ(printable("\x80"), "\\x80");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(printable("ok\xe2\x82"), "ok\\xe2\\x82");
  // Backslashes are kept, so escaping twice changes nothing.
  const std::string once = printable("a\nb\\c\x1b");
  EXPECT_EQ(printable(once), once);
}

TEST(PrintableTest, BoundsTheTextAndSaysHowLongTheValueWas) {
  EXPECT_EQ(printable(std::string(10, 'x'), 10), std::string(10, 'x'));
  EXPECT_EQ(printable(std::string(11, 'x'), 10), std::string(10, 'x') + "\xe2\x80\xa6 (11 bytes)");
  // Never cut inside a character or an escape.
  EXPECT_EQ(printable("abc\xc3\xa9", 4), "abc\xe2\x80\xa6 (5 bytes)");
  EXPECT_EQ(printable("abc\n", 4), "abc\xe2\x80\xa6 (4 bytes)");
  // 900 KB of newlines: one bounded line.
  const std::string big = printable(std::string(900 * 1024, '\n'));
  EXPECT_LE(big.size(), kPrintableBytes + 32);
  EXPECT_EQ(big.find('\n'), std::string::npos);
  EXPECT_NE(big.find("(921600 bytes)"), std::string::npos);
}

TEST(PrintableTest, FirstUnprintableFindsWhatWouldBeEscaped) {
  EXPECT_EQ(first_unprintable("/etc/motd"), std::string_view::npos);
  EXPECT_EQ(first_unprintable("/srv/caf\xc3\xa9"), std::string_view::npos);
  EXPECT_EQ(first_unprintable("new\nline"), 3u);
  EXPECT_EQ(first_unprintable(std::string_view("ab\0", 3)), 2u);
  // Long names are looked at eight bytes at a time: every position of every kind of byte that
  // stops the scan is still found, and printable ones around it are not taken for one.
  for (std::size_t len : {8u, 9u, 16u, 23u, 40u}) {
    for (std::size_t at = 0; at < len; ++at) {
      for (unsigned char bad : {0x00u, 0x01u, 0x1fu, 0x7fu}) {
        std::string s(len, 'a');
        s[at] = static_cast<char>(bad);
        EXPECT_EQ(first_unprintable(s), at) << len << " " << at << " " << int(bad);
      }
      std::string edge(len, '~');  // 0x7E, the last printable one
      edge[at] = ' ';              // 0x20, the first
      EXPECT_EQ(first_unprintable(edge), std::string_view::npos);
      std::string utf8(len + 1, 'b');
      utf8[at] = '\xc3';
      utf8[at + 1] = '\xa9';  // é: printable, found byte by byte
      EXPECT_EQ(first_unprintable(utf8), std::string_view::npos) << len << " " << at;
    }
  }
  EXPECT_EQ(first_unprintable("a\xc2\x85"), 1u);  // NEL
  EXPECT_EQ(first_unprintable("x\xe2\x81\xa6y"), 1u);  // LRI
  EXPECT_EQ(first_unprintable("\xff"), 0u);
}

// A pipeline version goes into build commands and file names: an opaque Debian/semver-like
// token, never a path or an option.
TEST(VersionTokenTest, AcceptsDebianAndSemverVersionsAndRefusesPathsAndOptions) {
  for (const char* ok : {"1", "1.4.2", "2026.12.01+git.3f9e~rc1", "1:2.3-4", "1.0.0-rc.1", "v2_b", "A"})
    EXPECT_TRUE(valid_version_token(ok)) << ok;
  EXPECT_TRUE(valid_version_token(std::string(128, '7')));
  for (const char* bad : {"", "../../x", "..", "a/b", "-rf", ".1", "~1", "1 2", "1\n", "1;rm", "$(x)", "1*"})
    EXPECT_FALSE(valid_version_token(bad)) << bad;
  EXPECT_FALSE(valid_version_token(std::string(129, '7')));
}

// A message that already names its path (a file's error with its line, a module's with its
// source) is described as it is: the path is printed once, never "waves: waves: ...".
TEST(DescribedTest, PrintsThePathOnce) {
  EXPECT_EQ(described(sdk::Error{sdk::ErrorCode::InvalidArgument, "must be a string", "waves"}), "waves: must be a string");
  EXPECT_EQ(described(sdk::Error{sdk::ErrorCode::InvalidArgument, "no path", ""}), "no path");
  EXPECT_EQ(described(sdk::Error{sdk::ErrorCode::InvalidArgument, "/p/hello.toml:3: stage[0].comand: unknown key", "stage[0].comand"}),
            "/p/hello.toml:3: stage[0].comand: unknown key");
  EXPECT_EQ(described(sdk::Error{sdk::ErrorCode::InvalidArgument, "module: 'Web!' is not a module name", "module"}),
            "module: 'Web!' is not a module name");
  EXPECT_EQ(described(sdk::Error{sdk::ErrorCode::InvalidArgument, "web.json: module: 'Web!' is not a module name", "module"}),
            "web.json: module: 'Web!' is not a module name");
  // A path that is only a prefix of a word in the message is still added.
  EXPECT_EQ(described(sdk::Error{sdk::ErrorCode::InvalidArgument, "version 2 is not stored", "version"}),
            "version: version 2 is not stored");
  EXPECT_EQ(described(sdk::Error{sdk::ErrorCode::InvalidArgument, "in waves: 3", "wave"}), "wave: in waves: 3");
}

}  // namespace
}  // namespace mesh::common
