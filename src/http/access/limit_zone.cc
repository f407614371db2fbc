// The request side of the limit zones (see limit_zone.h).
#include "http/access/limit_zone.h"

#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>

#include "http/core/request.h"
#include "http/core/variables.h"
#include "vigil/core/log.h"

namespace vigil::http {

std::string_view limit_key(Request& r, const VarTemplate& key, char* buf) {
  if (key.length(r) > kMaxLimitKey) {
    const Connection& c = *r.c;
    VIGIL_LOG(*c.log, kError, 0, "*%llu the value of the \"%s\" key is more than %zu bytes",
              static_cast<unsigned long long>(c.number), key.source().c_str(), kMaxLimitKey);
    return {};
  }
  return std::string_view(buf, static_cast<std::size_t>(key.write(r, buf) - buf));
}

bool put_limit_status(LimitStatus status, VarSink& out) {
  // Indexed by LimitStatus.
  static constexpr std::string_view kNames[] = {
      "", "PASSED", "DELAYED", "REJECTED", "DELAYED_DRY_RUN", "REJECTED_DRY_RUN",
  };
  if (status == LimitStatus::kNone) return false;
  out.put(kNames[static_cast<std::size_t>(status)]);
  return true;
}

}  // namespace vigil::http
