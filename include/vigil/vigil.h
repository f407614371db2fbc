#pragma once
// The umbrella header of libvigil: the whole public API (core and event).
// See docs/library.md for a guided tour, examples/ for complete programs.

#include "vigil/version.h"

#include "vigil/core/arena.h"
#include "vigil/core/buffer.h"
#include "vigil/core/clock.h"
#include "vigil/core/counters.h"
#include "vigil/core/log.h"
#include "vigil/core/process_mutex.h"
#include "vigil/core/result.h"

#include "vigil/event/backend.h"
#include "vigil/event/connection.h"
#include "vigil/event/event.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"
#include "vigil/event/peer.h"
#include "vigil/event/pool.h"
#include "vigil/event/posted.h"
#include "vigil/event/stats.h"
#include "vigil/event/timer.h"
