// stub_status (nginx's ngx_http_stub_status_module, same text to the byte)
// and metrics, in the Prometheus text exposition format (version 0.0.4):
// every layer's totals (each a CounterBlock, in the order the server lists
// them: this module knows none but its own), every worker's event-loop
// figures (vigil/event/stats.h), then the upstream servers'.
#include <unistd.h>

#include <cstdarg>
#include <cstdio>

#include "http/core/counters.h"
#include "http/core/filters.h"
#include "http/core/phases.h"
#include "http/core/request.h"
#include "http/core/servers.h"
#include "http/core/worker.h"
#include "upstream/upstream.h"
#include "vigil/core/counters.h"
#include "vigil/event/stats.h"

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
  HeadersOut& h = r.headers_out;
  h.status = 200;
  h.content_type = type;
  h.content_length = static_cast<std::int64_t>(size);
  r.header_only = r.line.method == Method::kHead;
  if (const int rc = send_header(r); rc != 0) return rc;
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

// The DERIVED figures of VIGIL_WORKER_STATS (vigil/event/stats.h), each
// named by its entry.
double events_per_wait(const WorkerSlot& w) {
  const double it = static_cast<double>(get(w.iterations));
  return it > 0 ? static_cast<double>(get(w.events)) / it : 0.0;
}
double enters_per_pass(const WorkerSlot& w) {
  const double it = static_cast<double>(get(w.iterations));
  return it > 0 ? static_cast<double>(get(w.enters)) / it : 0.0;
}

void metric(TextBuf& t, const char* name, const char* type, const char* help,
            unsigned long long value) {
  t.printf("# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name, value);
}

}  // namespace

namespace {

int stub_status_handler(Request& r) {
  if (const int rc = discard_request_body(r); rc != kPhaseNext) return rc;
  if (r.line.method != Method::kGet && r.line.method != Method::kHead) return 405;
  if (!take_buffer(r, 512)) return 500;
  const SharedCounters& s = *shared_counters();
  const HttpCounters& h = *http_counters();
  TextBuf t(r.obuf, r.obuf_size);
  // nginx's exact layout, trailing spaces included.
  t.printf(
      "Active connections: %llu \nserver accepts handled requests\n %llu %llu %llu \n"
      "Reading: %llu Writing: %llu Waiting: %llu \n",
      get(s.active), get(s.accepted), get(s.handled), get(h.requests), get(h.reading),
      get(h.writing), get(h.waiting));
  return send_generated(r, t.size(), "text/plain");
}

int metrics_handler(Request& r) {
  if (const int rc = discard_request_body(r); rc != kPhaseNext) return rc;
  if (r.line.method != Method::kGet && r.line.method != Method::kHead) return 405;
  HttpWorker& w = *r.hc->worker;
  w.publish_stats();  // this worker's figures are fresh; the others publish their own

  const WorkerSlot* slots = worker_slots();
  std::size_t workers = 0;
  for (std::size_t i = 0; i < kMaxWorkers; ++i) {
    if (slots[i].pid.load(std::memory_order_acquire) != 0) ++workers;
  }
  const ConfScope* root = w.servers().main_scope;
  const std::size_t upstreams = root != nullptr ? upstream::metrics_bytes_max(*root) : 0;
  if (!take_buffer(r, 8192 + 2048 * workers + upstreams)) return 500;
  TextBuf t(r.obuf, r.obuf_size);

  for (const CounterBlock* block : counter_blocks()) {
    for (const CounterFigure& f : block->figures()) {
      metric(t, f.metric, f.type, f.help, static_cast<unsigned long long>(block->value(f)));
    }
  }

  // Per worker: a HELP/TYPE header, then one sample per worker slot in use.
  struct PerWorker {
    const char* name;
    const char* type;
    const char* help;
    void (*print)(TextBuf& t, const WorkerSlot& slot);
  };
  static constexpr PerWorker kPer[] = {
#define VIGIL_METRIC_SLOT(member, name, type, help) \
  {name, type, help, [](TextBuf& tb, const WorkerSlot& ws) { tb.printf("%llu\n", get(ws.member)); }},
#define VIGIL_METRIC_DERIVED(fn, name, type, help) \
  {name, type, help, [](TextBuf& tb, const WorkerSlot& ws) { tb.printf("%.3f\n", fn(ws)); }},
      VIGIL_WORKER_STATS(VIGIL_METRIC_SLOT, VIGIL_METRIC_SLOT, VIGIL_METRIC_DERIVED)
#undef VIGIL_METRIC_SLOT
#undef VIGIL_METRIC_DERIVED
  };
  for (const PerWorker& m : kPer) {
    t.printf("# HELP %s %s\n# TYPE %s %s\n", m.name, m.help, m.name, m.type);
    for (std::size_t i = 0; i < kMaxWorkers; ++i) {
      const WorkerSlot& slot = slots[i];
      const pid_t pid = slot.pid.load(std::memory_order_acquire);
      if (pid == 0) continue;
      t.printf("%s{worker=\"%zu\",pid=\"%d\"} ", m.name, i, static_cast<int>(pid));
      m.print(t, slot);
    }
  }
  if (t.full()) return 500;
  std::size_t size = t.size();
  // Per upstream server: requests, failures, active, keepalive hits, up.
  if (root != nullptr) size += upstream::append_metrics(*root, r.obuf + size, r.obuf_size - size);
  return send_generated(r, size, "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace

const ContentHandler kStubStatusContent{"stub_status", stub_status_handler, false};
const ContentHandler kMetricsContent{"metrics", metrics_handler, false};

}  // namespace vigil::http
