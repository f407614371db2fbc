#pragma once
// Every figure the engine counts for /metrics and stub_status, defined once.
// The structures that hold them (LoopStats, WorkerSlot, SharedCounters), the
// worker's publisher and the /metrics text are all generated from these
// lists, so a new figure is one line here (plus the code that counts it).
//
// Each list takes macros that the user defines for the occasion (and
// VIGIL_STATS_SKIP for kinds it has no use for), one entry per figure, in
// /metrics order.

// The totals every worker adds to (nginx's stub_status figures and more):
//   TOTAL(member, metric, type, help)
#define VIGIL_SHARED_TOTALS(TOTAL)                                                          \
  TOTAL(active, "vigil_connections_active", "gauge", "Client connections open now.")        \
  TOTAL(accepted, "vigil_connections_accepted_total", "counter",                            \
        "Client connections accepted.")                                                     \
  TOTAL(handled, "vigil_connections_handled_total", "counter",                              \
        "Accepted connections that got a connection slot.")                                 \
  TOTAL(requests, "vigil_http_requests_total", "counter", "HTTP requests started.")         \
  TOTAL(reading, "vigil_connections_reading", "gauge", "Connections reading a request header.") \
  TOTAL(writing, "vigil_connections_writing", "gauge",                                      \
        "Connections with a request being answered.")                                       \
  TOTAL(waiting, "vigil_connections_waiting", "gauge", "Idle keep-alive connections.")       \
  TOTAL(tls_handshakes, "vigil_tls_handshakes_total", "counter", "TLS handshakes completed.") \
  TOTAL(tls_handshakes_failed, "vigil_tls_handshakes_failed_total", "counter",              \
        "TLS handshakes that failed (alert, garbage, timeout, reset).")                     \
  TOTAL(tls_sessions_reused, "vigil_tls_sessions_reused_total", "counter",                  \
        "TLS handshakes that resumed a session.")                                           \
  TOTAL(open_file_cache_hits, "vigil_http_open_file_cache_hits_total", "counter",           \
        "Static file lookups answered by open_file_cache.")                                 \
  TOTAL(open_file_cache_misses, "vigil_http_open_file_cache_misses_total", "counter",       \
        "Static file lookups under open_file_cache that opened the file.")                  \
  TOTAL(mail_sessions, "vigil_mail_sessions_total", "counter", "Mail proxy sessions started.") \
  TOTAL(mail_auth_ok, "vigil_mail_auth_ok_total", "counter",                                \
        "Mail logins the auth_http server accepted.")                                       \
  TOTAL(mail_auth_failed, "vigil_mail_auth_failed_total", "counter",                        \
        "Mail logins the auth_http server refused.")                                        \
  TOTAL(mail_relayed, "vigil_mail_relayed_total", "counter",                                \
        "Mail sessions logged in to their backend and relayed.")                            \
  TOTAL(mail_limited, "vigil_mail_limited_total", "counter",                                \
        "Mail connections refused by mail_limit_conn.")

// One worker's figures, shown per worker in /metrics:
//   LOOP(member, metric, type, help)   counted by its event loop (LoopStats::member)
//   POOL(member, metric, type, help)   read from the loop's ConnectionPool::member()
//   DERIVED(fn, metric, type, help)    computed by /metrics from the slot (fn)
#define VIGIL_WORKER_STATS(LOOP, POOL, DERIVED)                                              \
  LOOP(iterations, "vigil_worker_loop_iterations_total", "counter", "Event loop passes.")    \
  LOOP(events, "vigil_worker_events_total", "counter", "Events the backend reported.")       \
  DERIVED(events_per_wait, "vigil_worker_events_per_wait", "gauge",                          \
          "Events reported per loop pass, on average.")                                      \
  LOOP(empty_waits, "vigil_worker_empty_waits_total", "counter", "Waits that returned no event.") \
  LOOP(timers_expired, "vigil_worker_timers_expired_total", "counter", "Timers that expired.") \
  LOOP(posted_run, "vigil_worker_posted_events_total", "counter", "Posted events run.")      \
  LOOP(accepted, "vigil_worker_accepted_total", "counter", "Connections this worker accepted.") \
  LOOP(accept_mutex_acquired, "vigil_worker_accept_mutex_acquired_total", "counter",         \
       "Times the accept mutex was taken.")                                                   \
  POOL(connections_used, "vigil_worker_connections_used", "gauge", "Connection slots in use.") \
  POOL(connections_max, "vigil_worker_connections_max", "gauge", "worker_connections.")       \
  LOOP(sqes_submitted, "vigil_worker_uring_sqes_submitted_total", "counter",                 \
       "io_uring requests submitted (zero on other backends).")                               \
  LOOP(cqes_reaped, "vigil_worker_uring_cqes_reaped_total", "counter",                       \
       "io_uring completions reaped.")                                                        \
  LOOP(enters, "vigil_worker_uring_enters_total", "counter", "io_uring_enter calls.")       \
  DERIVED(enters_per_pass, "vigil_worker_uring_enters_per_pass", "gauge",                    \
          "io_uring_enter calls per loop pass, on average.")                                  \
  LOOP(ring_buffer_misses, "vigil_worker_uring_buffer_ring_misses_total", "counter",         \
       "Receives that found the provided buffer ring empty.")                              \
  LOOP(ring_file_sends, "vigil_worker_uring_file_sends_total", "counter",                   \
       "File ranges sent through the ring (READ+SEND or SPLICE pairs).")                     \
  LOOP(ring_file_fallbacks, "vigil_worker_uring_file_fallbacks_total", "counter",           \
       "File ranges a ring connection sent with sendfile() (no file send free).")

#define VIGIL_STATS_SKIP(...)
