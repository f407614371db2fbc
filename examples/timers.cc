// Timers and cross-thread wake-ups on libvigil: a repeating timer, a timer
// cancelled before it fires, and a second thread that hands the loop a
// message through Backend::notify(). Prints what happens, in order, and
// exits 0 once the repeating timer has ticked N times and the message came.
//
//   timers [ticks] [interval_ms] [epoll|poll|select|io_uring]
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "vigil/vigil.h"

using namespace vigil;

namespace {

// The program's state, one per loop: found from any event through
// EventLoop::data(), no globals.
struct App {
  EventLoop* loop = nullptr;
  int ticks_left = 0;
  Msec interval = 0;
  Msec started = 0;
  bool cancelled_fired = false;
  bool message_seen = false;
  std::atomic<int> message{0};  // written by the other thread, read on the loop's
  Event tick;                   // our own events: they live as long as App
  Event never;
};

void maybe_stop(App& app) {
  if (app.ticks_left == 0 && app.message_seen) app.loop->stop();
}

// A timer fires once; a repeating timer is re-armed from its own handler.
void on_tick(Event& ev) {
  App& app = *ev.owner<App>();
  ev.timedout = 0;
  --app.ticks_left;
  std::printf("tick after %llu ms, %d left\n",
              static_cast<unsigned long long>(clock::current_msec() - app.started), app.ticks_left);
  if (app.ticks_left > 0) app.loop->add_timer(ev, app.interval);
  maybe_stop(app);
}

void on_never(Event& ev) {
  ev.owner<App>()->cancelled_fired = true;
  std::printf("the cancelled timer fired: a bug\n");
}

// Runs on the loop's thread after another thread called backend().notify().
void on_notify(Event& ev) {
  App& app = *static_cast<App*>(ev.owner<EventLoop>()->data());
  const int m = app.message.load(std::memory_order_acquire);
  if (m == 0) return;  // a spurious wake-up is harmless
  std::printf("message %d from the other thread\n", m);
  app.message_seen = true;
  maybe_stop(app);
}

}  // namespace

int main(int argc, char** argv) {
  App app;
  app.ticks_left = argc > 1 ? std::atoi(argv[1]) : 3;
  app.interval = argc > 2 ? static_cast<Msec>(std::atol(argv[2])) : 100;
  if (app.ticks_left < 1) app.ticks_left = 1;

  EventLoopConfig cfg;
  cfg.use = argc > 3 ? argv[3] : "";
  cfg.connections = 16;  // no sockets here, but the pool needs a size
  auto created = EventLoop::create(cfg, Log::global());
  if (!created) {
    std::fprintf(stderr, "timers: %s\n", created.status().to_string().c_str());
    return 1;
  }
  EventLoop& loop = *created.value();
  app.loop = &loop;
  app.started = clock::current_msec();
  loop.set_data(&app);
  std::printf("libvigil %s, %s backend\n", version_string(),
              std::string(loop.backend().name()).c_str());

  app.tick.data = &app;
  app.tick.handler = on_tick;
  app.tick.log = &loop.log();
  loop.add_timer(app.tick, app.interval);

  // Armed, then cancelled: del_timer guarantees the handler never runs.
  app.never.data = &app;
  app.never.handler = on_never;
  app.never.log = &loop.log();
  loop.add_timer(app.never, app.interval / 2);
  loop.del_timer(app.never);
  std::printf("cancelled a timer before it fired\n");

  // Another thread: it may touch nothing of the loop but notify().
  loop.notify_event().handler = on_notify;
  std::thread other([&app, &loop] {
    app.message.store(42, std::memory_order_release);
    if (Status s = loop.backend().notify(); !s) {
      std::fprintf(stderr, "timers: notify: %s\n", s.to_string().c_str());
    }
  });

  loop.run();
  other.join();
  std::printf("done\n");
  return app.cancelled_fired ? 1 : 0;
}
