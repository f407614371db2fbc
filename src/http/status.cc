// stub_status (nginx's ngx_http_stub_status_module, same text to the byte)
// and metrics: the same totals plus every worker's event-loop figures, in the
// Prometheus text exposition format (version 0.0.4).
#include <unistd.h>

#include <cstdarg>
#include <cstdio>

#include "http/request.h"
#include "http/worker.h"
#include "vigil/core/counters.h"

namespace vigil::http {
namespace {

class TextBuf {
 public:
  TextBuf(char* p, std::size_t cap) : start_(p), p_(p), end_(p + cap) {}
  void printf(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    if (p_ >= end_) return;
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(p_, static_cast<std::size_t>(end_ - p_), fmt, ap);
    va_end(ap);
    if (n > 0) p_ += n < end_ - p_ ? n : end_ - p_;
  }
  std::size_t size() const { return static_cast<std::size_t>(p_ - start_); }
  bool full() const { return p_ >= end_; }

 private:
  char* start_;
  char* p_;
  char* end_;
};

unsigned long long get(const SharedCounter& c) {
  return static_cast<unsigned long long>(c.get());
}
unsigned long long get(const std::atomic<std::uint64_t>& v) {
  return static_cast<unsigned long long>(v.load(std::memory_order_relaxed));
}

// Sends the `size` bytes at r.obuf as a 200 with `type`.
int send_generated(Request& r, std::size_t size, std::string_view type) {
  ResponseHeaders h;
  h.status = 200;
  h.content_type = type;
  h.content_length = static_cast<std::int64_t>(size);
  r.header_only = r.line.method == Method::kHead;
  if (!write_header(r, h)) return 500;
  r.bbuf = Buf{};
  if (!r.header_only) {
    r.bbuf.reset(r.obuf, r.obuf_size);
    r.bbuf.last = r.obuf + size;
  }
  send_response(r);
  return 0;
}

bool take_buffer(Request& r, std::size_t size) {
  r.obuf = r.hc->worker->buffers().get(size);
  r.obuf_size = static_cast<std::uint32_t>(size);
  return r.obuf != nullptr;
}

void metric(TextBuf& t, const char* name, const char* type, const char* help,
            unsigned long long value) {
  t.printf("# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name, value);
}

}  // namespace

int stub_status_handler(Request& r) {
  if (r.line.method != Method::kGet && r.line.method != Method::kHead) return 405;
  if (!take_buffer(r, 512)) return 500;
  const SharedCounters& s = *shared_counters();
  TextBuf t(r.obuf, r.obuf_size);
  // nginx's exact layout, trailing spaces included.
  t.printf(
      "Active connections: %llu \nserver accepts handled requests\n %llu %llu %llu \n"
      "Reading: %llu Writing: %llu Waiting: %llu \n",
      get(s.active), get(s.accepted), get(s.handled), get(s.requests), get(s.reading),
      get(s.writing), get(s.waiting));
  return send_generated(r, t.size(), "text/plain");
}

int metrics_handler(Request& r) {
  if (r.line.method != Method::kGet && r.line.method != Method::kHead) return 405;
  HttpWorker& w = *r.hc->worker;
  w.publish_stats();  // this worker's figures are fresh; the others publish their own

  const SharedCounters& s = *shared_counters();
  std::size_t workers = 0;
  for (const auto& slot : s.workers) {
    if (slot.pid.load(std::memory_order_acquire) != 0) ++workers;
  }
  if (!take_buffer(r, 8192 + 2048 * workers)) return 500;
  TextBuf t(r.obuf, r.obuf_size);

  metric(t, "vigil_connections_active", "gauge", "Client connections open now.", get(s.active));
  metric(t, "vigil_connections_accepted_total", "counter", "Client connections accepted.",
         get(s.accepted));
  metric(t, "vigil_connections_handled_total", "counter",
         "Accepted connections that got a connection slot.", get(s.handled));
  metric(t, "vigil_http_requests_total", "counter", "HTTP requests started.", get(s.requests));
  metric(t, "vigil_connections_reading", "gauge", "Connections reading a request header.",
         get(s.reading));
  metric(t, "vigil_connections_writing", "gauge", "Connections with a request being answered.",
         get(s.writing));
  metric(t, "vigil_connections_waiting", "gauge", "Idle keep-alive connections.", get(s.waiting));

  struct PerWorker {
    const char* name;
    const char* type;
    const char* help;
  };
  static constexpr PerWorker kPer[] = {
      {"vigil_worker_loop_iterations_total", "counter", "Event loop passes."},
      {"vigil_worker_events_total", "counter", "Events the backend reported."},
      {"vigil_worker_events_per_wait", "gauge", "Events reported per loop pass, on average."},
      {"vigil_worker_empty_waits_total", "counter", "Waits that returned no event."},
      {"vigil_worker_timers_expired_total", "counter", "Timers that expired."},
      {"vigil_worker_posted_events_total", "counter", "Posted events run."},
      {"vigil_worker_accepted_total", "counter", "Connections this worker accepted."},
      {"vigil_worker_accept_mutex_acquired_total", "counter", "Times the accept mutex was taken."},
      {"vigil_worker_connections_used", "gauge", "Connection slots in use."},
      {"vigil_worker_connections_max", "gauge", "worker_connections."},
      {"vigil_worker_uring_sqes_submitted_total", "counter", "io_uring requests submitted."},
      {"vigil_worker_uring_cqes_reaped_total", "counter", "io_uring completions reaped."},
      {"vigil_worker_uring_enters_per_pass", "gauge",
       "io_uring_enter calls per loop pass, on average."},
      {"vigil_worker_uring_buffer_ring_misses_total", "counter",
       "Receives that found the provided buffer ring empty."},
  };
  for (std::size_t m = 0; m < std::size(kPer); ++m) {
    t.printf("# HELP %s %s\n# TYPE %s %s\n", kPer[m].name, kPer[m].help, kPer[m].name,
             kPer[m].type);
    for (std::size_t i = 0; i < kMaxWorkers; ++i) {
      const WorkerSlot& slot = s.workers[i];
      const pid_t pid = slot.pid.load(std::memory_order_acquire);
      if (pid == 0) continue;
      t.printf("%s{worker=\"%zu\",pid=\"%d\"} ", kPer[m].name, i, static_cast<int>(pid));
      switch (m) {
        case 0:
          t.printf("%llu\n", get(slot.iterations));
          break;
        case 1:
          t.printf("%llu\n", get(slot.events));
          break;
        case 2: {
          const double it = static_cast<double>(get(slot.iterations));
          t.printf("%.3f\n", it > 0 ? static_cast<double>(get(slot.events)) / it : 0.0);
          break;
        }
        case 3:
          t.printf("%llu\n", get(slot.empty_waits));
          break;
        case 4:
          t.printf("%llu\n", get(slot.timers_expired));
          break;
        case 5:
          t.printf("%llu\n", get(slot.posted_run));
          break;
        case 6:
          t.printf("%llu\n", get(slot.accepted));
          break;
        case 7:
          t.printf("%llu\n", get(slot.accept_mutex_acquired));
          break;
        case 8:
          t.printf("%llu\n", get(slot.connections_used));
          break;
        case 9:
          t.printf("%llu\n", get(slot.connections_max));
          break;
        case 10:
          t.printf("%llu\n", get(slot.sqes_submitted));
          break;
        case 11:
          t.printf("%llu\n", get(slot.cqes_reaped));
          break;
        case 12: {
          const double it = static_cast<double>(get(slot.iterations));
          t.printf("%.3f\n", it > 0 ? static_cast<double>(get(slot.enters)) / it : 0.0);
          break;
        }
        default:
          t.printf("%llu\n", get(slot.ring_buffer_misses));
          break;
      }
    }
  }
  if (t.full()) return 500;
  return send_generated(r, t.size(), "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace vigil::http
