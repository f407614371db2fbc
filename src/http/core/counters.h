#pragma once
// Internal: the HTTP totals every worker adds to, in two blocks of the HTTP
// layer's own (vigil/core/counters.h) because /metrics shows the TLS totals
// between them: the requests (the rest of nginx's stub_status figures) and
// the static module's open_file_cache. The server places them in the
// master's shared zone and lists them for /metrics.

#include "vigil/core/counters.h"

// As nginx's stub_status counts them: requests (started), reading (a request
// header), writing (a request being answered), waiting (idle keep-alive).
//   TOTAL(member, metric, type, help), as VIGIL_SHARED_TOTALS (vigil/core/stats.h)
#define VIGIL_HTTP_TOTALS(TOTAL)                                                                 \
  TOTAL(requests, "vigil_http_requests_total", "counter", "HTTP requests started.")              \
  TOTAL(reading, "vigil_connections_reading", "gauge", "Connections reading a request header.")  \
  TOTAL(writing, "vigil_connections_writing", "gauge",                                           \
        "Connections with a request being answered.")                                            \
  TOTAL(waiting, "vigil_connections_waiting", "gauge", "Idle keep-alive connections.")           \
  TOTAL(h2_connections, "vigil_http2_connections_total", "counter",                              \
        "Connections that spoke HTTP/2.")                                                        \
  TOTAL(h2_streams, "vigil_http2_streams_total", "counter", "HTTP/2 streams opened by clients.") \
  TOTAL(h2_resets_received, "vigil_http2_resets_received_total", "counter",                      \
        "HTTP/2 streams the client reset.")                                                      \
  TOTAL(h2_resets_sent, "vigil_http2_resets_sent_total", "counter",                              \
        "HTTP/2 streams the server reset.")                                                      \
  TOTAL(h2_goaways, "vigil_http2_goaways_sent_total", "counter",                                 \
        "HTTP/2 connections the server ended with GOAWAY.")                                      \
  TOTAL(h2_flow_stalls, "vigil_http2_flow_control_stalls_total", "counter",                      \
        "Times an HTTP/2 response waited for the client's window or the connection.")            \
  TOTAL(h2_idle_releases, "vigil_http2_idle_releases_total", "counter",                          \
        "Times an idle HTTP/2 connection gave its buffers back.")

#define VIGIL_OPEN_FILE_CACHE_TOTALS(TOTAL)                           \
  TOTAL(hits, "vigil_http_open_file_cache_hits_total", "counter",     \
        "Static file lookups answered by open_file_cache.")           \
  TOTAL(misses, "vigil_http_open_file_cache_misses_total", "counter", \
        "Static file lookups under open_file_cache that opened the file.")

namespace vigil::http {

struct HttpCounters {
#define VIGIL_HTTP_FIELD(member, ...) SharedCounter member;
  VIGIL_HTTP_TOTALS(VIGIL_HTTP_FIELD)
#undef VIGIL_HTTP_FIELD
};

struct OpenFileCacheCounters {
#define VIGIL_OPEN_FILE_CACHE_FIELD(member, ...) SharedCounter member;
  VIGIL_OPEN_FILE_CACHE_TOTALS(VIGIL_OPEN_FILE_CACHE_FIELD)
#undef VIGIL_OPEN_FILE_CACHE_FIELD
};

// The totals this process adds to; never null.
HttpCounters* http_counters();
OpenFileCacheCounters* open_file_cache_counters();
// Their blocks, for the server's list.
CounterBlock& http_counter_block();
CounterBlock& open_file_cache_counter_block();

}  // namespace vigil::http
