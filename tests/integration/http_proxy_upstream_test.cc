// proxy_pass on the upstream layer: keep-alive connections to backends
// (reuse counted at the backend, a stale cached connection retried on a
// fresh one), weights and hashing seen through the proxy, max_fails shared
// by two workers through a zone, and the per-server counters in /metrics.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <string>

#include "integration/http_harness.h"
#include "integration/proxy_backend.h"
#include "upstream/group.h"

namespace vigil::test {
namespace {

class ProxyUpstream : public ::testing::Test {
 protected:
  bool start(const std::string& upstreams, const std::string& locations,
             const std::string& main = "") {
    port_ = free_port();
    return server_.start(
        "log_format pid '$pid $upstream_addr $status';\n" + upstreams +
            "\nserver { listen 127.0.0.1:" + std::to_string(port_) +
            "; access_log logs/access.log pid buffer=0; location = /metrics { metrics; }\n" +
            locations + "\n}",
        main);
  }
  Response get_on(Client& c, const std::string& path) {
    if (!c.send(simple_get(path))) return {};
    return c.read_response();
  }
  Response get(const std::string& path) {
    Client c(port_);
    return get_on(c, path);
  }
  VigilServer server_;
  int port_ = 0;
};

constexpr char kKeepalive[] = "proxy_http_version 1.1; proxy_set_header Connection \"\";";

TEST_F(ProxyUpstream, KeepaliveReusesOneBackendConnection) {
  Backend b;
  ASSERT_TRUE(start("upstream ka { server " + b.address() + "; keepalive 4; }",
                    std::string("location / { proxy_pass http://ka; ") + kKeepalive + " }"))
      << server_.output();
  for (int i = 0; i < 10; ++i) {
    Response r = get("/r" + std::to_string(i));  // a new client connection each time
    ASSERT_EQ(r.status, 200) << i;
    EXPECT_EQ(r.body, "backend GET /r" + std::to_string(i));
  }
  EXPECT_EQ(b.requests(), 10);
  EXPECT_EQ(b.connections(), 1);
  EXPECT_EQ(b.last().header("connection"), "");
  EXPECT_EQ(b.last().version, "HTTP/1.1");
  std::string metrics = get("/metrics").body;
  EXPECT_NE(metrics.find("vigil_upstream_keepalive_hits_total{protocol=\"http\",upstream=\"ka\","
                         "server=\"" +
                         b.address() + "\"} 9"),
            std::string::npos)
      << metrics;
  EXPECT_NE(
      metrics.find("vigil_upstream_requests_total{protocol=\"http\",upstream=\"ka\",server=\"" +
                   b.address() + "\"} 10"),
      std::string::npos)
      << metrics;
}

// keepalive_time: a cached connection that has lived that long is closed
// after its request, and the next request connects again.
TEST_F(ProxyUpstream, KeepaliveTimeRetiresAnOldConnection) {
  Backend b;
  ASSERT_TRUE(start("upstream kt { server " + b.address() + "; keepalive 4; keepalive_time 3s; }",
                    std::string("location / { proxy_pass http://kt; ") + kKeepalive + " }"))
      << server_.output();
  ASSERT_EQ(get("/a").status, 200);
  ASSERT_EQ(get("/b").status, 200);
  EXPECT_EQ(b.connections(), 1);  // reused while it is young
  // Asked again (polled) until the first connection's time is over.
  int sent = 2;
  ASSERT_TRUE(wait_until(
      [&] {
        ++sent;
        return get("/c").status == 200 && b.connections() == 2;
      },
      15000));
  EXPECT_EQ(b.requests(), sent);
}

TEST_F(ProxyUpstream, WithoutKeepaliveEveryRequestConnects) {
  Backend b;
  ASSERT_TRUE(start("upstream nk { server " + b.address() + "; }",
                    std::string("location / { proxy_pass http://nk; ") + kKeepalive + " }"))
      << server_.output();
  for (int i = 0; i < 5; ++i) ASSERT_EQ(get("/").status, 200);
  EXPECT_EQ(b.connections(), 5);
}

TEST_F(ProxyUpstream, StaleCachedConnectionIsRetriedOnAFreshOne) {
  // The backend answers the first request of a connection and drops the
  // second one unanswered, as a server whose idle timeout raced the request.
  Backend b([](BackendConn& c, const BackendRequest& r) {
    if (r.index > 0) return false;
    return c.send(backend_response(200, "fresh"));
  });
  ASSERT_TRUE(start("upstream st { server " + b.address() + " max_fails=1; keepalive 4; }",
                    std::string("location / { proxy_pass http://st; ") + kKeepalive + " }"))
      << server_.output();
  for (int i = 0; i < 5; ++i) {
    Response r = get("/");
    EXPECT_EQ(r.status, 200) << i << "\n" << server_.output();
    EXPECT_EQ(r.body, "fresh");
  }
  // Every request after the first met a dropped cached connection first.
  EXPECT_GE(b.connections(), 5);
  EXPECT_EQ(server_.output().find("no live upstreams"), std::string::npos) << server_.output();
}

TEST_F(ProxyUpstream, OneBadResponseDoesNotTakeOutTheOnlyServer) {
  // The first response is not HTTP; every later one is good. With one server
  // (nginx's peers->single) the failure must not make the next fail_timeout
  // answer "no live upstreams".
  Backend b([](BackendConn& c, const BackendRequest& r) {
    if (r.target == "/bad") {
      c.send("garbage\r\n\r\n");
      return false;
    }
    return c.send(backend_response(200, "good"));
  });
  ASSERT_TRUE(start("upstream one { server " + b.address() + " max_fails=1 fail_timeout=60s; }",
                    "location / { proxy_pass http://one; }"))
      << server_.output();
  EXPECT_EQ(get("/bad").status, 502);
  for (int i = 0; i < 3; ++i) {
    Response r = get("/");
    EXPECT_EQ(r.status, 200) << i << "\n" << server_.output();
    EXPECT_EQ(r.body, "good");
  }
  EXPECT_EQ(server_.output().find("no live upstreams"), std::string::npos) << server_.output();
}

TEST_F(ProxyUpstream, NextUpstreamRelaysTheLastResponseWhenEveryServerWasTried) {
  // A server marked down is not a try (nginx counts the tries of a group
  // without its down servers): once the live ones answered 404, the last
  // 404 is the answer, not "no live upstreams".
  Backend a([](BackendConn& c, const BackendRequest&) {
    return c.send(backend_response(404, "a404"));
  });
  Backend b([](BackendConn& c, const BackendRequest&) {
    return c.send(backend_response(404, "b404"));
  });
  ASSERT_TRUE(start("upstream two { server " + a.address() + "; server " + b.address() +
                        "; }\n"
                        "upstream dn { server " + a.address() + "; server " + b.address() +
                        " down; }",
                    "location /two/ { proxy_pass http://two; proxy_next_upstream http_404; }\n"
                    "location /dn/ { proxy_pass http://dn; proxy_next_upstream http_404; }"))
      << server_.output();
  Response r = get("/two/x");
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(r.body == "a404" || r.body == "b404") << r.body;
  EXPECT_EQ(a.requests() + b.requests(), 2);  // both tried, once each

  r = get("/dn/x");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(r.body, "a404");
  EXPECT_EQ(b.requests(), 1);  // the down server was never asked
  EXPECT_EQ(server_.output().find("no live upstreams"), std::string::npos) << server_.output();
}

TEST_F(ProxyUpstream, KeepaliveIsNotUsedForCloseDelimitedOrHttp10) {
  Backend b([](BackendConn& c, const BackendRequest& r) {
    if (r.target == "/close") {
      c.send("HTTP/1.1 200 OK\r\n\r\nbody");
      return false;
    }
    return c.send(backend_response(200, "ok"));
  });
  ASSERT_TRUE(start("upstream ka { server " + b.address() + "; keepalive 4; }",
                    "location / { proxy_pass http://ka; }\n"  // HTTP/1.0, Connection: close
                    "location /close { proxy_pass http://ka; " +
                        std::string(kKeepalive) + " }"))
      << server_.output();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(get("/").status, 200);
  EXPECT_EQ(b.connections(), 3);
  for (int i = 0; i < 3; ++i) {
    Client c(port_);
    ASSERT_TRUE(c.send(simple_get("/close")));
    Response r = c.read_response();
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "body");  // chunked to the client, whose connection stays
  }
  EXPECT_EQ(b.connections(), 6);
}

TEST_F(ProxyUpstream, WeightsThroughTheProxy) {
  Backend a, b;
  ASSERT_TRUE(
      start("upstream w { server " + a.address() + " weight=3; server " + b.address() + "; }",
            "location / { proxy_pass http://w; }"))
      << server_.output();
  for (int i = 0; i < 200; ++i) ASSERT_EQ(get("/").status, 200);
  // Smooth weighted round-robin in one worker: exactly 3:1.
  EXPECT_EQ(a.requests(), 150);
  EXPECT_EQ(b.requests(), 50);
}

TEST_F(ProxyUpstream, HashKeepsAKeyOnOneServer) {
  Backend a, b, c;
  ASSERT_TRUE(start("upstream h { hash $request_uri; server " + a.address() + "; server " +
                        b.address() + "; server " + c.address() + "; }",
                    "location / { proxy_pass http://h; }"))
      << server_.output();
  std::map<std::string, int> where;  // uri -> which backend total before
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 150; ++i) {
      const int before[3] = {a.requests(), b.requests(), c.requests()};
      ASSERT_EQ(get("/k" + std::to_string(i)).status, 200);
      int which = a.requests() > before[0] ? 0 : b.requests() > before[1] ? 1 : 2;
      std::string key = "/k" + std::to_string(i);
      if (round == 0) {
        where[key] = which;
      } else {
        EXPECT_EQ(where[key], which) << key;
      }
    }
  }
  // 150 keys over 3 servers: each gets a fair share (binomial, p = 1/3:
  // mean 50, sd ~5.8; 20..80 is beyond 5 sd).
  for (int n : {a.requests(), b.requests(), c.requests()}) {
    EXPECT_GT(n, 2 * 20);
    EXPECT_LT(n, 2 * 80);
  }
}

// A key longer than the proxy's inline room (256 bytes) is hashed whole:
// it once became the empty key, sending every such request to one server.
TEST_F(ProxyUpstream, HashOfALongKeyIsTheWholeKeys) {
  Backend a, b;
  ASSERT_TRUE(start("upstream h { hash $http_x_key; server " + a.address() + "; server " +
                        b.address() + "; }",
                    "location / { proxy_pass http://h; }"))
      << server_.output();
  // Two 300-byte keys that the hash sends to different servers (nginx's
  // first round, equal weights: ((crc32(key) >> 16) & 0x7fff) % 2 is the
  // server), the first server for the first key.
  const std::string base(296, 'k');
  std::string keys[2];
  for (int i = 0; keys[0].empty() || keys[1].empty(); ++i) {
    const std::string key = base + std::to_string(1000 + i);
    std::string& slot = keys[((upstream::crc32(key) >> 16) & 0x7fff) % 2];
    if (slot.empty()) slot = key;
  }
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < 2; ++k) {
      const int before[2] = {a.requests(), b.requests()};
      ASSERT_EQ(test::get(port_, simple_get("/", "localhost", "X-Key: " + keys[k] + "\r\n")).status,
                200);
      EXPECT_EQ(a.requests() - before[0], k == 0 ? 1 : 0) << "key " << k;
      EXPECT_EQ(b.requests() - before[1], k == 1 ? 1 : 0) << "key " << k;
    }
  }
}

TEST_F(ProxyUpstream, MaxFailsSharedByTwoWorkersThroughAZone) {
  // "bad" fails every request (closes at once): after one failure it is
  // skipped for fail_timeout by every worker, not just the one that saw it.
  Backend bad([](BackendConn&, const BackendRequest&) { return false; });
  Backend good;
  ASSERT_TRUE(start("upstream z { zone z 64k; server " + bad.address() +
                        " max_fails=1 fail_timeout=30s; server " + good.address() + "; }",
                    "location / { proxy_pass http://z; }",
                    "master_process on; worker_processes 2;"))
      << server_.output();
  std::set<std::string> pids;
  for (int i = 0; i < 200 && (pids.size() < 2 || i < 40); ++i) {
    Response r = get("/");
    ASSERT_EQ(r.status, 200) << i << "\n" << server_.output();
    wait_until([&] {
      const std::string text = server_.read("logs/access.log");
      return static_cast<int>(std::count(text.begin(), text.end(), '\n')) >= i + 1;
    });
    std::string log = server_.read("logs/access.log");
    std::size_t start = log.rfind('\n', log.size() - 2);
    start = start == std::string::npos ? 0 : start + 1;
    pids.insert(log.substr(start, log.find(' ', start) - start));
  }
  ASSERT_EQ(pids.size(), 2u) << "both workers must have served requests";
  EXPECT_EQ(bad.connections(), 1);
  std::string metrics = get("/metrics").body;
  EXPECT_NE(metrics.find("vigil_upstream_up{protocol=\"http\",upstream=\"z\",server=\"" +
                         bad.address() + "\"} 0"),
            std::string::npos)
      << metrics;
  EXPECT_NE(
      metrics.find("vigil_upstream_failures_total{protocol=\"http\",upstream=\"z\",server=\"" +
                   bad.address() + "\"} 1"),
      std::string::npos)
      << metrics;
}

}  // namespace
}  // namespace vigil::test
