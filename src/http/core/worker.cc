#include "http/core/worker.h"

#include <unistd.h>

#include <new>

#include "http/core/request.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"
#include "vigil/event/stats.h"

namespace vigil::http {
namespace {
// Its address is HTTP's key among the loop's contexts.
constexpr char kContextKey = 0;
}  // namespace

HttpWorker* worker_of(const EventLoop& loop) {
  return static_cast<HttpWorker*>(loop.context(&kContextKey));
}
bool attach_worker(EventLoop& loop, HttpWorker* w) {
  return loop.set_context(&kContextKey, w);
}

// ---- BufferCache -------------------------------------------------------------

BufferCache::~BufferCache() {
  for (auto& b : buckets_) {
    for (char* p : b.free) delete[] p;
  }
}

char* BufferCache::get(std::size_t size) {
  for (auto& b : buckets_) {
    if (b.size == size) {
      if (b.free.empty()) break;
      char* p = b.free.back();
      b.free.pop_back();
      return p;
    }
  }
  // Warm-up (or a new peak of concurrency): the buffer stays with the
  // worker once given back.
  return new (std::nothrow) char[size];
}

char* BufferCache::reserve(char*& mem, std::uint32_t& size, std::size_t need) {
  if (mem != nullptr && size >= need) return mem;
  if (mem != nullptr) put(mem, size);
  const std::size_t cap = (need + 4095) & ~std::size_t{4095};
  mem = get(cap);
  size = mem != nullptr ? static_cast<std::uint32_t>(cap) : 0;
  return mem;
}

void BufferCache::put(char* p, std::size_t size) {
  if (p == nullptr) return;
  for (auto& b : buckets_) {
    if (b.size == size) {
      b.free.push_back(p);
      return;
    }
  }
  buckets_.push_back({size, {}});
  buckets_.back().free.reserve(64);
  buckets_.back().free.push_back(p);
}

std::size_t BufferCache::cached() const {
  std::size_t n = 0;
  for (const auto& b : buckets_) n += b.free.size();
  return n;
}

// ---- HttpWorker ----------------------------------------------------------------

HttpWorker::HttpWorker(EventLoop& loop, const HttpServers& servers, int index)
    : loop_(loop), servers_(servers), index_(index) {
  // A normalised path is never longer than the raw one, which fits in a
  // large header buffer; a file name adds the root and an index name.
  scratch_size_ = 3 * servers.max_large_buffer + 8192;
  scratch_ = std::make_unique<char[]>(scratch_size_);
  flush_event_.data = this;
  flush_event_.handler = flush_timer_handler;
  flush_event_.log = &loop.log();
  flush_event_.cancelable = 1;  // buffered log lines never hold up a graceful exit
}

HttpWorker::~HttpWorker() {
  loop_.del_timer(flush_event_);
  for (Request* r : free_requests_) delete r;
}

Status HttpWorker::open_logs() {
  for (const AccessLogConf* conf : servers_.access_logs) {
    auto log = std::make_unique<AccessLog>(conf->path, conf->buffer, conf->flush, conf->gzip);
    if (Status s = log->open(); !s) return s;
    logs_.push_back(std::move(log));
  }
  return Status::ok();
}

Status HttpWorker::init_file_caches() {
  for (const OpenFileCacheConf* fc : servers_.file_caches) {
    auto cache = OpenFileCache::create(&loop_, fc->max, fc->inactive);
    if (!cache) return cache.status();
    file_caches_.push_back(std::move(cache.value()));
  }
  return Status::ok();
}

LogFileCache* HttpWorker::log_file_cache(const LogFileCacheConf& conf) {
  for (auto& [c, cache] : log_file_caches_) {
    if (c == &conf) return cache.get();
  }
  std::unique_ptr<LogFileCache> cache(
      new (std::nothrow) LogFileCache(conf.max, conf.inactive, conf.min_uses, conf.valid));
  if (cache == nullptr) return nullptr;
  try {
    log_file_caches_.emplace_back(&conf, std::move(cache));
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  return log_file_caches_.back().second.get();
}

void HttpWorker::reopen_logs() {
  for (auto& log : logs_) {
    if (Status s = log->reopen(loop_.log()); !s) {
      VIGIL_LOG(loop_.log(), kAlert, s.err(), "%s", s.message().c_str());
    }
  }
}

void HttpWorker::flush_logs() {
  for (auto& log : logs_) log->flush(loop_.log());
}

void HttpWorker::arm_flush(Msec after) {
  if (!flush_event_.timer_set) loop_.add_timer(flush_event_, after);
}

void HttpWorker::flush_timer_handler(Event& ev) {
  ev.timedout = 0;
  auto* w = ev.owner<HttpWorker>();
  w->flush_logs();
}

Request* HttpWorker::get_request() {
  if (!free_requests_.empty()) {
    Request* r = free_requests_.back();
    free_requests_.pop_back();
    return r;
  }
  return new (std::nothrow) Request();
}

void HttpWorker::put_request(Request* r) {
  free_requests_.push_back(r);
}

void HttpWorker::publish_stats() {
  if (index_ < 0 || static_cast<std::size_t>(index_) >= kMaxWorkers) return;
  WorkerSlot& slot = worker_slots()[index_];
  const pid_t pid = ::getpid();
  const pid_t owner = slot.pid.load(std::memory_order_acquire);
  if (owner != 0 && owner != pid) return;  // the process model publishes this slot
  loop_.publish(slot);
  slot.pid.store(pid, std::memory_order_release);
}

}  // namespace vigil::http
