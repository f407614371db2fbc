#pragma once
// systemd's readiness protocol (sd_notify(3)), without libsystemd: one
// datagram to the unix socket named by $NOTIFY_SOCKET ('@' = abstract
// namespace). The master sends READY=1 when its workers are started,
// RELOADING=1 (with MONOTONIC_USEC) when a reload begins and READY=1 when it
// is done, STOPPING=1 when it stops; a new master of a binary upgrade adds
// MAINPID=. Without $NOTIFY_SOCKET nothing is sent. contrib/vigil.service
// runs vigil as Type=notify.

#include <string>

#include "vigil/core/result.h"

namespace vigil {

// Sends `state` ("READY=1", ...) if $NOTIFY_SOCKET is set; ok when unset.
Status notify_systemd(const std::string& state);

// "RELOADING=1\nMONOTONIC_USEC=<now>" as systemd 253+ wants it.
std::string systemd_reloading_state();

}  // namespace vigil
