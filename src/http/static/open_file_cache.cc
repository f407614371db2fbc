#include "http/static/open_file_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <new>

#include "core/fault.h"
#include "http/core/counters.h"
#include "http/static/disable_symlinks.h"
#include "vigil/event/loop.h"

namespace vigil::http {
namespace {

constexpr int kOpenFlags = O_RDONLY | O_NONBLOCK | O_CLOEXEC;
// How far from the LRU end a full table looks for an entry no response uses.
constexpr int kEvictTries = 16;
// Entries are made this many at a time; buckets are at most kMaxBuckets
// (8 MiB of pointers), so a huge max only lengthens the chains.
constexpr std::uint32_t kChunk = 256;
constexpr std::size_t kMaxBuckets = std::size_t{1} << 20;

}  // namespace

void open_and_stat(const char* name, const HttpLocConf* loc, const Request* r, OpenFileInfo& info,
                   int& fd) {
  info = OpenFileInfo{};
  fd = VIGIL_FAULT(
      fault::kOpen, EMFILE,
      loc != nullptr ? open_file_checked(r, *loc, name, kOpenFlags) : ::open(name, kOpenFlags));
  if (fd == -1) {
    info.err = errno;
    info.failed = "open";
    return;
  }
  struct stat st;
  if (::fstat(fd, &st) == -1) {
    info.err = errno;
    info.failed = "fstat";
    ::close(fd);
    fd = -1;
    return;
  }
  info.size = st.st_size;
  info.mtime = st.st_mtime;
  info.ino = st.st_ino;
  info.dev = st.st_dev;
  info.is_dir = S_ISDIR(st.st_mode);
  info.is_file = S_ISREG(st.st_mode);
  info.is_exec = (st.st_mode & S_IXUSR) != 0;
  if (info.is_dir) {
    // Only its kind matters (index, redirect): no descriptor is kept.
    ::close(fd);
    fd = -1;
  }
}

Result<std::unique_ptr<OpenFileCache>> OpenFileCache::create(EventLoop* loop, std::uint32_t max,
                                                             Msec inactive) {
  if (max == 0) return Status::error("open_file_cache max must be at least 1");
  std::unique_ptr<OpenFileCache> cache(new (std::nothrow) OpenFileCache(loop, max, inactive));
  if (!cache) return Status::error("no memory for the open file cache");
  std::size_t nb = 16;
  while (nb < max && nb < kMaxBuckets) nb <<= 1;
  // At worker start: a failure here is the worker's start-up error.
  try {
    cache->buckets_.assign(nb, nullptr);
    cache->chunks_.reserve((max + kChunk - 1) / kChunk);
  } catch (const std::bad_alloc&) {
    return Status::error("no memory for the open file cache");
  }
  cache->mask_ = nb - 1;
  return cache;
}

bool OpenFileCache::grow() {
  if (allocated_ >= max_) return false;
  const std::uint32_t n = std::min<std::uint32_t>(kChunk, max_ - allocated_);
  std::unique_ptr<CachedFile[]> chunk(new (std::nothrow) CachedFile[n]);
  if (!chunk) return false;
  for (std::uint32_t i = n; i-- > 0;) {
    CachedFile& e = chunk[i];
    e.cache = this;
    e.next = free_;
    free_ = &e;
  }
  chunks_.push_back(std::move(chunk));  // never reallocates: reserved in create()
  allocated_ += n;
  return true;
}

OpenFileCache::OpenFileCache(EventLoop* loop, std::uint32_t max, Msec inactive)
    : loop_(loop), max_(max), inactive_(inactive) {
  lru_.next = lru_.prev = &lru_;
  timer_.data = this;
  timer_.handler = timer_handler;
  timer_.cancelable = 1;  // never holds up a graceful exit
  if (loop != nullptr) timer_.log = &loop->log();
}

OpenFileCache::~OpenFileCache() {
  if (loop_ != nullptr && timer_.timer_set) loop_->del_timer(timer_);
  std::uint32_t left = allocated_;
  for (auto& chunk : chunks_) {
    const std::uint32_t n = std::min<std::uint32_t>(kChunk, left);
    for (std::uint32_t i = 0; i < n; ++i) {
      if (chunk[i].fd != -1) ::close(chunk[i].fd);
    }
    left -= n;
  }
}

CachedFile* OpenFileCache::find(std::string_view name, std::size_t hash) const {
  for (CachedFile* e = buckets_[hash & mask_]; e != nullptr; e = e->hnext) {
    if (e->hash == hash && e->name == name) return e;
  }
  return nullptr;
}

void OpenFileCache::touch(CachedFile& e, Msec now) {
  e.accessed = now;
  if (lru_.next == &e) return;
  e.prev->next = e.next;
  e.next->prev = e.prev;
  e.next = lru_.next;
  e.prev = &lru_;
  lru_.next->prev = &e;
  lru_.next = &e;
}

void OpenFileCache::insert(CachedFile& e, std::string_view name, std::size_t hash, Msec now) {
  e.name.assign(name);  // allocates only while names outgrow the entry's capacity
  e.hash = hash;
  CachedFile*& bucket = buckets_[hash & mask_];
  e.hnext = bucket;
  bucket = &e;
  e.next = lru_.next;
  e.prev = &lru_;
  lru_.next->prev = &e;
  lru_.next = &e;
  e.accessed = now;
  e.uses = 0;
  e.refs = 0;
  e.fd = -1;
  e.state = CachedFile::State::kLive;
  ++live_;
  arm_timer(now);
}

void OpenFileCache::unlink(CachedFile& e) {
  for (CachedFile** p = &buckets_[e.hash & mask_]; *p != nullptr; p = &(*p)->hnext) {
    if (*p == &e) {
      *p = e.hnext;
      break;
    }
  }
  e.hnext = nullptr;
  e.prev->next = e.next;
  e.next->prev = e.prev;
  e.prev = e.next = nullptr;
}

void OpenFileCache::free_slot(CachedFile& e) {
  if (e.fd != -1) ::close(e.fd);
  e.fd = -1;
  e.state = CachedFile::State::kFree;
  e.next = free_;
  free_ = &e;
}

void OpenFileCache::evict(CachedFile& e) {
  unlink(e);
  --live_;
  if (e.refs > 0) {
    // A response still sends from it: it closes when the last one ends.
    e.state = CachedFile::State::kDetached;
    ++detached_;
  } else {
    free_slot(e);
  }
}

CachedFile* OpenFileCache::take_slot() {
  if (free_ == nullptr && !grow()) {
    // Full: the least recently used entry that no response holds.
    CachedFile* e = lru_.prev;
    for (int i = 0; i < kEvictTries && e != &lru_; ++i, e = e->prev) {
      if (e->refs == 0) {
        evict(*e);
        break;
      }
    }
  }
  CachedFile* e = free_;
  if (e != nullptr) free_ = e->next;
  return e;
}

void OpenFileCache::hand_out(CachedFile& e, OpenFileInfo& info, FileRef& ref) {
  info = e.info;
  ref.fd = e.fd;
  ref.entry = nullptr;
  if (e.fd != -1) {
    ref.entry = &e;
    ++e.refs;
  }
}

void OpenFileCache::open(std::string_view name, const OpenFileParams& p, Msec now,
                         OpenFileInfo& info, FileRef& ref) {
  ref = FileRef{};
  const std::size_t hash = std::hash<std::string_view>{}(name);
  const DisableSymlinksConf* rule = p.loc != nullptr ? &disable_symlinks_conf(*p.loc) : nullptr;
  const DisableSymlinks rules = rule != nullptr ? rule->mode : DisableSymlinks::kOff;
  const std::string_view from = rule != nullptr ? std::string_view(rule->from) : std::string_view();
  OpenFileCacheCounters& counters = *open_file_cache_counters();

  CachedFile* e = find(name, hash);
  if (e != nullptr) {
    ++e->uses;
    touch(*e, now);
    const bool same_rules = e->symlinks == rules && e->symlinks_from == from;
    const bool current =
        same_rules && msec_diff(now, e->validated) < static_cast<MsecDiff>(p.valid);
    const bool usable = e->fd != -1 || e->info.is_dir || (e->info.err != 0 && p.errors);
    if (current && usable) {
      ++hits_;
      counters.hits.add();
      hand_out(*e, info, ref);
      return;
    }
  }
  ++misses_;
  counters.misses.add();
  int fd = -1;
  open_and_stat(name.data(), p.loc, p.r, info, fd);

  if (e != nullptr) {
    if (info.err == 0 && e->info.err == 0 && e->fd != -1 && info.ino == e->info.ino &&
        info.dev == e->info.dev) {
      // Checked again and still the same file: the entry keeps its
      // descriptor and takes the new size and mtime (changed in place).
      ::close(fd);
      e->info = info;
      e->validated = now;
      e->symlinks = rules;
      e->symlinks_from.assign(from);
      hand_out(*e, info, ref);
      return;
    }
    // Another file, a directory, or an error now: the entry is stale.
    if (e->refs > 0 || (info.err != 0 && !p.errors)) {
      evict(*e);
      e = nullptr;
    } else if (e->fd != -1) {
      ::close(e->fd);  // reused in place
      e->fd = -1;
    }
  }
  if (info.err != 0 && !p.errors) return;  // errors are not kept
  if (e == nullptr) {
    e = take_slot();
    if (e == nullptr) {
      ref.fd = fd;  // every entry is in use: served uncached
      return;
    }
    insert(*e, name, hash, now);
    e->uses = 1;
  }
  e->info = info;
  e->validated = now;
  e->symlinks = rules;
  e->symlinks_from.assign(from);
  if (fd != -1 && e->uses >= p.min_uses) {
    e->fd = fd;
    hand_out(*e, info, ref);
  } else {
    ref.fd = fd;  // not used min_uses times yet: the response owns it
  }
}

void OpenFileCache::release(CachedFile& e, Msec now) {
  OpenFileCache& cache = *e.cache;
  if (e.refs > 0) --e.refs;
  if (e.state == CachedFile::State::kDetached) {
    if (e.refs == 0) {
      --cache.detached_;
      cache.free_slot(e);
    }
    return;
  }
  // As nginx: a file counts as used until its response ends.
  cache.touch(e, now);
}

void OpenFileCache::expire(Msec now) {
  while (lru_.prev != &lru_ &&
         msec_diff(now, lru_.prev->accessed) >= static_cast<MsecDiff>(inactive_)) {
    evict(*lru_.prev);
  }
  arm_timer(now);
}

void OpenFileCache::arm_timer(Msec now) {
  if (loop_ == nullptr || timer_.timer_set || lru_.prev == &lru_) return;
  const MsecDiff age = msec_diff(now, lru_.prev->accessed);
  const MsecDiff left = static_cast<MsecDiff>(inactive_) - age;
  loop_->add_timer(timer_, left > 0 ? static_cast<Msec>(left) : 1);
}

void OpenFileCache::timer_handler(Event& ev) {
  ev.timedout = 0;
  ev.owner<OpenFileCache>()->expire(clock::current_msec());
}

}  // namespace vigil::http
