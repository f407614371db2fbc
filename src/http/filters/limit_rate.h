#pragma once
// limit_rate / limit_rate_after: the directives (limit_rate.cc); the
// arithmetic is core/rate_limit.h, which HTTP/1's writer uses.

#include <cstdint>
#include <string_view>

#include "core/rate_limit.h"

namespace vigil::http {

struct Request;

// This response's limit_rate and limit_rate_after (0: none): the location's,
// its variables worked out on the first call, or what `set $limit_rate` chose.
std::uint64_t response_limit_rate(Request& r);
std::uint64_t response_limit_rate_after(Request& r);
// `set $limit_rate value`: false (logged "invalid size") when not a size.
bool set_limit_rate(Request& r, std::string_view value);

}  // namespace vigil::http
