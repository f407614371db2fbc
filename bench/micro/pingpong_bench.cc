// Echo ping-pong over loopback: the same echo server written on Vigil, on
// libevent and on libuv (each: nonblocking read until EAGAIN, write the bytes
// straight back), driven by the same epoll client. One round trip = every one
// of N connections sends 64 bytes and gets them back.
//
//   build/release/bench_pingpong_bench --benchmark_min_time=2
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "vigil/core/log.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

#ifdef VIGIL_HAVE_LIBEVENT
#include <event2/event.h>
#endif
#ifdef VIGIL_HAVE_LIBUV
#include <uv.h>
#endif

namespace {

constexpr std::size_t kMessage = 64;

int listen_any(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == -1 || ::listen(fd, 1024) == -1) {
    std::abort();
  }
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  *port = ntohs(sa.sin_port);
  return fd;
}

// The client: N blocking-connected sockets driven through one epoll set.
class Client {
 public:
  Client(int port, int n) : ep_(::epoll_create1(EPOLL_CLOEXEC)) {
    for (int i = 0; i < n; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(static_cast<uint16_t>(port));
      sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == -1) std::abort();
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u32 = static_cast<uint32_t>(fds_.size());
      ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
      fds_.push_back(fd);
    }
    got_.resize(fds_.size());
  }
  ~Client() {
    for (int fd : fds_) ::close(fd);
    ::close(ep_);
  }
  // One round: every connection sends a message and reads its echo.
  bool round() {
    char msg[kMessage];
    std::memset(msg, 'p', sizeof msg);
    for (std::size_t i = 0; i < fds_.size(); ++i) {
      got_[i] = 0;
      if (::write(fds_[i], msg, sizeof msg) != static_cast<ssize_t>(sizeof msg)) return false;
    }
    std::size_t done = 0;
    epoll_event evs[256];
    char buf[4096];
    while (done < fds_.size()) {
      int n = ::epoll_wait(ep_, evs, 256, 5000);
      // EINTR: io_uring may interrupt this thread's wait when it runs work
      // queued by the ring's setup here (the loop is made on this thread).
      if (n == -1 && errno == EINTR) continue;
      if (n <= 0) return false;
      for (int k = 0; k < n; ++k) {
        std::size_t i = evs[k].data.u32;
        ssize_t r = ::read(fds_[i], buf, sizeof buf);
        if (r <= 0) return false;
        got_[i] += static_cast<std::size_t>(r);
        if (got_[i] == kMessage) ++done;
      }
    }
    return true;
  }

 private:
  int ep_;
  std::vector<int> fds_;
  std::vector<std::size_t> got_;
};

// CPU time the calling thread has used, in ns: measured inside each server
// thread, it is what the server spent per message, whatever else the machine
// was doing (wall time on a shared 2-core box swings far more).
double thread_cpu_ns() {
  rusage ru{};
  ::getrusage(RUSAGE_THREAD, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
}

void report_server_cpu(benchmark::State& state, double server_ns) {
  double msgs = static_cast<double>(state.iterations() * state.range(0));
  if (msgs > 0) state.counters["server_ns_per_msg"] = server_ns / msgs;
}

void drive(benchmark::State& state, int port) {
  Client client(port, static_cast<int>(state.range(0)));
  for (auto _ : state) {
    if (!client.round()) {
      state.SkipWithError("round trip failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// ---- Vigil -------------------------------------------------------------------
void vigil_on_read(vigil::Event& rev) {
  auto& c = *rev.owner<vigil::Connection>();
  char buf[16384];
  while (rev.ready) {  // nginx's idiom: a short read already told us it's drained
    long n = c.recv(c, buf, sizeof buf);
    if (n == vigil::kIoAgain) break;
    if (n <= 0 || c.send(c, buf, static_cast<std::size_t>(n)) != n) {
      c.loop->pool().close_connection(c);
      return;
    }
  }
  if (!c.loop->handle_read_event(rev)) c.loop->pool().close_connection(c);
}
void vigil_on_accept(vigil::Connection& c) {
  c.read->handler = vigil_on_read;
  if (!c.loop->handle_read_event(*c.read)) c.loop->pool().close_connection(c);
}

void BM_PingPong_vigil(benchmark::State& state, const char* backend) {
  vigil::Log log;
  log.set_level(vigil::LogLevel::kError);
  vigil::Listening ls;
  ls.handler = vigil_on_accept;
  if (!ls.set_address("127.0.0.1:0") || !ls.open()) return state.SkipWithError("listen");
  vigil::EventLoopConfig cfg;
  cfg.use = backend;
  cfg.connections = 1024;
  auto r = vigil::EventLoop::create(cfg, log);
  if (!r) return state.SkipWithError(r.status().to_string().c_str());
  vigil::EventLoop& loop = *r.value();
  if (!loop.add_listening(ls)) return state.SkipWithError("add_listening");
  loop.notify_event().handler = [](vigil::Event& ev) {
    static_cast<vigil::EventLoop*>(ev.data)->stop();
  };
  double server_ns = 0;
  std::thread server([&] {
    loop.run();
    server_ns = thread_cpu_ns();
  });
  drive(state, ls.port());
  (void)loop.backend().notify();
  server.join();
  report_server_cpu(state, server_ns);
  for (std::size_t i = 0; i < loop.pool().size(); ++i) {
    vigil::Connection& c = loop.pool().connections()[i];
    if (c.fd != -1 && &c != ls.connection) loop.pool().close_connection(c);
  }
}
BENCHMARK_CAPTURE(BM_PingPong_vigil, epoll, "epoll")->Arg(1)->Arg(100)->UseRealTime();
BENCHMARK_CAPTURE(BM_PingPong_vigil, poll, "poll")->Arg(1)->Arg(100)->UseRealTime();
#if VIGIL_HAVE_URING
// Completion-based: accepted connections recv/send through the ring.
BENCHMARK_CAPTURE(BM_PingPong_vigil, io_uring, "io_uring")->Arg(1)->Arg(100)->UseRealTime();
#endif
#if VIGIL_HAVE_KQUEUE
// On Linux this is libkqueue's emulation on epoll (VIGIL_KQUEUE_ROOT): for
// information only, it measures libkqueue as much as the backend.
BENCHMARK_CAPTURE(BM_PingPong_vigil, kqueue, "kqueue")->Arg(1)->Arg(100)->UseRealTime();
#endif

// ---- libevent ------------------------------------------------------------------
#ifdef VIGIL_HAVE_LIBEVENT
struct LeConn {
  event* ev;
  int fd;
};
void le_on_read(evutil_socket_t fd, short, void* arg) {
  auto* c = static_cast<LeConn*>(arg);
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0 || ::send(fd, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) {
      event_free(c->ev);
      ::close(fd);
      delete c;
      return;
    }
  }
}
void le_on_accept(evutil_socket_t lfd, short, void* arg) {
  auto* base = static_cast<event_base*>(arg);
  int fd = ::accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd == -1) return;
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto* c = new LeConn{nullptr, fd};
  c->ev = event_new(base, fd, EV_READ | EV_PERSIST, le_on_read, c);
  event_add(c->ev, nullptr);
}
void BM_PingPong_libevent(benchmark::State& state) {
  int port = 0;
  int lfd = listen_any(&port);
  event_base* base = event_base_new();
  event* lev = event_new(base, lfd, EV_READ | EV_PERSIST, le_on_accept, base);
  event_add(lev, nullptr);
  int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  event* stop = event_new(
      base, efd, EV_READ,
      [](evutil_socket_t, short, void* b) { event_base_loopbreak(static_cast<event_base*>(b)); },
      base);
  event_add(stop, nullptr);
  double server_ns = 0;
  std::thread server([&] {
    event_base_dispatch(base);
    server_ns = thread_cpu_ns();
  });
  drive(state, port);
  uint64_t one = 1;
  (void)!::write(efd, &one, sizeof one);
  server.join();
  report_server_cpu(state, server_ns);
  event_free(stop);
  event_free(lev);
  event_base_free(base);  // connection events leak with the base's teardown: fine for a bench
  ::close(efd);
  ::close(lfd);
}
BENCHMARK(BM_PingPong_libevent)->Arg(1)->Arg(100)->UseRealTime();
#endif

// ---- libuv ----------------------------------------------------------------------
#ifdef VIGIL_HAVE_LIBUV
char g_uv_buf[16384];
void uv_on_alloc(uv_handle_t*, size_t, uv_buf_t* buf) {
  *buf = uv_buf_init(g_uv_buf, sizeof g_uv_buf);
}
void uv_on_close(uv_handle_t* h) {
  delete reinterpret_cast<uv_tcp_t*>(h);
}
void uv_on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
  if (n == 0) return;
  if (n < 0) return uv_close(reinterpret_cast<uv_handle_t*>(s), uv_on_close);
  uv_buf_t out = uv_buf_init(buf->base, static_cast<unsigned>(n));
  // uv_try_write: the same direct send as the other two servers.
  if (uv_try_write(s, &out, 1) != n) uv_close(reinterpret_cast<uv_handle_t*>(s), uv_on_close);
}
void uv_on_connection(uv_stream_t* server, int status) {
  if (status < 0) return;
  auto* client = new uv_tcp_t;
  uv_tcp_init(server->loop, client);
  client->data = client;  // marks heap-allocated handles for the teardown walk
  if (uv_accept(server, reinterpret_cast<uv_stream_t*>(client)) != 0) {
    return uv_close(reinterpret_cast<uv_handle_t*>(client), uv_on_close);
  }
  uv_tcp_nodelay(client, 1);
  uv_read_start(reinterpret_cast<uv_stream_t*>(client), uv_on_alloc, uv_on_read);
}
void BM_PingPong_libuv(benchmark::State& state) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  uv_tcp_t server;
  uv_tcp_init(&loop, &server);
  sockaddr_in sa{};
  uv_ip4_addr("127.0.0.1", 0, &sa);
  uv_tcp_bind(&server, reinterpret_cast<const sockaddr*>(&sa), 0);
  uv_listen(reinterpret_cast<uv_stream_t*>(&server), 1024, uv_on_connection);
  int len = sizeof sa;
  uv_tcp_getsockname(&server, reinterpret_cast<sockaddr*>(&sa), &len);
  uv_async_t stop;
  uv_async_init(&loop, &stop, [](uv_async_t* a) { uv_stop(a->loop); });
  double server_ns = 0;
  std::thread t([&] {
    uv_run(&loop, UV_RUN_DEFAULT);
    server_ns = thread_cpu_ns();
  });
  drive(state, ntohs(sa.sin_port));
  uv_async_send(&stop);
  t.join();
  report_server_cpu(state, server_ns);
  uv_walk(
      &loop,
      [](uv_handle_t* h, void*) {
        if (!uv_is_closing(h)) uv_close(h, h->data == h ? uv_on_close : nullptr);
      },
      nullptr);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
}
BENCHMARK(BM_PingPong_libuv)->Arg(1)->Arg(100)->UseRealTime();
#endif

}  // namespace

BENCHMARK_MAIN();
