// Clocks (clock.cpp): RFC 3339 timestamps and ages.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

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

namespace mesh::common {
namespace {

// retry_backoff (decision record 132): doubled per failure from `base` up to `cap`, drawn from
// the upper half, so that waits grow and a fleet's retries spread out.
TEST(RetryBackoffTest, DoublesPerFailureUpToTheCapAndDrawsFromTheUpperHalf) {
  using std::chrono::milliseconds;
  for (int round = 0; round < 200; ++round) {
    for (int failures = 0; failures <= 10; ++failures) {
      const long ceiling = std::min(60000L, 2000L << std::max(0, failures - 1));
      const auto w = retry_backoff(failures).count();
      EXPECT_GE(w, ceiling / 2) << "failures " << failures;
      EXPECT_LT(w, ceiling) << "failures " << failures;
    }
    const auto small = retry_backoff(3, milliseconds(100), milliseconds(250)).count();
    EXPECT_GE(small, 125);
    EXPECT_LT(small, 250);
  }
  // Jittered: 200 draws of the same step are not all one value.
  std::set<long> seen;
  for (int i = 0; i < 200; ++i) seen.insert(retry_backoff(4).count());
  EXPECT_GT(seen.size(), 50u);
}

}  // namespace
}  // namespace mesh::common
