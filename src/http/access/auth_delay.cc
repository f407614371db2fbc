// auth_delay (auth_delay.h): nginx's ngx_http_core_auth_delay.
#include "http/access/auth_delay.h"

#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/phases.h"
#include "http/core/request.h"
#include "http/core/request_body.h"
#include "vigil/core/clock.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http {
namespace {

struct AuthDelayConf {
  Msec delay = 0;
};

const AuthDelayConf& auth_delay_conf(const HttpLocConf& loc) {
  return loc_conf<AuthDelayConf>(loc, auth_delay_module());
}

// While the delay runs the request reads nothing; a client that goes away
// (nginx's ngx_http_test_reading) ends it, and its timer, now. Pipelined
// input is not a close: it waits for the next request.
void delay_read_handler(Request& r) {
  Connection& c = *r.c;
  int err = 0;
  if (!c.close && !client_gone(r, err)) return;
  c.loop->del_timer(*c.write);
  c.write->delayed = 0;
  if (!c.close) {
    VIGIL_LOG(*c.log, kInfo, err, "*%llu client prematurely closed connection",
              static_cast<unsigned long long>(c.number));
  }
  terminate_request(r, c.close ? 0 : 499);
}

void delay_write_handler(Request& r) {
  Connection& c = *r.c;
  Event& wev = *c.write;
  if (!wev.timedout) {
    // Writable before the delay is over: wait for the timer.
    if (!c.loop->handle_write_event(wev)) terminate_request(r, 0);
    return;
  }
  wev.timedout = 0;
  wev.delayed = 0;
  r.read_event_handler = block_reading;
  r.write_event_handler = write_handler;
  // A body still unread is left to the lingering close (as run_phases does
  // for a status).
  if (!r.body.discarded && has_request_body(r)) r.lingering = true;
  finalize_error(r, 401);
}

}  // namespace

const HttpModule& auth_delay_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_auth_delay");  // never destroyed: used until exit
    auto loc = m->add_loc_conf<AuthDelayConf>();
    m->conf().add("auth_delay", kHttpMainConf | kHttpSrvConf | kHttpLocConf, Arity::exactly(1),
                  loc.msec(&AuthDelayConf::delay, 0));
    return m;
  }();
  return *module;
}

int auth_delay(Request& r) {
  const Msec delay = auth_delay_conf(*r.loc).delay;
  if (delay == 0) return 401;
  Connection& c = *r.c;
  EventLoop& loop = *c.loop;
  VIGIL_LOG(*c.log, kInfo, 0, "*%llu delaying unauthorized request",
            static_cast<unsigned long long>(c.number));
  Event& rev = *c.read;
  r.read_event_handler = delay_read_handler;
  if (rev.ready) {
    loop.post(rev);  // what is there already may be the client's close
  } else if (!loop.handle_read_event(rev)) {
    r.read_event_handler = block_reading;
    return 500;
  }
  Event& wev = *c.write;
  wev.delayed = 1;
  r.write_event_handler = delay_write_handler;
  loop.add_timer(wev, delay);
  return kPhaseSuspended;
}

}  // namespace vigil::http
