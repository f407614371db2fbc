// libFuzzer target for the HTTP/2 connection (http/v2/session.cc,
// stream.cc, and head_check.cc's checks of a request head's fields and its
// priority field's parser): the input is what a client sends on a cleartext HTTP/2 port,
// over a socketpair into a real worker (a configuration loaded as the server
// loads it, an event loop, the HTTP worker), so the whole path runs: the
// preface, nghttp2's frames and HPACK, the streams' requests through the
// phases (static files, return, request bodies read or discarded), flow
// control, resets, GOAWAY and the close. The first byte chooses the form:
// even, the input follows a valid preface and SETTINGS (frames); odd, it is
// the whole input (the preface too, or not). Then the client end reads what
// the server says while the loop runs, shuts its side, and the connection
// must close with every stream's request ended and its memory back
// (AddressSanitizer's leak check).
//
// Seeds: tests/fuzz/corpus/h2_session_fuzz/, written by tests/fuzz/make_h2_seeds.py.
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/conf/loader.h"
#include "fuzz_check.h"
#include "http/core/protocol.h"
#include "http/core/request.h"
#include "server/modules.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"
#include "vigil/event/pool.h"

using vigil::fuzz::check;

namespace {

constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr int kPasses = 64;

constexpr char kConf[] =
    "error_log stderr emerg;\n"
    "events { worker_connections 16; }\n"
    "http {\n"
    "  access_log off;\n"
    "  http2_max_concurrent_streams 16;\n"
    "  http2_body_preread_size 4k;\n"
    "  server {\n"
    "    listen 127.0.0.1:1;\n"
    "    http2 on;\n"
    "    root html;\n"
    "    keepalive_requests 50;\n"
    "    location = /r { return 200 \"ok\"; }\n"
    "    location = /redirect { return 302 /r; }\n"
    "    location /post { client_max_body_size 64k; return 204; }\n"
    // A body read in full (proxy_request_buffering), then a backend that
    // refuses the connection: the request-body API over DATA frames.
    "    location /proxy { client_max_body_size 64k; proxy_pass http://127.0.0.1:1; }\n"
    "  }\n"
    "}\n";

struct World {
  World() {
    char tmpl[] = "/tmp/vigil_h2_fuzz_XXXXXX";
    check(::mkdtemp(tmpl) != nullptr, "a scratch directory");
    dir = tmpl;
    check(::chdir(dir.c_str()) == 0, "chdir");
    write("conf/vigil.conf", kConf);
    write("html/index.html", "hello h2\n");
    write("html/big.bin", std::string(100 * 1024, 'b'));
    vigil::ConfLoadOptions o;
    o.modules = &vigil::server_conf_modules();
    o.allow_embedded = false;
    auto loaded = vigil::Configuration::load(o);
    if (!loaded) {
      std::fprintf(stderr, "%s\n", loaded.status().message().c_str());
      std::abort();
    }
    conf = std::move(loaded.value());
    check(
        static_cast<bool>(vigil::http::create_listeners(*conf, listening)) && listening.size() == 1,
        "one listening socket");
    vigil::EventLoopConfig cfg;
    cfg.connections = 16;
    auto l = vigil::EventLoop::create(cfg, vigil::Log::global());
    check(static_cast<bool>(l), "an event loop");
    loop = std::move(l.value());
    check(static_cast<bool>(vigil::http::init_worker(*conf, *loop, 0)), "the http worker");
    tick.data = loop.get();
    tick.handler = [](vigil::Event&) {};
    tick.log = &vigil::Log::global();
    tick.cancelable = 1;
  }
  static void write(const std::string& rel, const std::string& text) {
    const std::size_t slash = rel.find('/');
    ::mkdir(rel.substr(0, slash).c_str(), 0755);
    FILE* f = std::fopen(rel.c_str(), "wb");
    check(f != nullptr, "a scratch file");
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  // One pass of the loop that does not wait (a due timer of our own).
  void pass() {
    loop->add_timer(tick, 0);
    loop->process_events_and_timers();
  }

  std::string dir;
  std::unique_ptr<vigil::Configuration> conf;
  std::vector<std::unique_ptr<vigil::Listening>> listening;
  std::unique_ptr<vigil::EventLoop> loop;
  vigil::Event tick;
};

// What the client end has to read, read and thrown away; false at EOF.
bool drain(int fd) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) continue;
    return n != 0;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static World* w = new World();  // kept for the process: the loop and the worker's caches
  if (size < 1 || size > 65536) return 0;
  std::string in;
  if ((data[0] & 1) == 0) {
    // The preface and an empty SETTINGS frame, then the frames.
    in.assign(kPreface, sizeof kPreface - 1);
    in.append("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);
  }
  in.append(reinterpret_cast<const char*>(data + 1), size - 1);

  int sv[2];
  check(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0,
        "a socketpair");
  int big = 1 << 20;
  ::setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  ::setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);

  // As the accept handler makes a connection (event/accept.cc).
  vigil::EventLoop& loop = *w->loop;
  vigil::Listening& ls = *w->listening[0];
  vigil::Connection* c = loop.pool().get(sv[0], vigil::Log::global());
  check(c != nullptr, "a free connection");
  c->listening = &ls;
  c->arena->reset(ls.pool_size);
  c->peer_addr = reinterpret_cast<sockaddr*>(c->arena->dup(&ls.addr, ls.addrlen));
  c->peer_addrlen = ls.addrlen;
  c->addr_text = "127.0.0.1";
  loop.backend().init_io(*c);
  c->local_addr = reinterpret_cast<const sockaddr*>(&ls.addr);
  c->local_addrlen = ls.addrlen;
  c->tcp_nodelay = 2;
  c->tcp_nopush = 2;
  c->write->ready = 1;

  std::size_t at = 0;
  const auto send_more = [&] {
    while (at < in.size()) {
      const ssize_t n = ::send(sv[1], in.data() + at, in.size() - at, MSG_DONTWAIT);
      if (n <= 0) break;
      at += static_cast<std::size_t>(n);
    }
  };
  send_more();
  ls.handler(*c);

  // The server reads, answers and is read; then the client's side ends.
  bool shut = false;
  for (int i = 0; i < kPasses && c->fd != -1; ++i) {
    w->pass();
    send_more();
    if (!drain(sv[1])) break;
    if (!shut && at == in.size() && i >= kPasses / 2) {
      ::shutdown(sv[1], SHUT_WR);
      shut = true;
    }
  }
  if (!shut) ::shutdown(sv[1], SHUT_WR);
  for (int i = 0; i < kPasses && c->fd != -1; ++i) {
    w->pass();
    drain(sv[1]);
  }
  // A connection still open (a response stuck on a full window) is closed
  // as the worker's exit closes it.
  if (c->fd != -1)
    vigil::http::close_connection(*static_cast<vigil::http::HttpConnection*>(c->data));
  check(c->fd == -1, "the connection is closed");
  ::close(sv[1]);
  // What the close posted runs, so nothing of this input is left.
  w->pass();
  return 0;
}
