// Durations (duration.h, header-only): the "500ms", "15s", "2m", "1h" grammar.
#include <gtest/gtest.h>

#include "mesh/common/duration.h"

namespace mesh::common {
namespace {

TEST(DurationTest, ParsesUnits) {
  EXPECT_EQ(parse_duration("500ms")->count(), 500);
  EXPECT_EQ(parse_duration("15s")->count(), 15000);
  EXPECT_EQ(parse_duration("2m")->count(), 120000);
  EXPECT_EQ(parse_duration("1h")->count(), 3600000);
  EXPECT_FALSE(parse_duration("15"));
  EXPECT_FALSE(parse_duration("s"));
  EXPECT_FALSE(parse_duration("-1s"));
  EXPECT_FALSE(parse_duration("1.5s"));
  EXPECT_EQ(format_duration(std::chrono::milliseconds(120000)), "2m");
  EXPECT_EQ(format_duration(std::chrono::milliseconds(1500)), "1500ms");
}

}  // namespace
}  // namespace mesh::common
