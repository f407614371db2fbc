#include "vigil/event/stats.h"

namespace vigil {

namespace {
WorkerSlot g_local[kMaxWorkers];
WorkerSlot* g_slots = g_local;
}  // namespace

WorkerSlot* worker_slots() {
  return g_slots;
}
void set_worker_slots(WorkerSlot* slots) {
  g_slots = slots != nullptr ? slots : g_local;
}

}  // namespace vigil
