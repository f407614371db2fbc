#pragma once
// What one worker keeps for HTTP: free lists of header buffers and requests
// (so a warm worker allocates nothing per request), a scratch area for paths,
// the access log files and their flush timer. One per event loop; the hooks
// in protocol.cc create it in init_worker.

#include <cstddef>
#include <memory>
#include <vector>

#include "http/log/access_log.h"
#include "http/static/open_file_cache.h"
#include "http/proxy/proxy_sessions.h"
#include "http/core/servers.h"
#include "vigil/event/event.h"

namespace vigil {
class EventLoop;
}

namespace vigil::http {

struct Request;

// The gzip filter's per-worker state (gzip.cc: the whole-body compressors
// and their buffers, made on first use).
struct GzipWorker;
struct GzipWorkerFree {
  void operator()(GzipWorker* g) const;
};

// Buffers by size class (client_header_buffer_size, large_client_header_buffers,
// output buffers). Memory goes back to the list, never to malloc, while the
// worker runs.
class BufferCache {
 public:
  BufferCache() = default;
  ~BufferCache();
  BufferCache(const BufferCache&) = delete;
  BufferCache& operator=(const BufferCache&) = delete;

  char* get(std::size_t size);
  void put(char* p, std::size_t size);
  // A buffer a request keeps and reuses (`mem`, `size` bytes; null and 0 at
  // first): returned as it is when it holds `need` bytes, else given back
  // and replaced by one of `need` rounded up to 4 KiB (its bytes are not
  // kept). Null, with mem and size cleared, when none could be had.
  char* reserve(char*& mem, std::uint32_t& size, std::size_t need);
  std::size_t cached() const;  // buffers on the free lists (tests, metrics)

 private:
  struct Bucket {
    std::size_t size;
    std::vector<char*> free;
  };
  std::vector<Bucket> buckets_;
};

class HttpWorker {
 public:
  HttpWorker(EventLoop& loop, const HttpServers& servers, int index);
  ~HttpWorker();
  HttpWorker(const HttpWorker&) = delete;
  HttpWorker& operator=(const HttpWorker&) = delete;

  Status open_logs();
  // One open_file_cache table per directive in use (made at worker start).
  Status init_file_caches();
  OpenFileCache* file_cache(int index) {
    return index >= 0 && static_cast<std::size_t>(index) < file_caches_.size()
               ? file_caches_[index].get()
               : nullptr;
  }
  void reopen_logs();
  void flush_logs();
  // A log got its first buffered line: make sure the flush timer runs.
  void arm_flush(Msec after);

  Request* get_request();
  void put_request(Request* r);

  // Copies this worker's loop figures into its shared-counters slot (for
  // /metrics), unless another process owns the slot.
  void publish_stats();

  EventLoop& loop() { return loop_; }
  const HttpServers& servers() const { return servers_; }
  BufferCache& buffers() { return buffers_; }
  // open_log_file_cache's table for `conf` (made on first use; null when
  // out of memory).
  LogFileCache* log_file_cache(const LogFileCacheConf& conf);
  AccessLog* access_log(int index) {
    return index >= 0 && static_cast<std::size_t>(index) < logs_.size() ? logs_[index].get()
                                                                        : nullptr;
  }
  // Scratch memory for one synchronous step (normalising a path, building a
  // file name); never kept across an event.
  char* scratch() { return scratch_.get(); }
  std::size_t scratch_size() const { return scratch_size_; }
  int index() const { return index_; }
  // proxy_ssl_session_reuse: the last session per upstream TLS context and server.
  ProxySessions& proxy_sessions() { return proxy_sessions_; }
  std::unique_ptr<GzipWorker, GzipWorkerFree>& gzip() { return gzip_; }

 private:
  static void flush_timer_handler(Event& ev);

  EventLoop& loop_;
  const HttpServers& servers_;
  int index_;
  BufferCache buffers_;
  std::vector<Request*> free_requests_;
  std::unique_ptr<char[]> scratch_;
  std::size_t scratch_size_ = 0;
  std::vector<std::unique_ptr<AccessLog>> logs_;
  std::vector<std::pair<const LogFileCacheConf*, std::unique_ptr<LogFileCache>>> log_file_caches_;
  std::vector<std::unique_ptr<OpenFileCache>> file_caches_;
  Event flush_event_;
  ProxySessions proxy_sessions_;
  std::unique_ptr<GzipWorker, GzipWorkerFree> gzip_;
};

// The HTTP worker of `loop` (the loop's HTTP context, set by init_worker in
// protocol.cc); null when HTTP does not run on that loop.
HttpWorker* worker_of(const EventLoop& loop);
// Makes `w` the HTTP worker of `loop` (null: none). The loop does not own
// it. False when the loop has no free context slot.
bool attach_worker(EventLoop& loop, HttpWorker* w);

}  // namespace vigil::http
