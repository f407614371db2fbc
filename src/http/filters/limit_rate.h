#pragma once
// limit_rate / limit_rate_after: the directives (limit_rate.cc); the
// arithmetic is core/rate_limit.h, which HTTP/1's writer uses.

#include "core/rate_limit.h"
