#include "vigil/core/counters.h"

namespace vigil {

namespace {
SharedCounters g_local;
SharedCounters* g_counters = &g_local;
}  // namespace

SharedCounters* shared_counters() { return g_counters; }
void set_shared_counters(SharedCounters* counters) { g_counters = counters ? counters : &g_local; }

}  // namespace vigil
