// The slab pool's layout and algorithms (see slab.h for the picture). Page
// lists link page indices, not pointers, so a descriptor is small; the header
// keeps plain pointers to the descriptor table and the first page, valid in
// every process because the zone is mapped at one address (core/shm_zone.h).

#include "core/slab.h"

#include <bit>
#include <cstring>
#include <limits>
#include <new>

namespace vigil {

namespace {

constexpr std::uint64_t kMagic = 0x5649474c534c4142ULL;  // "VIGLSLAB"
constexpr std::uint32_t kNil = std::numeric_limits<std::uint32_t>::max();
constexpr std::size_t kBitmapWords = SlabPool::kPageSize / SlabPool::kMinChunk / 64;

enum PageKind : std::uint16_t {
  kFreeHead = 1,  // first page of a free run: run = its length
  kFreeTail = 2,  // last page of a free run longer than 1: run = head index
  kFreeBody = 3,  // any other page of a free run
  kSmall = 4,     // chunks of class `cls`
  kBigHead = 5,   // first page of a multi-page allocation: run = its length
  kBigBody = 6,   // the others: run = head index
};

constexpr std::size_t class_size(int c) {
  return SlabPool::kMinChunk << c;
}
constexpr std::size_t chunks_per_page(int c) {
  return SlabPool::kPageSize / class_size(c);
}
static_assert(class_size(SlabPool::kClasses - 1) == SlabPool::kMaxChunk);

}  // namespace

struct SlabPage {
  std::uint32_t next;
  std::uint32_t prev;
  std::uint32_t run;
  std::uint16_t kind;
  std::uint16_t used;  // kSmall: chunks handed out
  std::uint8_t cls;
  std::uint64_t bitmap[kBitmapWords];  // kSmall: 1 = chunk in use
};

struct SlabClassCounters {
  std::size_t total;
  std::size_t used;
  std::uint64_t requests;
  std::uint64_t failures;
};

struct SlabHeader {
  std::uint64_t magic;
  ShmtxShared mutex;
  void* data;
  SlabPage* pages;
  std::uint8_t* start;
  std::uint32_t npages;
  std::uint32_t free_pages;
  std::uint32_t free_runs;                    // list of kFreeHead pages
  std::uint32_t partial[SlabPool::kClasses];  // kSmall pages with a free chunk
  SlabClassCounters classes[SlabPool::kClasses];
  std::uint64_t page_requests;
  std::uint64_t page_failures;
  std::uint64_t bad_frees;
};

namespace {

std::size_t align_up(std::size_t v, std::size_t a) {
  return (v + a - 1) / a * a;
}

void list_push(SlabPage* pages, std::uint32_t& head, std::uint32_t i) {
  pages[i].prev = kNil;
  pages[i].next = head;
  if (head != kNil) pages[head].prev = i;
  head = i;
}

void list_unlink(SlabPage* pages, std::uint32_t& head, std::uint32_t i) {
  SlabPage& p = pages[i];
  if (p.prev != kNil) {
    pages[p.prev].next = p.next;
  } else {
    head = p.next;
  }
  if (p.next != kNil) pages[p.next].prev = p.prev;
  p.next = p.prev = kNil;
}

// Makes [head, head + n) one free run: its head and tail say so (the pages
// between are already kFreeBody).
void set_run(SlabPage* pages, std::uint32_t head, std::uint32_t n) {
  pages[head].kind = kFreeHead;
  pages[head].run = n;
  if (n > 1) {
    pages[head + n - 1].kind = kFreeTail;
    pages[head + n - 1].run = head;
  }
}

// First fit; a longer run gives up its last n pages so its head stays put in
// the list. kNil when no run is long enough.
std::uint32_t take_pages(SlabHeader* h, std::uint32_t n) {
  SlabPage* pages = h->pages;
  for (std::uint32_t i = h->free_runs; i != kNil; i = pages[i].next) {
    const std::uint32_t run = pages[i].run;
    if (run < n) continue;
    std::uint32_t first = i;
    if (run == n) {
      list_unlink(pages, h->free_runs, i);
    } else {
      set_run(pages, i, run - n);
      first = i + run - n;
    }
    h->free_pages -= n;
    return first;
  }
  return kNil;
}

// Gives [first, first + n) back, joined with the free runs on either side.
// Costs O(n): every freed page is marked free, so a stale kind can never make
// a later free() of a pointer into it look valid.
void give_pages(SlabHeader* h, std::uint32_t first, std::uint32_t n) {
  SlabPage* pages = h->pages;
  h->free_pages += n;
  for (std::uint32_t k = first; k < first + n; ++k) pages[k].kind = kFreeBody;
  const std::uint32_t after = first + n;
  if (after < h->npages && pages[after].kind == kFreeHead) {
    const std::uint32_t more = pages[after].run;
    list_unlink(pages, h->free_runs, after);
    pages[after].kind = kFreeBody;
    pages[after + more - 1].kind = kFreeBody;
    n += more;
  }
  if (first > 0) {
    const std::uint32_t before = first - 1;
    std::uint32_t head = kNil;
    if (pages[before].kind == kFreeTail) head = pages[before].run;
    if (pages[before].kind == kFreeHead) head = before;
    if (head != kNil) {
      // That run is listed already: it just grows.
      pages[before].kind = kFreeBody;
      set_run(pages, head, n + (first - head));
      return;
    }
  }
  set_run(pages, first, n);
  list_push(pages, h->free_runs, first);
}

int class_of(std::size_t size) {
  if (size <= SlabPool::kMinChunk) return 0;
  return static_cast<int>(std::bit_width(size - 1)) - 3;
}

}  // namespace

Status SlabPool::create(void* addr, std::size_t size) {
  if (addr == nullptr || reinterpret_cast<std::uintptr_t>(addr) % kPageSize != 0) {
    return Status::error("slab: zone address is not page aligned");
  }
  const std::size_t hdr = align_up(sizeof(SlabHeader), alignof(SlabPage));
  std::size_t n = size > hdr ? (size - hdr) / (kPageSize + sizeof(SlabPage)) : 0;
  while (n > 0 && align_up(hdr + n * sizeof(SlabPage), kPageSize) + n * kPageSize > size) --n;
  if (n == 0 || n >= kNil)
    return Status::error("slab: zone of " + std::to_string(size) + " bytes has no room for pages");

  std::memset(addr, 0, hdr + n * sizeof(SlabPage));
  auto* h = static_cast<SlabHeader*>(addr);
  h->pages = reinterpret_cast<SlabPage*>(static_cast<std::uint8_t*>(addr) + hdr);
  h->start = static_cast<std::uint8_t*>(addr) + align_up(hdr + n * sizeof(SlabPage), kPageSize);
  h->npages = static_cast<std::uint32_t>(n);
  h->free_pages = 0;
  h->free_runs = kNil;
  for (auto& p : h->partial) p = kNil;
  for (std::uint32_t i = 0; i < n; ++i) h->pages[i].next = h->pages[i].prev = kNil;
  give_pages(h, 0, h->npages);

  new (&h->mutex) ShmtxShared();
  if (Status s = mutex_.create(&h->mutex); !s) return s;
  h->magic = kMagic;
  h_ = h;
  return Status::ok();
}

Status SlabPool::attach(void* addr) {
  auto* h = static_cast<SlabHeader*>(addr);
  if (h == nullptr || h->magic != kMagic) return Status::error("slab: no pool at this address");
  if (Status s = mutex_.attach(&h->mutex); !s) return s;
  h_ = h;
  return Status::ok();
}

std::size_t SlabPool::chunk_size(std::size_t size) {
  if (size == 0) return 0;
  if (size > kMaxChunk) return align_up(size, kPageSize);
  return class_size(class_of(size));
}

void* SlabPool::alloc(std::size_t size) {
  SlabLock l(*this);
  return alloc_locked(size);
}

void* SlabPool::calloc(std::size_t size) {
  SlabLock l(*this);
  return calloc_locked(size);
}

bool SlabPool::free(void* p) {
  SlabLock l(*this);
  return free_locked(p);
}

void* SlabPool::calloc_locked(std::size_t size) {
  void* p = alloc_locked(size);
  if (p != nullptr) std::memset(p, 0, size);
  return p;
}

void* SlabPool::alloc_locked(std::size_t size) {
  SlabHeader* h = h_;
  if (size == 0) return nullptr;
  SlabPage* pages = h->pages;

  if (size > kMaxChunk) {
    ++h->page_requests;
    const std::size_t need = size / kPageSize + (size % kPageSize != 0 ? 1 : 0);
    const std::uint32_t first =
        need <= h->free_pages ? take_pages(h, static_cast<std::uint32_t>(need)) : kNil;
    if (first == kNil) {
      ++h->page_failures;
      return nullptr;
    }
    pages[first].kind = kBigHead;
    pages[first].run = static_cast<std::uint32_t>(need);
    for (std::uint32_t k = 1; k < need; ++k) {
      pages[first + k].kind = kBigBody;
      pages[first + k].run = first;
    }
    return h->start + std::size_t{first} * kPageSize;
  }

  const int c = class_of(size);
  SlabClassCounters& cc = h->classes[c];
  ++cc.requests;
  const std::size_t per_page = chunks_per_page(c);
  std::uint32_t i = h->partial[c];
  if (i == kNil) {
    i = take_pages(h, 1);
    if (i == kNil) {
      ++cc.failures;
      return nullptr;
    }
    SlabPage& pg = pages[i];
    pg.kind = kSmall;
    pg.cls = static_cast<std::uint8_t>(c);
    pg.used = 0;
    // Bits past the page's chunks stay set, so the search below needs no bound.
    for (std::size_t w = 0; w < kBitmapWords; ++w) {
      const std::size_t lo = w * 64;
      if (lo + 64 <= per_page) {
        pg.bitmap[w] = 0;
      } else if (lo >= per_page) {
        pg.bitmap[w] = ~std::uint64_t{0};
      } else {
        pg.bitmap[w] = ~std::uint64_t{0} << (per_page - lo);
      }
    }
    list_push(pages, h->partial[c], i);
    cc.total += per_page;
  }
  SlabPage& pg = pages[i];
  for (std::size_t w = 0; w < kBitmapWords; ++w) {
    if (pg.bitmap[w] == ~std::uint64_t{0}) continue;
    const int bit = std::countr_one(pg.bitmap[w]);
    pg.bitmap[w] |= std::uint64_t{1} << bit;
    if (++pg.used == per_page) list_unlink(pages, h->partial[c], i);
    ++cc.used;
    return h->start + std::size_t{i} * kPageSize +
           (w * 64 + static_cast<std::size_t>(bit)) * class_size(c);
  }
  return nullptr;  // not reached: a listed page has a free chunk
}

bool SlabPool::free_locked(void* p) {
  if (p == nullptr) return true;
  SlabHeader* h = h_;
  if (!owns(p)) {
    ++h->bad_frees;
    return false;
  }
  SlabPage* pages = h->pages;
  const std::size_t off = static_cast<std::size_t>(static_cast<std::uint8_t*>(p) - h->start);
  const auto i = static_cast<std::uint32_t>(off / kPageSize);
  const std::size_t in_page = off % kPageSize;
  SlabPage& pg = pages[i];

  if (pg.kind == kBigHead && in_page == 0) {
    give_pages(h, i, pg.run);
    return true;
  }
  if (pg.kind == kSmall) {
    const int c = pg.cls;
    const std::size_t sz = class_size(c);
    const std::size_t idx = in_page / sz;
    const std::uint64_t bit = std::uint64_t{1} << (idx % 64);
    if (in_page % sz == 0 && (pg.bitmap[idx / 64] & bit) != 0) {
      pg.bitmap[idx / 64] &= ~bit;
      const std::size_t per_page = chunks_per_page(c);
      if (pg.used-- == per_page) list_push(pages, h->partial[c], i);
      --h->classes[c].used;
      if (pg.used == 0) {
        list_unlink(pages, h->partial[c], i);
        h->classes[c].total -= per_page;
        give_pages(h, i, 1);
      }
      return true;
    }
  }
  ++h->bad_frees;
  return false;
}

bool SlabPool::owns(const void* p) const {
  if (h_ == nullptr) return false;
  const auto* b = static_cast<const std::uint8_t*>(p);
  return b >= h_->start && b < h_->start + std::size_t{h_->npages} * kPageSize;
}

void* SlabPool::data() const {
  return h_->data;
}

void SlabPool::set_data(void* data) {
  h_->data = data;
}

SlabStats SlabPool::stats() {
  SlabLock l(*this);
  return stats_locked();
}

SlabStats SlabPool::stats_locked() const {
  SlabStats s;
  s.pages_total = h_->npages;
  s.pages_free = h_->free_pages;
  for (int c = 0; c < kClasses; ++c) {
    s.classes[c].size = class_size(c);
    s.classes[c].total = h_->classes[c].total;
    s.classes[c].used = h_->classes[c].used;
    s.classes[c].requests = h_->classes[c].requests;
    s.classes[c].failures = h_->classes[c].failures;
  }
  s.page_requests = h_->page_requests;
  s.page_failures = h_->page_failures;
  s.bad_frees = h_->bad_frees;
  return s;
}

std::string SlabPool::verify_locked() const {
  const SlabHeader* h = h_;
  if (h == nullptr || h->magic != kMagic) return "no pool";
  const SlabPage* pages = h->pages;
  const std::uint32_t n = h->npages;
  std::size_t free_pages = 0, free_runs = 0, partial[kClasses] = {}, used[kClasses] = {},
              total[kClasses] = {};
  auto at = [](std::uint32_t i, const char* what) {
    return "page " + std::to_string(i) + ": " + what;
  };
  for (std::uint32_t i = 0; i < n;) {
    const SlabPage& pg = pages[i];
    switch (pg.kind) {
      case kFreeHead: {
        const std::uint32_t r = pg.run;
        if (r == 0 || r > n - i) return at(i, "free run out of range");
        for (std::uint32_t k = 1; k + 1 < r; ++k) {
          if (pages[i + k].kind != kFreeBody) return at(i + k, "not marked free inside a run");
        }
        if (r > 1 && (pages[i + r - 1].kind != kFreeTail || pages[i + r - 1].run != i)) {
          return at(i + r - 1, "bad free run tail");
        }
        if (i + r < n && pages[i + r].kind == kFreeHead) return at(i, "free runs not joined");
        free_pages += r;
        ++free_runs;
        i += r;
        break;
      }
      case kSmall: {
        const int c = pg.cls;
        if (c >= kClasses) return at(i, "bad class");
        const std::size_t per = chunks_per_page(c);
        std::size_t bits = 0;
        for (std::uint64_t w : pg.bitmap) bits += static_cast<std::size_t>(std::popcount(w));
        bits -= kBitmapWords * 64 - per;  // the always-set bits past the chunks
        if (bits != pg.used) return at(i, "bitmap and used count disagree");
        if (pg.used == 0) return at(i, "empty slab page not freed");
        if (pg.used < per) ++partial[c];
        used[c] += pg.used;
        total[c] += per;
        ++i;
        break;
      }
      case kBigHead: {
        const std::uint32_t r = pg.run;
        if (r == 0 || r > n - i) return at(i, "page run out of range");
        for (std::uint32_t k = 1; k < r; ++k) {
          if (pages[i + k].kind != kBigBody || pages[i + k].run != i) {
            return at(i + k, "bad page of a multi-page allocation");
          }
        }
        i += r;
        break;
      }
      default:
        return at(i, "unexpected page kind");
    }
  }
  if (free_pages != h->free_pages) return "free page count is off";
  std::size_t listed = 0;
  std::uint32_t prev = kNil;
  for (std::uint32_t i = h->free_runs; i != kNil; i = pages[i].next) {
    if (i >= n || pages[i].kind != kFreeHead || pages[i].prev != prev || ++listed > free_runs) {
      return "free run list is broken";
    }
    prev = i;
  }
  if (listed != free_runs) return "free run list misses runs";
  for (int c = 0; c < kClasses; ++c) {
    listed = 0;
    prev = kNil;
    for (std::uint32_t i = h->partial[c]; i != kNil; i = pages[i].next) {
      if (i >= n || pages[i].kind != kSmall || pages[i].cls != c || pages[i].prev != prev ||
          pages[i].used >= chunks_per_page(c) || ++listed > partial[c]) {
        return "class " + std::to_string(c) + " list is broken";
      }
      prev = i;
    }
    if (listed != partial[c]) return "class " + std::to_string(c) + " list misses pages";
    if (used[c] != h->classes[c].used || total[c] != h->classes[c].total) {
      return "class " + std::to_string(c) + " counters are off";
    }
  }
  return {};
}

}  // namespace vigil
