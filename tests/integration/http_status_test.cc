// stub_status and /metrics as requests are served, and the access log
// (format, buffering with its 1 s flush and the flush at exit, USR1 reopen).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "http_harness.h"

namespace vigil {
namespace {

using test::Client;
using test::Response;
using test::VigilServer;

// What /metrics shows (MetricsLayoutIsStable): each layer's figures, in
// the order the layers list them (HTTP/2's after the HTTP ones).
constexpr std::string_view kMetricsLayout =
    R"layout(# HELP vigil_connections_active Client connections open now.
# TYPE vigil_connections_active gauge
vigil_connections_active N
# HELP vigil_connections_accepted_total Client connections accepted.
# TYPE vigil_connections_accepted_total counter
vigil_connections_accepted_total N
# HELP vigil_connections_handled_total Accepted connections that got a connection slot.
# TYPE vigil_connections_handled_total counter
vigil_connections_handled_total N
# HELP vigil_http_requests_total HTTP requests started.
# TYPE vigil_http_requests_total counter
vigil_http_requests_total N
# HELP vigil_connections_reading Connections reading a request header.
# TYPE vigil_connections_reading gauge
vigil_connections_reading N
# HELP vigil_connections_writing Connections with a request being answered.
# TYPE vigil_connections_writing gauge
vigil_connections_writing N
# HELP vigil_connections_waiting Idle keep-alive connections.
# TYPE vigil_connections_waiting gauge
vigil_connections_waiting N
# HELP vigil_http2_connections_total Connections that spoke HTTP/2.
# TYPE vigil_http2_connections_total counter
vigil_http2_connections_total N
# HELP vigil_http2_streams_total HTTP/2 streams opened by clients.
# TYPE vigil_http2_streams_total counter
vigil_http2_streams_total N
# HELP vigil_http2_resets_received_total HTTP/2 streams the client reset.
# TYPE vigil_http2_resets_received_total counter
vigil_http2_resets_received_total N
# HELP vigil_http2_resets_sent_total HTTP/2 streams the server reset.
# TYPE vigil_http2_resets_sent_total counter
vigil_http2_resets_sent_total N
# HELP vigil_http2_goaways_sent_total HTTP/2 connections the server ended with GOAWAY.
# TYPE vigil_http2_goaways_sent_total counter
vigil_http2_goaways_sent_total N
# HELP vigil_http2_flow_control_stalls_total Times an HTTP/2 response waited for the client's window or the connection.
# TYPE vigil_http2_flow_control_stalls_total counter
vigil_http2_flow_control_stalls_total N
# HELP vigil_http2_idle_releases_total Times an idle HTTP/2 connection gave its buffers back.
# TYPE vigil_http2_idle_releases_total counter
vigil_http2_idle_releases_total N
# HELP vigil_tls_handshakes_total TLS handshakes completed.
# TYPE vigil_tls_handshakes_total counter
vigil_tls_handshakes_total N
# HELP vigil_tls_handshakes_failed_total TLS handshakes that failed (alert, garbage, timeout, reset).
# TYPE vigil_tls_handshakes_failed_total counter
vigil_tls_handshakes_failed_total N
# HELP vigil_tls_sessions_reused_total TLS handshakes that resumed a session.
# TYPE vigil_tls_sessions_reused_total counter
vigil_tls_sessions_reused_total N
# HELP vigil_http_open_file_cache_hits_total Static file lookups answered by open_file_cache.
# TYPE vigil_http_open_file_cache_hits_total counter
vigil_http_open_file_cache_hits_total N
# HELP vigil_http_open_file_cache_misses_total Static file lookups under open_file_cache that opened the file.
# TYPE vigil_http_open_file_cache_misses_total counter
vigil_http_open_file_cache_misses_total N
# HELP vigil_mail_sessions_total Mail proxy sessions started.
# TYPE vigil_mail_sessions_total counter
vigil_mail_sessions_total N
# HELP vigil_mail_auth_ok_total Mail logins the auth_http server accepted.
# TYPE vigil_mail_auth_ok_total counter
vigil_mail_auth_ok_total N
# HELP vigil_mail_auth_failed_total Mail logins the auth_http server refused.
# TYPE vigil_mail_auth_failed_total counter
vigil_mail_auth_failed_total N
# HELP vigil_mail_relayed_total Mail sessions logged in to their backend and relayed.
# TYPE vigil_mail_relayed_total counter
vigil_mail_relayed_total N
# HELP vigil_mail_limited_total Mail connections refused by mail_limit_conn.
# TYPE vigil_mail_limited_total counter
vigil_mail_limited_total N
# HELP vigil_worker_loop_iterations_total Event loop passes.
# TYPE vigil_worker_loop_iterations_total counter
vigil_worker_loop_iterations_total{worker="0",pid="P"} N
# HELP vigil_worker_events_total Events the backend reported.
# TYPE vigil_worker_events_total counter
vigil_worker_events_total{worker="0",pid="P"} N
# HELP vigil_worker_events_per_wait Events reported per loop pass, on average.
# TYPE vigil_worker_events_per_wait gauge
vigil_worker_events_per_wait{worker="0",pid="P"} N
# HELP vigil_worker_empty_waits_total Waits that returned no event.
# TYPE vigil_worker_empty_waits_total counter
vigil_worker_empty_waits_total{worker="0",pid="P"} N
# HELP vigil_worker_timers_expired_total Timers that expired.
# TYPE vigil_worker_timers_expired_total counter
vigil_worker_timers_expired_total{worker="0",pid="P"} N
# HELP vigil_worker_posted_events_total Posted events run.
# TYPE vigil_worker_posted_events_total counter
vigil_worker_posted_events_total{worker="0",pid="P"} N
# HELP vigil_worker_accepted_total Connections this worker accepted.
# TYPE vigil_worker_accepted_total counter
vigil_worker_accepted_total{worker="0",pid="P"} N
# HELP vigil_worker_accept_mutex_acquired_total Times the accept mutex was taken.
# TYPE vigil_worker_accept_mutex_acquired_total counter
vigil_worker_accept_mutex_acquired_total{worker="0",pid="P"} N
# HELP vigil_worker_connections_used Connection slots in use.
# TYPE vigil_worker_connections_used gauge
vigil_worker_connections_used{worker="0",pid="P"} N
# HELP vigil_worker_connections_max worker_connections.
# TYPE vigil_worker_connections_max gauge
vigil_worker_connections_max{worker="0",pid="P"} N
# HELP vigil_worker_uring_sqes_submitted_total io_uring requests submitted (zero on other backends).
# TYPE vigil_worker_uring_sqes_submitted_total counter
vigil_worker_uring_sqes_submitted_total{worker="0",pid="P"} N
# HELP vigil_worker_uring_cqes_reaped_total io_uring completions reaped.
# TYPE vigil_worker_uring_cqes_reaped_total counter
vigil_worker_uring_cqes_reaped_total{worker="0",pid="P"} N
# HELP vigil_worker_uring_enters_total io_uring_enter calls.
# TYPE vigil_worker_uring_enters_total counter
vigil_worker_uring_enters_total{worker="0",pid="P"} N
# HELP vigil_worker_uring_enters_per_pass io_uring_enter calls per loop pass, on average.
# TYPE vigil_worker_uring_enters_per_pass gauge
vigil_worker_uring_enters_per_pass{worker="0",pid="P"} N
# HELP vigil_worker_uring_buffer_ring_misses_total Receives that found the provided buffer ring empty.
# TYPE vigil_worker_uring_buffer_ring_misses_total counter
vigil_worker_uring_buffer_ring_misses_total{worker="0",pid="P"} N
# HELP vigil_worker_uring_file_sends_total File ranges sent through the ring (READ+SEND or SPLICE pairs).
# TYPE vigil_worker_uring_file_sends_total counter
vigil_worker_uring_file_sends_total{worker="0",pid="P"} N
# HELP vigil_worker_uring_file_fallbacks_total File ranges a ring connection sent with sendfile() (no file send free).
# TYPE vigil_worker_uring_file_fallbacks_total counter
vigil_worker_uring_file_fallbacks_total{worker="0",pid="P"} N
)layout";

struct StubStatus {
  long active = -1, accepts = -1, handled = -1, requests = -1, reading = -1, writing = -1,
       waiting = -1;
};

class HttpStatus : public ::testing::Test {
 protected:
  void SetUp() override { server_.write("html/index.html", "index\n"); }
  bool start(const std::string& extra = "") {
    if (!server_.start(extra + "\nserver {\n listen 127.0.0.1:" + std::to_string(port_) +
                       ";\n root html;\n location = /status { stub_status; }\n"
                       " location = /metrics { metrics; }\n}\n"))
      return false;
    port_ = server_.port();
    return port_ > 0;
  }
  StubStatus stub(Client* c = nullptr) {
    Response r;
    if (c != nullptr) {
      c->send(test::simple_get("/status"));
      r = c->read_response();
    } else {
      r = test::get(port_, test::simple_get("/status"));
    }
    StubStatus s;
    static const std::regex re(
        "Active connections: (\\d+) \nserver accepts handled requests\n (\\d+) (\\d+) (\\d+) \n"
        "Reading: (\\d+) Writing: (\\d+) Waiting: (\\d+) \n");
    std::smatch m;
    EXPECT_TRUE(std::regex_match(r.body, m, re)) << "not nginx's layout:\n" << r.body;
    if (m.size() == 8) {
      s.active = std::stol(m[1]);
      s.accepts = std::stol(m[2]);
      s.handled = std::stol(m[3]);
      s.requests = std::stol(m[4]);
      s.reading = std::stol(m[5]);
      s.writing = std::stol(m[6]);
      s.waiting = std::stol(m[7]);
    }
    EXPECT_EQ(r.header("content-type"), "text/plain");
    return s;
  }

  VigilServer server_;
  int port_ = 0;
};

TEST_F(HttpStatus, StubStatusCountsAsNginxDoes) {
  ASSERT_TRUE(start()) << server_.output();
  StubStatus s0 = stub();
  // The status request itself: one active connection, writing, one request.
  EXPECT_EQ(s0.active, 1);
  EXPECT_EQ(s0.writing, 1);
  EXPECT_EQ(s0.reading, 0);
  EXPECT_EQ(s0.waiting, 0);
  EXPECT_EQ(s0.accepts, s0.handled);

  // Three idle keep-alive connections and one that has sent half a header.
  Client k1(port_), k2(port_), k3(port_), half(port_);
  for (Client* k : {&k1, &k2, &k3}) {
    ASSERT_TRUE(k->send(test::simple_get("/")));
    ASSERT_EQ(k->read_response().status, 200);
  }
  ASSERT_TRUE(half.send("GET / HTTP/1.1\r\n"));
  // Until the server has read the half header (each poll is a request).
  StubStatus s1;
  int polls = 0;
  ASSERT_TRUE(test::wait_for([&] {
    s1 = stub();
    ++polls;
    return s1.reading == 1;
  }));
  EXPECT_EQ(s1.active, 5);
  EXPECT_EQ(s1.waiting, 3);
  EXPECT_EQ(s1.reading, 1);
  EXPECT_EQ(s1.writing, 1);
  EXPECT_EQ(s1.accepts, s0.accepts + 4 + polls);
  EXPECT_EQ(s1.requests, s0.requests + 4 + polls);  // 3 GETs, the half one, the polls

  // Connections go away: the counts follow.
  k1.close();
  k2.close();
  half.close();
  // Through a kept-alive connection (not waiting now), until the server
  // has seen the three closes.
  StubStatus s2;
  polls = 0;
  ASSERT_TRUE(test::wait_for([&] {
    s2 = stub(&k3);
    ++polls;
    return s2.active == 1;
  }));
  EXPECT_EQ(s2.waiting, 0);
  EXPECT_EQ(s2.reading, 0);
  EXPECT_EQ(s2.writing, 1);
  EXPECT_EQ(s2.requests, s1.requests + polls);
}

TEST_F(HttpStatus, StubStatusAllowsOnlyGetAndHead) {
  ASSERT_TRUE(start()) << server_.output();
  Response r = test::get(port_, "POST /status HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(r.status, 405);
}

TEST_F(HttpStatus, MetricsIsPrometheusTextWithWorkerLoopFigures) {
  ASSERT_TRUE(start()) << server_.output();
  for (int i = 0; i < 5; ++i) test::get(port_, test::simple_get("/"));
  Response r = test::get(port_, test::simple_get("/metrics"));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "text/plain; version=0.0.4; charset=utf-8");

  // Every line: a comment (# HELP / # TYPE) or "name{labels} value".
  // Prometheus' metric names: [a-zA-Z_:][a-zA-Z0-9_:]* (ours lower case).
  static const std::regex sample(
      "([a-z_][a-z0-9_]*)(\\{worker=\"(\\d+)\",pid=\"(\\d+)\"\\})? ([0-9.]+)");
  static const std::regex comment(
      "# (HELP [a-z_][a-z0-9_]* .+|TYPE [a-z_][a-z0-9_]* (counter|gauge))");
  std::map<std::string, double> values;
  std::map<std::string, std::string> types;
  std::istringstream in(r.body);
  std::string line;
  int samples = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (line.starts_with("#")) {
      EXPECT_TRUE(std::regex_match(line, m, comment)) << line;
      if (line.starts_with("# TYPE ")) {
        std::istringstream t(line.substr(7));
        std::string name, type;
        t >> name >> type;
        types[name] = type;
      }
      continue;
    }
    ASSERT_TRUE(std::regex_match(line, m, sample)) << line;
    EXPECT_TRUE(types.count(m[1])) << "no TYPE before " << line;
    values[m[1]] = std::stod(m[5]);
    if (m[2].matched) {
      EXPECT_EQ(std::stoi(m[4]), server_.process().pid()) << line;
    }
    ++samples;
  }
  EXPECT_GE(values["vigil_http_requests_total"], 6);
  EXPECT_GE(values["vigil_connections_accepted_total"], 6);
  EXPECT_EQ(values["vigil_connections_active"], 1);
  EXPECT_EQ(values["vigil_connections_writing"], 1);
  EXPECT_GT(values["vigil_worker_loop_iterations_total"], 5);
  EXPECT_GT(values["vigil_worker_events_total"], 5);
  EXPECT_GT(values["vigil_worker_events_per_wait"], 0);
  EXPECT_GE(values["vigil_worker_accepted_total"], 6);
  EXPECT_EQ(values["vigil_worker_connections_max"], 1024);
  EXPECT_GE(values["vigil_worker_connections_used"], 2);  // the listener and us
  EXPECT_TRUE(values.count("vigil_worker_timers_expired_total"));
  EXPECT_TRUE(values.count("vigil_worker_posted_events_total"));
  EXPECT_TRUE(values.count("vigil_worker_accept_mutex_acquired_total"));
  EXPECT_EQ(types["vigil_http_requests_total"], "counter");
  EXPECT_EQ(types["vigil_connections_active"], "gauge");
  EXPECT_GE(samples, 17);

  // The figures move.
  for (int i = 0; i < 5; ++i) test::get(port_, test::simple_get("/"));
  Response r2 = test::get(port_, test::simple_get("/metrics"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r2.body, m, std::regex("vigil_http_requests_total (\\d+)")));
  EXPECT_GE(std::stod(m[1]), values["vigil_http_requests_total"] + 6);
}

// The layout of /metrics, figure by figure: every name, HELP and TYPE line in
// its place, whichever layer counts the figure (values and pids aside).
TEST_F(HttpStatus, MetricsLayoutIsStable) {
  ASSERT_TRUE(start()) << server_.output();
  Response r = test::get(port_, test::simple_get("/metrics"));
  ASSERT_EQ(r.status, 200);
  static const std::regex value(" [0-9.]+$");
  static const std::regex pid("pid=\"\\d+\"");
  std::istringstream in(r.body);
  std::string line, layout;
  while (std::getline(in, line)) {
    if (!line.starts_with("#")) {
      line = std::regex_replace(line, value, " N");
      line = std::regex_replace(line, pid, "pid=\"P\"");
    }
    layout += line + "\n";
  }
  EXPECT_EQ(layout, kMetricsLayout);
}

// As nginx's: without buffer= each line is written when its request ends.
TEST_F(HttpStatus, AccessLogIsCombinedAndWrittenAtOnce) {
  ASSERT_TRUE(start("access_log logs/access.log combined;")) << server_.output();
  test::get(port_,
            "GET /index.html?q=1 HTTP/1.1\r\nHost: x\r\nUser-Agent: agent \"007\"\r\n"
            "Referer: http://ref/\r\n\r\n");
  test::get(port_, test::simple_get("/nope"));
  std::string log;
  // Polled only because the client has its response before the server's
  // log phase runs; nothing waits for a flush timer.
  EXPECT_TRUE(test::wait_for(
      [&] {
        log = server_.read("logs/access.log");
        return std::count(log.begin(), log.end(), '\n') == 2;
      },
      3000));
  static const std::regex line1(
      "127\\.0\\.0\\.1 - - \\[\\d\\d/[A-Z][a-z]{2}/\\d{4}:\\d\\d:\\d\\d:\\d\\d [+-]\\d{4}\\] "
      "\"GET /index\\.html\\?q=1 HTTP/1\\.1\" 200 6 \"http://ref/\" \"agent \\\\x22007\\\\x22\"\n"
      "127\\.0\\.0\\.1 - - \\[[^\\]]+\\] \"GET /nope HTTP/1\\.1\" 404 \\d+ \"-\" \"-\"\n");
  EXPECT_TRUE(std::regex_match(log, line1)) << log;
}

TEST_F(HttpStatus, AccessLogIsFlushedAtExitAndReopenedOnUsr1) {
  ASSERT_TRUE(start("access_log logs/access.log combined buffer=64k flush=1h;"))
      << server_.output();
  test::get(port_, test::simple_get("/index.html"));
  ASSERT_EQ(
      ::rename(server_.path("logs/access.log").c_str(), server_.path("logs/access.log.1").c_str()),
      0);
  server_.process().signal(SIGUSR1);
  // Logged where the worker reopens, before it runs another event.
  ASSERT_TRUE(server_.wait_output("reopening logs")) << server_.output();
  test::get(port_, test::simple_get("/second"));
  EXPECT_EQ(server_.stop(), 0) << server_.output();
  // The line buffered before the reopen went to the old file; the later one
  // to the new file, written at exit.
  EXPECT_NE(server_.read("logs/access.log.1").find("GET /index.html"), std::string::npos);
  EXPECT_NE(server_.read("logs/access.log").find("GET /second"), std::string::npos);
  EXPECT_EQ(server_.read("logs/access.log").find("GET /index.html"), std::string::npos);
}

TEST_F(HttpStatus, AccessLogOffWritesNothing) {
  ASSERT_TRUE(start("access_log off;")) << server_.output();
  test::get(port_, test::simple_get("/"));
  EXPECT_EQ(server_.stop(), 0);
  EXPECT_EQ(server_.read("logs/access.log"), "");
}

TEST_F(HttpStatus, TimedOutRequestIsLoggedAs408) {
  ASSERT_TRUE(start("client_header_timeout 1s; access_log logs/access.log combined buffer=0;"))
      << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.send("GET /slow HTTP/1.1\r\n"));
  EXPECT_TRUE(c.closed_within(4000));
  EXPECT_TRUE(test::wait_for([&] {
    return server_.read("logs/access.log").find("\"GET /slow HTTP/1.1\" 408 0") !=
           std::string::npos;
  })) << server_.read("logs/access.log");
}

// A client that leaves while its response is still being written (here
// held back by limit_rate) ends the request at once, as nginx does: the
// connection is gone from the counts and the request logged, not kept until
// a send fails or send_timeout passes.
TEST_F(HttpStatus, ClientLeavingASlowResponseEndsItAtOnce) {
  server_.write("html/big.txt", std::string(64 * 1024, 'x'));
  ASSERT_TRUE(
      start("access_log logs/access.log combined buffer=0;\n"
            "limit_rate 1k; limit_rate_after 1; send_timeout 300s;"))
      << server_.output();
  {
    Client c(port_);
    ASSERT_TRUE(c.send(test::simple_get("/big.txt")));
    ASSERT_TRUE(test::wait_for([&] { return stub().writing == 2; }));
  }  // closed with most of the body unsent
  ASSERT_TRUE(test::wait_for([&] { return stub().active == 1; }));
  // Logged at once, with what went out; the status stays the 200 already
  // sent (nginx logs 499 only when nothing was).
  static const std::regex line("\"GET /big.txt HTTP/1.1\" 200 (\\d+) ");
  std::smatch m;
  std::string log;
  ASSERT_TRUE(test::wait_for([&] {
    log = server_.read("logs/access.log");
    return std::regex_search(log, m, line);
  })) << log;
  EXPECT_LT(std::stol(m[1]), 64 * 1024);
}

}  // namespace
}  // namespace vigil
