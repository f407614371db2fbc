#pragma once
// Cached time (seed 002, 9.7): the worker reads the clock once per loop
// iteration (or when the timer_resolution alarm fired) and every consumer uses
// the cached values. Formatted strings are rebuilt at most once a second.
//
// The state is per thread, so several event loops may run in one process.

#include <csignal>
#include <cstdint>
#include <ctime>
#include <string_view>

namespace vigil {

using Msec = std::uint64_t;  // milliseconds; compare with msec_diff(), never with <
using MsecDiff = std::int64_t;

// Wrap-safe difference a - b, as nginx's (ngx_msec_int_t)(a - b).
inline constexpr MsecDiff msec_diff(Msec a, Msec b) { return static_cast<MsecDiff>(a - b); }

namespace clock {

// Monotonic milliseconds (CLOCK_MONOTONIC), the key of every timer.
Msec current_msec();
// Wall-clock seconds since the epoch and the millisecond part of it.
std::time_t now_sec();
unsigned now_msec_part();

// Preformatted strings, valid until the next time_update() that changes the second.
std::string_view imf_fixdate();      // "Sat, 21 Nov 2026 19:03:32 GMT"          (RFC 9110 IMF-fixdate)
std::string_view err_log_time();   // "2026/11/21 19:03:32"                    (local time)
std::string_view common_log_time();  // "21/Nov/2026:19:03:32 +0000"             (local time, offset)
std::string_view iso8601();        // "2026-11-21T19:03:32+00:00"             (local time, offset)
std::string_view syslog_time();    // "Nov 21 19:03:32", day padded with a space (local time)

// Reads the clocks and refreshes the cache. Called by the backend after each
// wait (flag kUpdateTime), or with timer_resolution by the loop's tick.
void time_update();

// For tests: set the cache from a fixed wall time (seconds + ms) and monotonic
// value, formatting in the given UTC offset (minutes east of UTC).
void time_update_fixed(std::time_t sec, unsigned msec, Msec mono_msec, int gmtoff_minutes = 0);

// Formats `sec` as an IMF-fixdate (the HTTP date) into `out` (at least 30 bytes); returns its length.
std::size_t format_imf_fixdate(std::time_t sec, char* out);

}  // namespace clock
}  // namespace vigil
