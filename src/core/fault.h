#pragma once
// Fault injection for tests (build option VIGIL_FAULT_INJECTION, off by
// default: without it every check below is a constant false and compiles
// away). Chosen calls fail as the kernel could make them fail, so the error
// paths that real traffic seldom reaches run under test:
//
//   VIGIL_FAULTS="accept=7,recv=13,send=11,sendfile=5,epoll_ctl=17,open=6,pool=9,seed=1"
//
// name=N fails every Nth call of that point; name=%P fails it with
// probability P percent (a xorshift generator seeded by seed=, default 1).
// A worker arms the points once it has started (arm()): start-up itself never
// fails. Points and the errno each failure sets:
//
//   accept     accept4()  -> ECONNABORTED (the connection stays queued)
//   recv       recv/readv -> ECONNRESET
//   send       send/writev -> EPIPE
//   sendfile   sendfile() -> EIO
//   epoll_ctl  epoll_ctl() ADD/MOD of a connection (not of a listening
//              socket) -> ENOMEM
//   open       open() of a static file -> EMFILE
//   pool       ConnectionPool::get -> no free connection
//
// The arena has no point: its allocations throw (std::pmr), and a failure
// there is not a result the callers can see yet.

#include <cerrno>

namespace vigil {
class Log;
}

namespace vigil::fault {

enum Point : unsigned { kAccept, kRecv, kSend, kSendfile, kEpollCtl, kOpen, kPool, kPoints };

#if defined(VIGIL_FAULT_INJECTION) && VIGIL_FAULT_INJECTION
// True when this call at `p` must fail. False until arm().
bool hit(Point p);
// Reads VIGIL_FAULTS and arms the points it names; logs what is active.
void arm(Log& log);
inline constexpr bool kEnabled = true;
#else
constexpr bool hit(Point) {
  return false;
}
inline void arm(Log&) {}
inline constexpr bool kEnabled = false;
#endif

}  // namespace vigil::fault

// `call`, unless point `p` is to fail now: then -1 with errno = `err`.
#define VIGIL_FAULT(p, err, call) (::vigil::fault::hit(p) ? (errno = (err), -1) : (call))
