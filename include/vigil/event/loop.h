#pragma once
// One worker's event loop: the backend, the connection pool, the timer tree and
// the posted queues, driven by process_events_and_timers() in exactly the order
// of seed 001 (算法 1).
//
// Threads: a loop belongs to the thread that runs it; one loop per thread.
// Every call on a loop, its pool, its connections and its timers is made on
// that thread. The one exception is backend().notify(), safe from any thread
// and from a signal handler: it wakes a waiting loop, which then runs
// notify_event()'s handler on its own thread (hand work over through your
// own queue, then notify).
//
// Ownership: the loop owns its backend, pool (connections, events, arenas)
// and queues. It keeps `log` (create) and every Listening (add_listening)
// without owning them: they must outlive the loop. Destroying the loop does
// not close connections still open: close them first (close_connection).

#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "vigil/core/process_mutex.h"
#include "vigil/core/result.h"
#include "vigil/event/backend.h"
#include "vigil/event/pool.h"
#include "vigil/event/posted.h"
#include "vigil/event/stats.h"
#include "vigil/event/timer.h"

namespace vigil {

class Listening;
class Log;

struct EventLoopConfig {
  std::string use;                // backend name, "" = best available
  std::size_t connections = 512;  // worker_connections
  std::size_t events = 512;       // epoll_events
  std::size_t kqueue_changes = 512;
  std::size_t kqueue_events = 512;
  bool multi_accept = false;
  Msec accept_mutex_delay = 500;
  Msec timer_resolution = 0;  // 0: refresh the time after every wait
};

class EventLoop {
 public:
  static Result<std::unique_ptr<EventLoop>> create(const EventLoopConfig& cfg, Log& log);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  Backend& backend() { return *backend_; }
  unsigned capabilities() const { return caps_; }
  ConnectionPool& pool() { return pool_; }
  TimerTree& timers() { return timers_; }
  Log& log() { return *log_; }
  const EventLoopConfig& config() const { return cfg_; }
  LoopStats& stats() { return stats_; }
  // Copies the figures (LoopStats and the pool's) into `slot` for /metrics;
  // the slot's pid is the caller's business.
  void publish(WorkerSlot& slot);

  PostedQueue& posted_accept() { return posted_accept_; }
  PostedQueue& posted() { return posted_; }
  PostedQueue& posted_next() { return posted_next_; }

  // ngx_add_timer / ngx_del_timer against the cached clock.
  void add_timer(Event& ev, Msec delay) { timers_.add(ev, delay, clock::current_msec()); }
  void del_timer(Event& ev) { timers_.del(ev); }
  void post(Event& ev) { posted_.post(ev); }

  // nginx's ngx_handle_read_event / ngx_handle_write_event: make sure the
  // backend will report the event when it is not ready. Edge-triggered: add
  // once, never delete. Level-triggered: add when not ready, delete when ready
  // (or the loop would spin on it).
  Status handle_read_event(Event& rev, unsigned flags = 0);
  Status handle_write_event(Event& wev, std::size_t lowat = 0);

  // Takes a pool connection for `ls`, sets its read handler to the accept
  // handler, and (unless the accept mutex is in use) registers it. A reuseport
  // socket belongs to this worker alone: it is always registered and the
  // accept mutex never takes it away (nginx does the same).
  Status add_listening(Listening& ls);
  Status enable_accept_events();
  // `all` false (the accept mutex was lost): reuseport sockets stay.
  Status disable_accept_events(bool all = true);
  // Graceful shutdown (nginx's ngx_close_listening_sockets): unregisters and
  // closes every listening socket of this loop and forgets them. The socket
  // itself lives on in the processes that still hold it.
  void close_listening();
  const std::vector<Listening*>& listening() const { return listening_; }

  // One pass of the loop (seed 001, 算法 1).
  void process_events_and_timers();
  // Runs passes until stop() is called (from a handler or a signal's flag check).
  void run();
  void stop() { stopping_ = true; }
  bool stopping() const { return stopping_; }
  // Graceful shutdown began (nginx's ngx_exiting): the worker drains what is
  // in flight. Protocols ask it so that nothing finished from now on promises
  // the client a connection that is about to close (HTTP's keep-alive).
  void set_exiting() { exiting_ = true; }
  bool exiting() const { return exiting_; }

  // Load balancing (seed 002, 9.8.3): n/8 - free, updated after each accept.
  std::int64_t accept_disabled = 0;
  // The accept mutex seam (issue: master/worker). Null: no accept mutex.
  // Set it before add_listening. Clearing it forgets that it was held.
  void set_accept_mutex(ProcessMutex* m) {
    accept_mutex_ = m;
    if (m == nullptr) accept_mutex_held_ = false;
  }
  ProcessMutex* accept_mutex() const { return accept_mutex_; }
  bool accept_mutex_held() const { return accept_mutex_held_; }
  // Flags shared listening sockets are registered with (kEvExclusive for
  // EPOLLEXCLUSIVE; reuseport sockets never need it).
  void set_accept_flags(unsigned flags) { accept_flags_ = flags; }
  unsigned accept_flags() const { return accept_flags_; }

  // The handler run in the loop after Backend::notify() woke it.
  Event& notify_event() { return notify_event_; }

  // The embedder's pointer for this loop (libuv's uv_loop_t.data). The loop
  // never reads it; whoever sets it owns what it points to.
  void* data() const { return data_; }
  void set_data(void* data) { data_ = data; }

  // Per-loop state of a module built on the loop (HTTP's worker, an upstream
  // keepalive cache, TLS), found by a key the module owns: the address of a
  // static object of its own. At most kMaxContexts keys per loop; set_context
  // fails with false when they are taken. A null value removes the key. The
  // loop does not own the values: the module frees them in its exit hook.
  static constexpr std::size_t kMaxContexts = 16;
  bool set_context(const void* key, void* value);
  void* context(const void* key) const {
    for (const auto& c : contexts_) {
      if (c.key == key) return c.value;
    }
    return nullptr;
  }
  // The module's state of type T under `key`, made (value-initialised) by
  // the first call; null when there is no memory or no free key (a result,
  // never an exception). drop_context<T> frees it and removes the key.
  template <class T>
  T* context_or_make(const void* key) {
    if (auto* v = static_cast<T*>(context(key)); v != nullptr) return v;
    T* v = new (std::nothrow) T();
    if (v != nullptr && !set_context(key, v)) {
      delete v;
      v = nullptr;
    }
    return v;
  }
  template <class T>
  void drop_context(const void* key) {
    T* v = static_cast<T*>(context(key));
    if (v == nullptr) return;
    set_context(key, nullptr);
    delete v;
  }

 private:
  EventLoop() = default;
  Status trylock_accept_mutex();

  EventLoopConfig cfg_;
  Log* log_ = nullptr;
  std::unique_ptr<Backend> backend_;
  unsigned caps_ = 0;
  ConnectionPool pool_;
  TimerTree timers_;
  PostedQueue posted_accept_;
  PostedQueue posted_;
  PostedQueue posted_next_;
  std::vector<Listening*> listening_;
  ProcessMutex* accept_mutex_ = nullptr;
  bool accept_mutex_held_ = false;
  bool accept_events_enabled_ = false;
  unsigned accept_flags_ = kEvLevel;
  bool stopping_ = false;
  bool exiting_ = false;
  LoopStats stats_;
  Event notify_event_;
  // timer_resolution's tick: a timerfd of this loop's own, watched like a
  // connection (a pseudo-connection outside the pool); its read handler
  // refreshes the cached time. Per loop, so loops in one process keep
  // their own clocks and one loop's end stops nobody else's.
  Connection tick_conn_;
  Event tick_rev_;
  Event tick_wev_;
  void* data_ = nullptr;
  struct ContextSlot {
    const void* key = nullptr;
    void* value = nullptr;
  };
  ContextSlot contexts_[kMaxContexts];

  Status start_tick(Msec resolution);
  void stop_tick();
  static void on_tick(Event& rev);
};

// The read handler of listening connections (seed 001, 4.1 ngx_event_accept).
void event_accept(Event& ev);

}  // namespace vigil
