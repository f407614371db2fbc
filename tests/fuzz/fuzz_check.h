#pragma once
// The fuzz targets' invariant check: a broken invariant aborts (libFuzzer
// keeps the input) with a line saying which.

#include <cstdio>
#include <cstdlib>

namespace vigil::fuzz {

inline void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant broken: %s\n", what);
    std::abort();
  }
}

}  // namespace vigil::fuzz
