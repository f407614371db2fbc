// After "101 Switching Protocols" (WebSocket and other upgrades, RFC 9110
// §7.8): the two connections become a tunnel, bytes copied both ways
// through one buffer each, a side's EOF passed on as a half-close, idle for
// at most proxy_read_timeout (nginx's ngx_http_upstream_process_upgraded).

#include <cstring>

#include "http/proxy/proxy.h"
#include "http/core/worker.h"
#include "upstream/relay.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http::proxy {

void start_tunnel(ProxyState& ps) {
  Request& r = *ps.r;
  HttpConnection& hc = *r.hc;
  ps.stage = Stage::kTunnel;
  if (!build_client_head(ps, true)) {
    finish(ps, true);
    return;
  }
  ps.upstream_reusable = false;
  // The client -> backend direction uses the body buffer (a GET has none yet).
  if (ps.body.start == nullptr) {
    const std::size_t size = r.loc->client_body_buffer_size;
    char* mem = hc.worker->buffers().get(size);
    if (mem == nullptr) {
      finish(ps, true);
      return;
    }
    ps.body.reset(mem, size);
    ps.body_cap = static_cast<std::uint32_t>(size);
  }
  ps.body.pos = ps.body.last = ps.body.start;
  // Bytes the client sent after its request head belong to the new protocol.
  Buf& hb = hc.buffer;
  if (hb.start != nullptr && hb.pos < hb.last) {
    std::size_t n = static_cast<std::size_t>(hb.last - hb.pos);
    if (n > ps.body.free_space()) n = ps.body.free_space();
    std::memcpy(ps.body.last, hb.pos, n);
    ps.body.last += n;
    hb.pos += n;
  }
  ps.body_in_done = true;
  // The head goes out first, then what the backend sent after its 101.
  Connection& c = *r.c;
  while (!r.hbuf.empty()) {
    long n = c.send(c, r.hbuf.pos, r.hbuf.size());
    if (n == kIoError) {
      finish(ps, true);
      return;
    }
    if (n == kIoAgain) break;
    r.hbuf.pos += n;
  }
  tunnel(ps);
}

void tunnel(ProxyState& ps) {
  Request& r = *ps.r;
  Connection& c = *r.c;
  Connection& u = *ps.u;
  EventLoop& loop = *c.loop;
  if (!r.hbuf.empty()) {
    // The 101 head is still on its way: nothing else goes before it.
    long n = c.write->ready ? c.send(c, r.hbuf.pos, r.hbuf.size()) : kIoAgain;
    if (n == kIoError) {
      finish(ps, true);
      return;
    }
    if (n > 0) r.hbuf.pos += n;
    if (!r.hbuf.empty()) {
      loop.add_timer(*c.write, r.loc->send_timeout);
      if (!loop.handle_write_event(*c.write)) finish(ps, true);
      return;
    }
    loop.del_timer(*c.write);
  }
  bool progress = false;
  Buf& down = ps.ring[0];
  if (!upstream::relay(c, u, ps.body, ps.client_eof, ps.tunnel_up_shut, progress) ||
      !upstream::relay(u, c, down, ps.upstream_eof, ps.tunnel_down_shut, progress)) {
    finish(ps, false);
    return;
  }
  if (ps.client_eof && ps.upstream_eof && ps.body.empty() && down.empty()) {
    finish(ps, false);
    return;
  }
  if (progress || !c.read->timer_set) loop.add_timer(*c.read, ps.conf->read_timeout);
  Status st = loop.handle_read_event(*c.read, ps.client_eof ? kEvClose : 0);
  if (st) st = loop.handle_read_event(*u.read, ps.upstream_eof ? kEvClose : 0);
  if (st) st = loop.handle_write_event(*c.write);
  if (st) st = loop.handle_write_event(*u.write);
  if (!st) finish(ps, true);
}

}  // namespace vigil::http::proxy
