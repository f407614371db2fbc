// After "101 Switching Protocols" (WebSocket and other upgrades, RFC 9110
// §7.8): the two connections become a tunnel, bytes copied both ways
// through one buffer each, a side's EOF passed on as a half-close, idle for
// at most read_timeout (nginx's ngx_http_upstream_process_upgraded). The
// client's half (its buffer, the 101 head) is in client_side.cc.
#include "http/core/worker.h"
#include "http/upstream/client_side.h"
#include "http/upstream/upstream.h"
#include "upstream/relay.h"
#include "vigil/event/loop.h"

namespace vigil::http::upstream_core {

void start_tunnel(Upstream& u) {
  u.stage = Stage::kTunnel;
  if (send_client_head(u, true) != 0) {
    finish(u, true);
    return;
  }
  u.upstream_reusable = false;
  u.nfields = 0;  // buffer 0, which holds the head, carries the tunnel from here
  if (!tunnel_client_start(u)) {
    finish(u, true);
    return;
  }
  tunnel(u);
}

void tunnel(Upstream& u) {
  Request& r = *u.r;
  Connection& c = *r.c;
  Connection& up = *u.u;
  EventLoop& loop = *c.loop;
  const int head = tunnel_send_head(u);
  if (head < 0) {
    finish(u, true);
    return;
  }
  if (head == 0) return;
  bool progress = false;
  Buf& down = u.ring[0];
  if (!upstream::relay(c, up, u.r->body.buf, u.client_eof, u.tunnel_up_shut, progress) ||
      !upstream::relay(up, c, down, u.upstream_eof, u.tunnel_down_shut, progress)) {
    finish(u, false);
    return;
  }
  if (u.client_eof && u.upstream_eof && u.r->body.buf.empty() && down.empty()) {
    finish(u, false);
    return;
  }
  if (progress || !c.read->timer_set) loop.add_timer(*c.read, u.conf->read_timeout);
  Status st = loop.handle_read_event(*c.read, u.client_eof ? kEvClose : 0);
  if (st) st = loop.handle_read_event(*up.read, u.upstream_eof ? kEvClose : 0);
  if (st) st = loop.handle_write_event(*c.write);
  if (st) st = loop.handle_write_event(*up.write);
  if (!st) finish(u, true);
}

}  // namespace vigil::http::upstream_core
