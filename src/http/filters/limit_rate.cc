// limit_rate / limit_rate_after (nginx's ngx_http_write_filter limit): a
// response goes out at most at `limit_rate` bytes per second, the first
// `limit_rate_after` bytes free. HTTP/1's final writer (writer.cc), which
// every response goes through, asks rate_allowance how much it may send now; when
// nothing, it sets the write event's `delayed` flag and a timer for when the
// next byte is due, and the loop serves others meanwhile.
//
// Unlike nginx, the clock has millisecond precision and no one-second head
// start (nginx computes rate * (now_sec - start_sec + 1)), so a response of N
// bytes past limit_rate_after takes at least N / rate seconds.
#include "http/filters/limit_rate.h"

#include "core/conf/values.h"
#include "http/core/conf.h"
#include "http/core/request.h"

namespace vigil::http {

off_t limit_rate_allowance(std::uint64_t rate, std::uint64_t after, off_t sent, MsecDiff elapsed) {
  if (elapsed < 0) elapsed = 0;
  const auto credit = static_cast<off_t>(rate * static_cast<std::uint64_t>(elapsed) / 1000);
  return credit + static_cast<off_t>(after) - sent;
}

Msec limit_rate_delay(std::uint64_t rate, off_t allowance) {
  // The time until `-allowance + 1` bytes are due (nginx: -limit * 1000 / rate + 1).
  return static_cast<Msec>(static_cast<std::uint64_t>(-allowance) * 1000 / rate + 1);
}

void add_limit_rate_directives(Module& m, ConfSlot<HttpLocConf> loc) {
  constexpr ConfContextMask kAny = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
  m.add("limit_rate", kAny, Arity::exactly(1), loc.size(&HttpLocConf::limit_rate, 0));
  m.add("limit_rate_after", kAny, Arity::exactly(1), loc.size(&HttpLocConf::limit_rate_after, 0));
}

}  // namespace vigil::http
