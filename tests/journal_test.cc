// The journal limiter every peer-triggered line goes through.
#include <gtest/gtest.h>

#include <cstdint>

#include "common/limits.h"
#include "daemon/base/journal.h"

namespace opencode::daemon {
namespace {

TEST(LogLimiter, AllowsABurstPerIntervalAndCountsTheRest) {
  LogLimiter l;
  uint64_t dropped = 99;
  const uint64_t t0 = 1000;
  for (size_t i = 0; i < limits::kPeerLogBurst; ++i) {
    ASSERT_TRUE(l.Allow(t0 + i, &dropped)) << i;
    EXPECT_EQ(dropped, 0u);
  }
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(l.Allow(t0 + limits::kPeerLogIntervalUsec - 1, &dropped));
  EXPECT_EQ(l.dropped_total(), 1000u);
  // The next interval: a line again, and it carries the count.
  ASSERT_TRUE(l.Allow(t0 + limits::kPeerLogIntervalUsec, &dropped));
  EXPECT_EQ(dropped, 1000u);
  ASSERT_TRUE(l.Allow(t0 + limits::kPeerLogIntervalUsec + 1, &dropped));
  EXPECT_EQ(dropped, 0u);
}

}  // namespace
}  // namespace opencode::daemon
