#include "core/rate_limit.h"

namespace vigil {

off_t limit_rate_allowance(std::uint64_t rate, std::uint64_t after, off_t moved, MsecDiff elapsed) {
  if (elapsed < 0) elapsed = 0;
  const auto credit = static_cast<off_t>(rate * static_cast<std::uint64_t>(elapsed) / 1000);
  return credit + static_cast<off_t>(after) - moved;
}

Msec limit_rate_delay(std::uint64_t rate, off_t allowance) {
  // The time until `-allowance + 1` bytes are due (nginx: -limit * 1000 / rate + 1).
  return static_cast<Msec>(static_cast<std::uint64_t>(-allowance) * 1000 / rate + 1);
}

}  // namespace vigil
