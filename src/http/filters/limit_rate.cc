// limit_rate / limit_rate_after (nginx's ngx_http_write_filter limit): a
// response goes out at most at `limit_rate` bytes per second, the first
// `limit_rate_after` bytes free. HTTP/1's final writer (writer.cc), which
// every response goes through, asks rate_allowance how much it may send now
// (core/rate_limit.h); when nothing, it sets the write event's `delayed`
// flag and a timer for when the next byte is due, and the loop serves
// others meanwhile.
#include "http/filters/limit_rate.h"

#include "core/conf/values.h"
#include "http/core/conf.h"
#include "http/core/request.h"

namespace vigil::http {

void add_limit_rate_directives(Module& m, ConfSlot<HttpLocConf> loc) {
  constexpr ConfContextMask kAny = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
  m.add("limit_rate", kAny, Arity::exactly(1), loc.size(&HttpLocConf::limit_rate, 0));
  m.add("limit_rate_after", kAny, Arity::exactly(1), loc.size(&HttpLocConf::limit_rate_after, 0));
}

}  // namespace vigil::http
