// Clocks (clock.cpp): RFC 3339 timestamps and ages.
#include <gtest/gtest.h>

#include "mesh/common/clock.h"

namespace mesh::common {
namespace {

TEST(ClockTest, Rfc3339RoundTripAndAges) {
  EXPECT_EQ(format_rfc3339(1795935601000), "2026-11-29T07:00:01Z");
  EXPECT_EQ(parse_rfc3339("2026-11-29T07:00:01Z"), 1795935601000);
  EXPECT_EQ(parse_rfc3339("2026-11-29T07:00:01.250Z"), 1795935601000);
  EXPECT_FALSE(parse_rfc3339("yesterday"));
  EXPECT_EQ(format_age(0, 4 * 60 * 1000), "4 minutes ago");
  EXPECT_EQ(format_age(0, 4 * 86400 * 1000LL), "4 days ago");
  EXPECT_EQ(format_age(0, 500), "just now");
}

}  // namespace
}  // namespace mesh::common
