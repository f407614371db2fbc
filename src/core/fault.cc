#include "core/fault.h"

#if defined(VIGIL_FAULT_INJECTION) && VIGIL_FAULT_INJECTION

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "vigil/core/log.h"

namespace vigil::fault {

namespace {

constexpr const char* kNames[kPoints] = {"accept",    "recv", "send", "sendfile",
                                         "epoll_ctl", "open", "pool"};

struct PointState {
  std::uint64_t every = 0;    // fail every Nth call; 0: off
  std::uint32_t percent = 0;  // or fail with this probability
  std::uint64_t calls = 0;
  std::uint64_t failed = 0;
};

// Per process: each worker counts its own calls.
PointState g_points[kPoints];
bool g_armed = false;
std::uint64_t g_rng = 1;

std::uint64_t next_random() {
  // xorshift64: deterministic for a seed, which makes a failing run repeatable.
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

}  // namespace

bool hit(Point p) {
  if (!g_armed) return false;
  PointState& s = g_points[p];
  ++s.calls;
  bool fail = false;
  if (s.every != 0) {
    fail = s.calls % s.every == 0;
  } else if (s.percent != 0) {
    fail = next_random() % 100 < s.percent;
  }
  if (fail) ++s.failed;
  return fail;
}

void arm(Log& log) {
  const char* env = std::getenv("VIGIL_FAULTS");
  if (env == nullptr || *env == '\0') return;
  std::string active;
  std::string_view rest(env);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string name(item.substr(0, eq));
    std::string value(item.substr(eq + 1));
    if (name == "seed") {
      g_rng = std::strtoull(value.c_str(), nullptr, 10);
      if (g_rng == 0) g_rng = 1;
      continue;
    }
    for (unsigned i = 0; i < kPoints; ++i) {
      if (name != kNames[i]) continue;
      if (!value.empty() && value[0] == '%') {
        g_points[i].percent =
            static_cast<std::uint32_t>(std::strtoul(value.c_str() + 1, nullptr, 10));
      } else {
        g_points[i].every = std::strtoull(value.c_str(), nullptr, 10);
      }
      active += (active.empty() ? "" : ",") + name + "=" + value;
    }
  }
  g_armed = true;
  VIGIL_LOG(log, kWarn, 0, "fault injection active: %s (seed %llu)", active.c_str(),
            static_cast<unsigned long long>(g_rng));
}

}  // namespace vigil::fault

#endif
