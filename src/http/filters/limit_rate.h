#pragma once
// limit_rate / limit_rate_after: the arithmetic the writer uses (see limit_rate.cc).

#include <sys/types.h>

#include <cstdint>

#include "vigil/core/clock.h"

namespace vigil::http {

// Bytes the response may still send now: `rate` bytes per second over
// `elapsed` ms since the request started, plus the free `after`, minus the
// `sent` bytes of this response so far (header included). <= 0: wait.
off_t limit_rate_allowance(std::uint64_t rate, std::uint64_t after, off_t sent, MsecDiff elapsed);
// Milliseconds until the next byte is due when the allowance is <= 0.
Msec limit_rate_delay(std::uint64_t rate, off_t allowance);

}  // namespace vigil::http
