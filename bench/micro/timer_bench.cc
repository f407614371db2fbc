// Timer micro-benchmarks: Vigil's TimerTree against libevent's min-heap and
// libuv's timer heap, in one binary, doing the same work:
//
//   BM_Add/<impl>/N        arm a timer, random deadline, into a set already holding N
//   BM_AddLatest/<impl>/N  the same, but the deadline is now + 60 s while the clock
//                          moves on: each one is the latest so far (a server's
//                          usual "now + configured timeout")
//   BM_Cancel/<impl>/N     disarm one of N armed timers, chosen at random
//   BM_Expire/<impl>/N     fire due timers while N others stay armed (per timer fired)
//
// Every case runs batches of K operations (K = min(1024, N/10)); only the
// batch is timed (manual time) and the set is put back to N between batches,
// so N stays within 10% of its nominal value. ns/op is the median over the
// batches (the machine is shared; a batch that lost the CPU is an outlier,
// not a cost). Deadlines are random in a 60 s
// window after "now", from the same seeded generator for every implementation,
// and the events touched are picked at random from the whole pool so the
// caches see what a server with N connections would.
//
// Expire: the peers read the real clock in their loop, so the K timers to fire
// are armed with delay 0 and the N others sit an hour away; all three fire the
// K earliest of N + K. The peers' loop call (one epoll_wait(0) per batch for
// both, amortised over K) is part of their cost, as it is in a server.
//
// After the usual output a table prints ns/op per implementation and the
// ratio peer / vigil (> 1: vigil is faster).

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "vigil/event/timer.h"

#ifdef VIGIL_HAVE_LIBEVENT
#include <event2/event.h>
#include <event2/event_struct.h>
#endif
#ifdef VIGIL_HAVE_LIBUV
#include <uv.h>
#endif

namespace {

using vigil::Msec;

constexpr Msec kWindow = 60'000;  // deadlines: random in [now, now + 60 s)
constexpr Msec kFar = 3'600'000;  // expire case: the N standing timers, an hour out
constexpr std::uint64_t kSeed = 0x7153'2026;

std::uint64_t g_fired = 0;  // every implementation's handler bumps it

std::size_t batch_size(std::size_t n) {
  return std::min<std::size_t>(1024, n / 10);
}

// ---- the three implementations behind one shape -----------------------------------

class VigilTimers {
 public:
  static constexpr const char* kName = "vigil";

  explicit VigilTimers(std::size_t n) : evs_(n) {
    for (auto& ev : evs_) ev.handler = on_fire;
  }
  ~VigilTimers() {
    for (auto& ev : evs_) tree_.del(ev);
  }
  void arm(std::uint32_t i, Msec delay) { tree_.add(evs_[i], delay, now_); }
  void tick() { ++now_; }
  void disarm(std::uint32_t i) { tree_.del(evs_[i]); }
  std::size_t fire_due() { return tree_.expire(now_); }

 private:
  static void on_fire(vigil::Event&) { ++g_fired; }

  // A fixed "now" far from zero, so the keys are ordinary 64-bit numbers.
  Msec now_ = Msec{1} << 40;
  std::vector<vigil::Event> evs_;
  vigil::TimerTree tree_;
};

#ifdef VIGIL_HAVE_LIBEVENT
class LibeventTimers {
 public:
  static constexpr const char* kName = "libevent";

  explicit LibeventTimers(std::size_t n) : base_(event_base_new()), evs_(n) {
    for (auto& ev : evs_) evtimer_assign(&ev, base_, on_fire, nullptr);
  }
  ~LibeventTimers() { event_base_free(base_); }
  void arm(std::uint32_t i, Msec delay) {
    timeval tv{static_cast<time_t>(delay / 1000), static_cast<suseconds_t>(delay % 1000 * 1000)};
    evtimer_add(&evs_[i], &tv);
  }
  void disarm(std::uint32_t i) { evtimer_del(&evs_[i]); }
  void tick() {}  // libevent reads the real clock on every add
  std::size_t fire_due() {
    const std::uint64_t before = g_fired;
    event_base_loop(base_, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    return g_fired - before;
  }

 private:
  static void on_fire(evutil_socket_t, short, void*) { ++g_fired; }

  event_base* base_;
  std::vector<event> evs_;
};
#endif

#ifdef VIGIL_HAVE_LIBUV
class LibuvTimers {
 public:
  static constexpr const char* kName = "libuv";

  explicit LibuvTimers(std::size_t n) : timers_(n) {
    uv_loop_init(&loop_);
    for (auto& t : timers_) uv_timer_init(&loop_, &t);
  }
  ~LibuvTimers() {
    for (auto& t : timers_) uv_close(reinterpret_cast<uv_handle_t*>(&t), nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
  }
  void arm(std::uint32_t i, Msec delay) { uv_timer_start(&timers_[i], on_fire, delay, 0); }
  void disarm(std::uint32_t i) { uv_timer_stop(&timers_[i]); }
  void tick() { uv_update_time(&loop_); }
  std::size_t fire_due() {
    const std::uint64_t before = g_fired;
    uv_run(&loop_, UV_RUN_NOWAIT);
    return g_fired - before;
  }

 private:
  static void on_fire(uv_timer_t*) { ++g_fired; }

  uv_loop_t loop_;
  std::vector<uv_timer_t> timers_;
};
#endif

// ---- the work, identical for all three ------------------------------------------------

class Workload {
 public:
  explicit Workload(std::size_t pool) : ids_(pool), rng_(kSeed) {
    std::iota(ids_.begin(), ids_.end(), 0u);
    std::shuffle(ids_.begin(), ids_.end(), rng_);
  }
  std::vector<std::uint32_t>& ids() { return ids_; }
  Msec delay() { return rng_() % kWindow; }
  // Moves a uniformly random k-subset of ids[0, n) into ids[n - k, n).
  void pick_tail(std::size_t n, std::size_t k) {
    // Partial Fisher-Yates: each step draws from the span not yet taken.
    for (std::size_t span = n; span > n - k && span > 0; --span) {
      std::swap(ids_[rng_() % span], ids_[span - 1]);
    }
  }

 private:
  std::vector<std::uint32_t> ids_;
  std::mt19937_64 rng_;
};

using Clock = std::chrono::steady_clock;

// Times batches of K operations; reports the median batch as ns/op.
class BatchTimer {
 public:
  BatchTimer(benchmark::State& state, std::size_t k) : state_(state), k_(k) {
    ns_.reserve(1 << 16);
  }
  void start() { t0_ = Clock::now(); }
  void stop() {
    const std::chrono::duration<double, std::nano> dt = Clock::now() - t0_;
    ns_.push_back(dt.count());
    state_.SetIterationTime(dt.count() * 1e-9);
  }
  ~BatchTimer() {
    if (ns_.empty()) return;
    auto mid = ns_.begin() + static_cast<std::ptrdiff_t>(ns_.size() / 2);
    std::nth_element(ns_.begin(), mid, ns_.end());
    state_.counters["ns/op"] = *mid / static_cast<double>(k_);
    state_.counters["K"] = static_cast<double>(k_);
    state_.SetItemsProcessed(static_cast<std::int64_t>(state_.iterations()) *
                             static_cast<std::int64_t>(k_));
  }

 private:
  benchmark::State& state_;
  std::size_t k_;
  std::vector<double> ns_;
  Clock::time_point t0_;
};

// Add and AddLatest: K timers armed into N, then K random ones disarmed.
template <class Impl, bool kLatest>
void add_case(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::size_t k = batch_size(n);
  Impl impl(n + k);
  Workload w(n + k);
  auto& ids = w.ids();
  for (std::size_t i = 0; i < n; ++i) impl.arm(ids[i], w.delay());
  std::vector<Msec> delays(k);

  BatchTimer timer(state, k);
  for (auto _ : state) {
    for (auto& d : delays) d = kLatest ? kWindow : w.delay();
    timer.start();
    for (std::size_t j = 0; j < k; ++j) impl.arm(ids[n + j], delays[j]);
    timer.stop();
    // Back to N: disarm K timers chosen at random among the N + K armed.
    w.pick_tail(n + k, k);
    for (std::size_t j = 0; j < k; ++j) impl.disarm(ids[n + j]);
    if (kLatest) impl.tick();
  }
}

template <class Impl>
void bm_add(benchmark::State& state) {
  add_case<Impl, false>(state);
}

template <class Impl>
void bm_add_latest(benchmark::State& state) {
  add_case<Impl, true>(state);
}

template <class Impl>
void bm_cancel(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::size_t k = batch_size(n);
  Impl impl(n);
  Workload w(n);
  auto& ids = w.ids();
  for (std::size_t i = 0; i < n; ++i) impl.arm(ids[i], w.delay());

  BatchTimer timer(state, k);
  for (auto _ : state) {
    w.pick_tail(n, k);
    timer.start();
    for (std::size_t j = n - k; j < n; ++j) impl.disarm(ids[j]);
    timer.stop();
    for (std::size_t j = n - k; j < n; ++j) impl.arm(ids[j], w.delay());
  }
}

template <class Impl>
void bm_expire(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::size_t k = batch_size(n);
  Impl impl(n + k);
  Workload w(n + k);
  auto& ids = w.ids();
  // ids[0, n): standing timers an hour out; ids[n, n + k): the next to fire.
  for (std::size_t i = 0; i < n; ++i) impl.arm(ids[i], kFar + w.delay());

  BatchTimer timer(state, k);
  for (auto _ : state) {
    for (std::size_t j = n; j < n + k; ++j) impl.arm(ids[j], 0);
    timer.start();
    const std::size_t fired = impl.fire_due();
    timer.stop();
    if (fired != k) {
      state.SkipWithError("a batch did not fire exactly K timers");
      break;
    }
    // Rotate: K random standing timers become the next batch to fire, the
    // ones that just fired become standing timers.
    w.pick_tail(n, k);
    std::swap_ranges(ids.begin() + static_cast<std::ptrdiff_t>(n - k),
                     ids.begin() + static_cast<std::ptrdiff_t>(n),
                     ids.begin() + static_cast<std::ptrdiff_t>(n));
    for (std::size_t j = n; j < n + k; ++j) impl.disarm(ids[j]);
    for (std::size_t j = n - k; j < n; ++j) impl.arm(ids[j], kFar + w.delay());
  }
}

// ---- registration and the ratio table ------------------------------------------------

const std::int64_t kSizes[] = {1'000, 100'000, 1'000'000};

template <class Impl>
void register_impl(const char* op, void (*fn)(benchmark::State&), std::int64_t n) {
  benchmark::RegisterBenchmark((std::string("BM_") + op + "/" + Impl::kName).c_str(), fn)
      ->Arg(n)
      ->UseManualTime();
}

void register_all() {
  struct Op {
    const char* name;
    void (*vigil)(benchmark::State&);
#ifdef VIGIL_HAVE_LIBEVENT
    void (*libevent)(benchmark::State&);
#endif
#ifdef VIGIL_HAVE_LIBUV
    void (*libuv)(benchmark::State&);
#endif
  };
  const Op ops[] = {
      {"Add", bm_add<VigilTimers>,
#ifdef VIGIL_HAVE_LIBEVENT
       bm_add<LibeventTimers>,
#endif
#ifdef VIGIL_HAVE_LIBUV
       bm_add<LibuvTimers>
#endif
      },
      {"AddLatest", bm_add_latest<VigilTimers>,
#ifdef VIGIL_HAVE_LIBEVENT
       bm_add_latest<LibeventTimers>,
#endif
#ifdef VIGIL_HAVE_LIBUV
       bm_add_latest<LibuvTimers>
#endif
      },
      {"Cancel", bm_cancel<VigilTimers>,
#ifdef VIGIL_HAVE_LIBEVENT
       bm_cancel<LibeventTimers>,
#endif
#ifdef VIGIL_HAVE_LIBUV
       bm_cancel<LibuvTimers>
#endif
      },
      {"Expire", bm_expire<VigilTimers>,
#ifdef VIGIL_HAVE_LIBEVENT
       bm_expire<LibeventTimers>,
#endif
#ifdef VIGIL_HAVE_LIBUV
       bm_expire<LibuvTimers>
#endif
      },
  };
  for (const Op& op : ops) {
    for (const std::int64_t n : kSizes) {
      register_impl<VigilTimers>(op.name, op.vigil, n);
#ifdef VIGIL_HAVE_LIBEVENT
      register_impl<LibeventTimers>(op.name, op.libevent, n);
#endif
#ifdef VIGIL_HAVE_LIBUV
      register_impl<LibuvTimers>(op.name, op.libuv, n);
#endif
    }
  }
}

// The console output plus, at the end, one row per (operation, N).
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred || r.run_type != Run::RT_Iteration) continue;
      const auto it = r.counters.find("ns/op");
      if (it == r.counters.end()) continue;
      // "BM_Add/vigil/1000/manual_time" -> row "BM_Add/1000", column "vigil".
      const std::string name = r.benchmark_name();
      const auto s1 = name.find('/');
      const auto s2 = name.find('/', s1 + 1);
      const auto s3 = name.find('/', s2 + 1);
      const std::string row = name.substr(0, s1) + "/" + name.substr(s2 + 1, s3 - s2 - 1);
      const std::string impl = name.substr(s1 + 1, s2 - s1 - 1);
      auto& cell = table_[row];
      if (cell.empty()) order_.push_back(row);
      cell[impl] = it->second.value;
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\n%-20s %10s %10s %10s %14s %14s\n", "case (N)", "vigil", "libevent", "libuv",
                "libevent/vigil", "libuv/vigil");
    for (const std::string& row : order_) {
      auto& c = table_[row];
      auto cell = [&](const char* impl) { return c.count(impl) ? c[impl] : 0.0; };
      auto ratio = [&](const char* impl) {
        return c.count(impl) && cell("vigil") > 0 ? cell(impl) / cell("vigil") : 0.0;
      };
      std::printf("%-20s %8.1fns %8.1fns %8.1fns %13.2fx %13.2fx\n", row.c_str(), cell("vigil"),
                  cell("libevent"), cell("libuv"), ratio("libevent"), ratio("libuv"));
    }
  }

 private:
  std::map<std::string, std::map<std::string, double>> table_;
  std::vector<std::string> order_;
};

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
