// The arithmetic of a rate limit (rate_limit.cc): limit_rate and
// limit_rate_after, proxy_limit_rate, the stream proxy's rates.
#include "core/rate_limit.h"

#include <gtest/gtest.h>

namespace vigil {
namespace {

TEST(LimitRate, AllowanceGrowsWithTimeFromTheRequestStart) {
  // 128k/s: nothing at the start, 128 bytes per millisecond after.
  EXPECT_EQ(limit_rate_allowance(131072, 0, 0, 0), 0);
  EXPECT_EQ(limit_rate_allowance(131072, 0, 0, 1000), 131072);
  EXPECT_EQ(limit_rate_allowance(131072, 0, 65536, 1000), 65536);
  EXPECT_EQ(limit_rate_allowance(131072, 0, 65536, 250), -32768);
  // A clock that stepped back gives no credit.
  EXPECT_EQ(limit_rate_allowance(1000, 0, 10, -5), -10);
}

TEST(LimitRate, TheFirstBytesAreFreeWithLimitRateAfter) {
  EXPECT_EQ(limit_rate_allowance(1000, 4096, 0, 0), 4096);
  EXPECT_EQ(limit_rate_allowance(1000, 4096, 4096, 0), 0);
  EXPECT_EQ(limit_rate_allowance(1000, 4096, 5096, 1000), 0);
  EXPECT_EQ(limit_rate_allowance(1000, 4096, 5096, 2000), 1000);
}

TEST(LimitRate, DelayIsWhenTheNextByteIsDue) {
  EXPECT_EQ(limit_rate_delay(1000, 0), 1u);  // one byte at 1000 B/s: 1 ms
  EXPECT_EQ(limit_rate_delay(1000, -999), 1000u);
  EXPECT_EQ(limit_rate_delay(131072, -32768), 251u);  // a quarter second behind
  // Waiting that long makes the allowance positive again.
  const Msec d = limit_rate_delay(131072, limit_rate_allowance(131072, 0, 65536, 250));
  EXPECT_GT(limit_rate_allowance(131072, 0, 65536, 250 + static_cast<MsecDiff>(d)), 0);
}

}  // namespace
}  // namespace vigil
