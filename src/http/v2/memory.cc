// The memory of the worker's nghttp2 sessions (memory.h): small blocks from
// the worker's free lists, page blocks an idle session gives back.
#include "http/v2/memory.h"

#include <openssl/ssl.h>
#include <sanitizer/asan_interface.h>  // the poisoning macros: no-ops without ASan
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "event/tls/tls.h"
#include "http/core/counters.h"
#include "http/v2/session.h"
#include "http/v2/shutdown.h"
#include "vigil/event/loop.h"

namespace vigil::http::h2 {
namespace {

constexpr std::size_t kPage = 4096;
// Blocks up to kSmallMax bytes, in classes of kGranule, are kept on the
// worker's free lists, up to kCacheBytes in all (a thousand streams' worth).
constexpr std::size_t kGranule = 16;
constexpr std::size_t kSmallMax = 1024;
constexpr std::size_t kClasses = kSmallMax / kGranule;
constexpr std::size_t kCacheBytes = 1 << 20;

// Before every block that is not a page block: its class (0: malloc'd as
// it is, `size` bytes). 16 bytes keep the caller's block aligned as
// malloc's.
struct alignas(16) BlockHead {
  std::uint32_t cls;
  std::uint32_t size;
};
static_assert(sizeof(BlockHead) == 16);

struct FreeBlock {
  FreeBlock* next;
};

const char kWorkerKey = 0;  // the address is h2's key among the loop's contexts

}  // namespace

struct H2Worker {
  explicit H2Worker(EventLoop& l) : loop(l) {}
  ~H2Worker() {
    loop.del_timer(tick);
    for (FreeBlock*& head : free) {
      while (head != nullptr) {
        FreeBlock* b = head;
        ASAN_UNPOISON_MEMORY_REGION(b, sizeof *b);
        head = b->next;
        std::free(b);
      }
    }
  }
  H2Worker(const H2Worker&) = delete;
  H2Worker& operator=(const H2Worker&) = delete;

  EventLoop& loop;
  FreeBlock* free[kClasses + 1] = {};  // by class; free[0] unused
  std::size_t cached = 0;              // bytes on the free lists
  Session* idle = nullptr;             // idle sessions not released yet
  Event tick;                          // releases them
};

namespace {

void unlink_idle(H2Worker& w, Session& s) {
  if (!s.idle_linked) return;
  (s.idle_prev != nullptr ? s.idle_prev->idle_next : w.idle) = s.idle_next;
  if (s.idle_next != nullptr) s.idle_next->idle_prev = s.idle_prev;
  s.idle_prev = s.idle_next = nullptr;
  s.idle_linked = false;
}

bool all_zero(const void* p, std::size_t size) {
  const auto* w = static_cast<const std::uint64_t*>(p);
  for (std::size_t i = 0; i < size / sizeof *w; ++i) {
    if (w[i] != 0) return false;
  }
  return true;
}

// Gives back what the idle session s need not hold.
void release(Session& s) {
  for (Session::PageBlock& b : s.pages) {
    if (b.p == nullptr) continue;
    // Pages the kernel takes back read as zeros when next touched: the
    // frame buffer holds nothing once its frames are sent, an empty
    // stream map is all zeros already.
    if (b.frames || all_zero(b.p, b.size)) (void)::madvise(b.p, b.size, MADV_DONTNEED);
  }
  if (s.c->ssl != nullptr && s.c->ssl->ssl != nullptr) {
    (void)SSL_free_buffers(s.c->ssl->ssl);  // 0: a partial record is in them, kept
  }
  s.worked = false;
  http_counters()->h2_idle_releases.add();
}

void release_idle(Event& ev) {
  H2Worker& w = *static_cast<H2Worker*>(ev.data);
  while (w.idle != nullptr) {
    Session& s = *w.idle;
    unlink_idle(w, s);
    release(s);
  }
}

Session::PageBlock* page_block(Session& s, const void* p) {
  if ((reinterpret_cast<std::uintptr_t>(p) & (kPage - 1)) != 0) return nullptr;
  for (Session::PageBlock& b : s.pages) {
    if (b.p == p) return &b;
  }
  return nullptr;
}

void* block_alloc(std::size_t size, void* user) {
  Session& s = *static_cast<Session*>(user);
  H2Worker& w = *s.h2w;
  if (size == 0) size = 1;
  if (size <= kSmallMax) {
    const std::size_t cls = (size + kGranule - 1) / kGranule;
    void* mem = w.free[cls];
    if (mem != nullptr) {
      ASAN_UNPOISON_MEMORY_REGION(mem, cls * kGranule + sizeof(BlockHead));
      w.free[cls] = w.free[cls]->next;
      w.cached -= cls * kGranule + sizeof(BlockHead);
    } else {
      mem = std::malloc(cls * kGranule + sizeof(BlockHead));
      if (mem == nullptr) return nullptr;
    }
    auto* h = new (mem)
        BlockHead{static_cast<std::uint32_t>(cls), static_cast<std::uint32_t>(cls * kGranule)};
    return h + 1;
  }
  if (size >= kPage && size <= UINT32_MAX - kPage) {
    for (Session::PageBlock& b : s.pages) {
      if (b.p != nullptr) continue;
      const std::size_t whole = (size + kPage - 1) & ~(kPage - 1);
      b.p = std::aligned_alloc(kPage, whole);
      if (b.p == nullptr) return nullptr;
      b.size = static_cast<std::uint32_t>(whole);
      b.frames = false;
      return b.p;
    }
  }
  if (size > UINT32_MAX) return nullptr;
  void* mem = std::malloc(size + sizeof(BlockHead));
  if (mem == nullptr) return nullptr;
  return new (mem) BlockHead{0, static_cast<std::uint32_t>(size)} + 1;
}

void block_free(void* p, void* user) {
  if (p == nullptr) return;
  Session& s = *static_cast<Session*>(user);
  if (Session::PageBlock* b = page_block(s, p); b != nullptr) {
    std::free(b->p);
    *b = Session::PageBlock{};
    return;
  }
  H2Worker& w = *s.h2w;
  BlockHead* h = static_cast<BlockHead*>(p) - 1;
  // The free list's link takes the head's place: its class is read first.
  const std::uint32_t cls = h->cls;
  const std::size_t bytes = h->size + sizeof(BlockHead);
  if (cls == 0 || cls > kClasses || w.cached + bytes > kCacheBytes) {
    std::free(h);
    return;
  }
  FreeBlock* f = new (h) FreeBlock{w.free[cls]};
  w.free[cls] = f;
  w.cached += bytes;
  // Under AddressSanitizer a block on a free list is poisoned: a use after
  // nghttp2 freed it is reported as one, not as reused memory.
  ASAN_POISON_MEMORY_REGION(f, bytes);
}

void* block_calloc(std::size_t n, std::size_t size, void* user) {
  if (size != 0 && n > SIZE_MAX / size) return nullptr;
  void* p = block_alloc(n * size, user);
  if (p != nullptr) std::memset(p, 0, n * size);
  return p;
}

void* block_realloc(void* p, std::size_t size, void* user) {
  if (p == nullptr) return block_alloc(size, user);
  Session& s = *static_cast<Session*>(user);
  const Session::PageBlock* b = page_block(s, p);
  const std::size_t have = b != nullptr ? b->size : (static_cast<BlockHead*>(p) - 1)->size;
  if (size <= have && size != 0) return p;
  void* q = block_alloc(size, user);
  if (q == nullptr) return nullptr;  // p stays the caller's (realloc's contract)
  std::memcpy(q, p, have < size ? have : size);
  block_free(p, user);
  return q;
}

}  // namespace

H2Worker* h2_worker(EventLoop& loop) {
  if (auto* w = static_cast<H2Worker*>(loop.context(&kWorkerKey)); w != nullptr) return w;
  auto* w = new (std::nothrow) H2Worker(loop);
  if (w == nullptr) return nullptr;
  if (!loop.set_context(&kWorkerKey, w)) {
    delete w;
    return nullptr;
  }
  w->tick.data = w;
  w->tick.handler = release_idle;
  w->tick.log = &loop.log();
  w->tick.cancelable = 1;  // never holds up a graceful exit
  return w;
}

void exit_worker(EventLoop& loop) {
  auto* w = static_cast<H2Worker*>(loop.context(&kWorkerKey));
  if (w == nullptr) return;
  loop.set_context(&kWorkerKey, nullptr);
  delete w;
}

nghttp2_mem session_mem(Session& s) {
  return nghttp2_mem{&s, block_alloc, block_free, block_calloc, block_realloc};
}

void note_frame(Session& s, const void* data) {
  const auto at = reinterpret_cast<std::uintptr_t>(data);
  for (Session::PageBlock& b : s.pages) {
    const auto start = reinterpret_cast<std::uintptr_t>(b.p);
    if (b.p != nullptr && at >= start && at < start + b.size) {
      b.frames = true;
      return;
    }
  }
}

void session_idle(Session& s) {
  if (!s.worked || s.idle_linked) return;
  H2Worker& w = *s.h2w;
  s.idle_prev = nullptr;
  s.idle_next = w.idle;
  if (w.idle != nullptr) w.idle->idle_prev = &s;
  w.idle = &s;
  s.idle_linked = true;
  if (!w.tick.timer_set) w.loop.add_timer(w.tick, kReleaseAfter);
}

void session_busy(Session& s) {
  s.worked = true;
  unlink_idle(*s.h2w, s);
}

void session_ended(Session& s) {
  if (s.h2w != nullptr) unlink_idle(*s.h2w, s);
}

}  // namespace vigil::http::h2
