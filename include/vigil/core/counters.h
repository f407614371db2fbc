#pragma once
// Counters shared by every worker (seed 004: each on its own 128-byte line so
// workers updating different counters do not false-share), in blocks: each
// layer owns a block of totals (the connection totals below are core's; TLS,
// HTTP and mail keep theirs in their own layers) and the event layer the
// per-worker slots (vigil/event/stats.h). Until a master places the blocks
// in its shared zone, each counts into a process-local instance, so a single
// process and the tests count the same way.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <type_traits>

#include "vigil/core/stats.h"

namespace vigil {

inline constexpr std::size_t kCacheLine = 128;
inline constexpr std::size_t kMaxWorkers = 64;

struct alignas(kCacheLine) SharedCounter {
  std::atomic<std::uint64_t> value{0};
  void add(std::int64_t n = 1) {
    value.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
  }
  std::uint64_t get() const { return value.load(std::memory_order_relaxed); }
};

// One total as /metrics shows it: the SharedCounter at `offset` in its block.
struct CounterFigure {
  const char* metric;
  const char* type;  // "counter" or "gauge"
  const char* help;
  std::size_t offset;
};

// A block of totals as the master and /metrics see it, whoever owns it: what
// it shows and where it counts. Core knows the blocks only through this; the
// server decides which exist and in what order /metrics shows them
// (set_counter_blocks).
class CounterBlock {
 public:
  // The block's figures, in /metrics order.
  virtual std::span<const CounterFigure> figures() const = 0;
  // Bytes it takes in a shared zone: a multiple of kCacheLine, aligned to it.
  virtual std::size_t size() const = 0;
  // Makes fresh counters at `shared` (size() bytes) the ones this process,
  // and the processes it forks, add to; nullptr: the process-local ones again.
  virtual void place(void* shared) = 0;
  // The value of one of figures() where the block counts now.
  virtual std::uint64_t value(const CounterFigure& figure) const = 0;

 protected:
  ~CounterBlock() = default;
};

// A layer's block: `Counters` is a struct of SharedCounter members and
// nothing else; `figures` describe them (offsetof). The layer keeps one,
// constinit, and adds through get(): a load and a relaxed atomic add, no lock
// and no allocation.
template <class Counters>
class CounterBlockOf final : public CounterBlock {
  static_assert(std::is_standard_layout_v<Counters> && alignof(Counters) == kCacheLine &&
                sizeof(Counters) % sizeof(SharedCounter) == 0);

 public:
  constexpr explicit CounterBlockOf(std::span<const CounterFigure> figures) : figures_(figures) {}
  CounterBlockOf(const CounterBlockOf&) = delete;
  CounterBlockOf& operator=(const CounterBlockOf&) = delete;

  Counters* get() const { return current_; }

  std::span<const CounterFigure> figures() const override { return figures_; }
  std::size_t size() const override { return sizeof(Counters); }
  void place(void* shared) override {
    current_ = shared != nullptr ? ::new (shared) Counters() : &local_;
  }
  std::uint64_t value(const CounterFigure& figure) const override {
    const auto* base = reinterpret_cast<const unsigned char*>(current_);
    return std::launder(reinterpret_cast<const SharedCounter*>(base + figure.offset))->get();
  }

 private:
  std::span<const CounterFigure> figures_;
  Counters local_{};
  Counters* current_ = &local_;
};

// Every block, in /metrics order; the master places each in its shared zone
// before it forks. Empty until the server sets them (server/modules.cc lists
// every layer's); `blocks` must outlive their use.
std::span<CounterBlock* const> counter_blocks();
void set_counter_blocks(std::span<CounterBlock* const> blocks);

// The connection totals (VIGIL_SHARED_TOTALS), as nginx's stub_status counts
// them: accepted (accept4() succeeded), handled (... and got a connection
// from the pool), active (accepted connections open now).
struct SharedCounters {
#define VIGIL_TOTAL_FIELD(member, ...) SharedCounter member;
  VIGIL_SHARED_TOTALS(VIGIL_TOTAL_FIELD)
#undef VIGIL_TOTAL_FIELD
};

// The connection totals this process adds to; never null.
SharedCounters* shared_counters();
// Their block, for the server's list.
CounterBlock& shared_counter_block();

}  // namespace vigil
