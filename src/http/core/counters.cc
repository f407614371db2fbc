#include "http/core/counters.h"

namespace vigil::http {

namespace {

#define VIGIL_FIGURE(member, metric, type, help) \
  {metric, type, help, offsetof(HttpCounters, member)},
constexpr CounterFigure kHttpFigures[] = {VIGIL_HTTP_TOTALS(VIGIL_FIGURE)};
#undef VIGIL_FIGURE
#define VIGIL_FIGURE(member, metric, type, help) \
  {metric, type, help, offsetof(OpenFileCacheCounters, member)},
constexpr CounterFigure kOpenFileCacheFigures[] = {VIGIL_OPEN_FILE_CACHE_TOTALS(VIGIL_FIGURE)};
#undef VIGIL_FIGURE

constinit CounterBlockOf<HttpCounters> g_http{kHttpFigures};
constinit CounterBlockOf<OpenFileCacheCounters> g_open_file_cache{kOpenFileCacheFigures};

}  // namespace

HttpCounters* http_counters() {
  return g_http.get();
}
OpenFileCacheCounters* open_file_cache_counters() {
  return g_open_file_cache.get();
}
CounterBlock& http_counter_block() {
  return g_http;
}
CounterBlock& open_file_cache_counter_block() {
  return g_open_file_cache;
}

}  // namespace vigil::http
