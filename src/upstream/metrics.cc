// Per-server counters of every upstream group, in Prometheus' text format,
// for the http status module's /metrics (the http layer calls down here).
#include <cstdarg>
#include <cstdio>

#include "core/conf/loader.h"
#include "upstream/group.h"

namespace vigil::upstream {

namespace {

class Out {
 public:
  Out(char* buf, std::size_t cap) : buf_(buf), cap_(cap) {}
  __attribute__((format(printf, 2, 3))) void printf(const char* fmt, ...) {
    if (full_) return;
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(buf_ + len_, cap_ - len_, fmt, ap);
    va_end(ap);
    if (n < 0 || static_cast<std::size_t>(n) >= cap_ - len_) {
      full_ = true;  // keep whole lines only
      return;
    }
    len_ += static_cast<std::size_t>(n);
  }
  std::size_t size() const { return len_; }

 private:
  char* buf_;
  std::size_t cap_;
  std::size_t len_ = 0;
  bool full_ = false;
};

struct Family {
  const char* name;
  const char* type;
  const char* help;
};

constexpr Family kFamilies[] = {
    {"vigil_upstream_requests_total", "counter", "Attempts sent to the upstream server."},
    {"vigil_upstream_failures_total", "counter", "Attempts that failed (connect, timeout, error)."},
    {"vigil_upstream_connections_active", "gauge", "Connections to the server in use now."},
    {"vigil_upstream_keepalive_hits_total", "counter", "Attempts served by a cached keep-alive connection."},
    {"vigil_upstream_up", "gauge", "1 when the server is used, 0 when down or failed (max_fails)."},
};

constexpr std::size_t kLineMax = 96;  // a line without its labels

const char* protocol_name(Protocol p) { return p == Protocol::kHttp ? "http" : "stream"; }

template <class Fn>
void for_each_peer(const ConfScope& root, Fn fn) {
  for (const GroupSet* set : live_sets()) {
    if (set->root != &root) continue;
    for (const auto& g : set->groups) {
      for (const Peer& p : g->peers) fn(*set, *g, p);
    }
  }
}

}  // namespace

std::size_t metrics_bytes_max(const Configuration& conf) {
  return metrics_bytes_max(conf.main_scope());
}

std::size_t append_metrics(const Configuration& conf, char* buf, std::size_t cap) {
  return append_metrics(conf.main_scope(), buf, cap);
}

std::size_t metrics_bytes_max(const ConfScope& conf) {
  std::size_t n = 0;
  for (const Family& f : kFamilies) n += 32 + 2 * std::char_traits<char>::length(f.name) + std::char_traits<char>::length(f.help);
  for_each_peer(conf, [&](const GroupSet&, const Group& g, const Peer& p) {
    n += std::size(kFamilies) * (kLineMax + g.name.size() + p.name.size());
  });
  return n;
}

std::size_t append_metrics(const ConfScope& conf, char* buf, std::size_t cap) {
  Out out(buf, cap);
  const Msec now = clock::current_msec();
  bool any = false;
  for_each_peer(conf, [&](const GroupSet&, const Group&, const Peer&) { any = true; });
  if (!any) return 0;
  for (std::size_t f = 0; f < std::size(kFamilies); ++f) {
    const Family& fam = kFamilies[f];
    out.printf("# HELP %s %s\n# TYPE %s %s\n", fam.name, fam.help, fam.name, fam.type);
    for_each_peer(conf, [&](const GroupSet& set, const Group& g, const Peer& p) {
      const PeerStats& s = *p.stats;
      long long v = 0;
      switch (f) {
        case 0:
          v = static_cast<long long>(s.requests.load(std::memory_order_relaxed));
          break;
        case 1:
          v = static_cast<long long>(s.failures.load(std::memory_order_relaxed));
          break;
        case 2:
          v = static_cast<long long>(s.active.load(std::memory_order_relaxed));
          break;
        case 3:
          v = static_cast<long long>(s.cache_hits.load(std::memory_order_relaxed));
          break;
        default: {
          // Down when configured so, or when some worker marked it failed and
          // its fail_timeout has not passed (with a zone: the shared health).
          std::uint64_t until = s.down_until.load(std::memory_order_relaxed);
          bool failed = until != 0 && msec_diff(until, now) > 0;
          if (!g.zone.empty()) failed = !peer_available(p, now) && !p.down;
          v = (p.down || failed) ? 0 : 1;
        }
      }
      out.printf("%s{protocol=\"%s\",upstream=\"%s\",server=\"%s\"%s} %lld\n", fam.name,
                 protocol_name(set.protocol), g.name.c_str(), p.name.c_str(),
                 p.backup ? ",backup=\"1\"" : "", v);
    });
  }
  return out.size();
}

}  // namespace vigil::upstream
