// Logging (logging.cpp): the per-second budget that keeps a flood out of the log.
#include <gtest/gtest.h>

#include "mesh/common/logging.h"

namespace mesh::common {
namespace {

TEST(LogBudgetTest, LetsNPerSecondThroughAndCountsTheRest) {
  LogBudget budget(3);
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t hidden = 99;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(budget.take(&hidden, t0 + std::chrono::milliseconds(i)));
    EXPECT_EQ(hidden, 0u);
  }
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(budget.take(&hidden, t0 + std::chrono::milliseconds(500)));
  // The next window: the first line through says how many were hidden, once.
  ASSERT_TRUE(budget.take(&hidden, t0 + std::chrono::milliseconds(1001)));
  EXPECT_EQ(hidden, 5u);
  EXPECT_EQ(LogBudget::suffix(hidden), " (5 more like it suppressed)");
  ASSERT_TRUE(budget.take(&hidden, t0 + std::chrono::milliseconds(1002)));
  EXPECT_EQ(hidden, 0u);
  EXPECT_EQ(LogBudget::suffix(0), "");
}

}  // namespace
}  // namespace mesh::common
