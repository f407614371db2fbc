// A TCP echo server on libvigil: one event loop, edge- or level-triggered
// backend chosen at run time. Usage: echo_server [addr:port] [epoll|poll|select]
#include <cstdio>

#include "vigil/core/log.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

using namespace vigil;

namespace {

constexpr Msec kIdleTimeout = 60000;

void on_read(Event& rev) {
  auto& c = *rev.owner<Connection>();
  if (rev.timedout || c.close) return close_connection(c);  // idle too long, or pool drain
  char buf[16384];
  while (rev.ready) {  // a short read clears `ready`: no extra recv() for EAGAIN
    long n = c.recv(c, buf, sizeof buf);
    if (n == kIoAgain) break;
    if (n <= 0) return close_connection(c);  // EOF or error
    // A client that stops reading its echo is dropped, not buffered for.
    if (c.send(c, buf, static_cast<std::size_t>(n)) != n) return close_connection(c);
  }
  c.loop->add_timer(rev, kIdleTimeout);
  if (!c.loop->handle_read_event(rev)) close_connection(c);
}

void on_accept(Connection& c) {
  c.read->handler = on_read;
  c.loop->pool().reusable(c, true);  // idle echo connections may be reclaimed
  c.loop->add_timer(*c.read, kIdleTimeout);
  if (!c.loop->handle_read_event(*c.read)) close_connection(c);
}

}  // namespace

int main(int argc, char** argv) {
  Listening ls;
  ls.handler = on_accept;
  if (Status s = ls.set_address(argc > 1 ? argv[1] : "127.0.0.1:9000"); !s) {
    std::fprintf(stderr, "echo_server: %s\n", s.to_string().c_str());
    return 1;
  }
  if (Status s = ls.open(); !s) {
    std::fprintf(stderr, "echo_server: %s\n", s.to_string().c_str());
    return 1;
  }
  EventLoopConfig cfg;
  cfg.use = argc > 2 ? argv[2] : "";
  cfg.connections = 1024;
  auto loop = EventLoop::create(cfg, Log::global());
  if (!loop) {
    std::fprintf(stderr, "echo_server: %s\n", loop.status().to_string().c_str());
    return 1;
  }
  if (Status s = loop.value()->add_listening(ls); !s) {
    std::fprintf(stderr, "echo_server: %s\n", s.to_string().c_str());
    return 1;
  }
  std::printf("echo_server listening on 127.0.0.1:%d (%s)\n", ls.port(),
              std::string(loop.value()->backend().name()).c_str());
  std::fflush(stdout);
  loop.value()->run();
}
