#pragma once
// The arithmetic of a transfer limited to a rate (nginx's limit_rate,
// proxy_limit_rate, and the stream proxy's proxy_upload_rate and
// proxy_download_rate): how many bytes may move now, and when the next one
// is due. The callers keep when the transfer started and what it moved;
// one waits by setting its event's `delayed` flag and a timer of
// limit_rate_delay().
//
// Unlike nginx, the clock has millisecond precision and no one-second head
// start (nginx computes rate * (now_sec - start_sec + 1)), so N bytes past
// the free ones take at least N / rate seconds.

#include <sys/types.h>

#include <cstdint>

#include "vigil/core/clock.h"

namespace vigil {

// Bytes that may still move now: `rate` bytes per second over `elapsed` ms
// since the transfer started, plus the free `after`, minus the `moved`
// bytes so far. <= 0: wait.
off_t limit_rate_allowance(std::uint64_t rate, std::uint64_t after, off_t moved, MsecDiff elapsed);
// Milliseconds until the next byte is due when the allowance is <= 0.
Msec limit_rate_delay(std::uint64_t rate, off_t allowance);

}  // namespace vigil
