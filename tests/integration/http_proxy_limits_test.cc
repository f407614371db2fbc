// limit_conn and limit_req on proxied locations: the pre-access phase runs
// for every content handler, so a proxied request is counted while it waits
// on its upstream, and limit_req applies before the backend is asked.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "integration/http_harness.h"
#include "integration/proxy_backend.h"
#include "test_util.h"

namespace vigil::test {
namespace {

class ProxyLimits : public ::testing::Test {
 protected:
  bool start(const std::string& http, const std::string& locations) {
    port_ = free_port();
    return server_.start(http + "\nserver { listen 127.0.0.1:" + std::to_string(port_) +
                         "; access_log off;\n" + locations + "\n}");
  }
  VigilServer server_;
  int port_ = 0;
};

TEST_F(ProxyLimits, LimitConnCountsARequestWaitingOnItsUpstream) {
  std::atomic<bool> release{false};
  Backend backend([&release](BackendConn& c, const BackendRequest& r) {
    if (r.target == "/slow") {
      // Held until the test has sent its second request (bounded).
      wait_for([&release] { return release.load(); }, 10000);
    }
    return c.send(backend_response(200, "backend " + r.target));
  });
  ASSERT_TRUE(
      start("limit_conn_zone $binary_remote_addr zone=perip:1m;",
            "location / { limit_conn perip 1; proxy_pass http://" + backend.address() + "; }"))
      << server_.output();

  Client slow(port_);
  ASSERT_TRUE(slow.ok());
  ASSERT_TRUE(slow.send(simple_get("/slow")));
  // The first request is at the backend, holding its limit_conn entry.
  ASSERT_TRUE(wait_for([&backend] { return backend.requests() == 1; }));

  EXPECT_EQ(get(port_, simple_get("/fast")).status, 503);
  EXPECT_EQ(backend.requests(), 1);  // the refused request never reached the backend
  EXPECT_TRUE(server_.wait_output("limiting connections by zone \"perip\"")) << server_.output();

  release = true;
  Response first = slow.read_response();
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.body, "backend /slow");
  // The entry was given back with the first request: the next one passes.
  EXPECT_EQ(get(port_, simple_get("/again")).status, 200);
}

// The entry is held until the request ends, not when the backend is done:
// a proxied response stalled on a client that does not read still counts.
TEST_F(ProxyLimits, LimitConnCountsAProxiedResponseBeingSent) {
  const std::string big(16 << 20, 'b');
  Backend backend([&big](BackendConn& c, const BackendRequest& r) {
    return c.send(backend_response(200, r.target == "/big" ? big : "small"));
  });
  ASSERT_TRUE(
      start("limit_conn_zone $binary_remote_addr zone=perip:1m;",
            "location / { limit_conn perip 1; proxy_pass http://" + backend.address() + "; }"))
      << server_.output();

  Client slow(port_);
  ASSERT_TRUE(slow.ok());
  int small = 4096;
  ASSERT_EQ(::setsockopt(slow.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
  ASSERT_TRUE(slow.send(simple_get("/big")));
  // The response is under way (its first bytes arrived), stalled on this
  // reader: more than the sockets between can hold.
  ASSERT_TRUE(readable(slow.fd(), 5000));

  EXPECT_EQ(get(port_, simple_get("/small")).status, 503);
  EXPECT_EQ(backend.requests(), 1);

  // The request ends when its client goes away, and gives the entry back.
  slow.close();
  EXPECT_TRUE(wait_for([this] { return get(port_, simple_get("/small")).status == 200; }, 5000))
      << server_.output();
}

TEST_F(ProxyLimits, LimitReqRejectsBeforeTheBackendIsAsked) {
  Backend backend;
  ASSERT_TRUE(start("limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;",
                    "location / { limit_req zone=one; limit_req_status 429; proxy_pass http://" +
                        backend.address() + "; }"))
      << server_.output();
  EXPECT_EQ(get(port_, simple_get("/a")).status, 200);
  EXPECT_EQ(get(port_, simple_get("/b")).status, 429);
  EXPECT_EQ(backend.requests(), 1);
}

// What a client saw of a response, byte count by time since it sent the
// request (one sample per read), until the server closed the connection.
struct Arrival {
  std::int64_t ms;
  std::size_t bytes;
};

std::vector<Arrival> receive_timed(int fd, std::chrono::steady_clock::time_point t0,
                                   std::string& all, int timeout_ms) {
  std::vector<Arrival> seen;
  const auto deadline = t0 + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    all.append(buf, static_cast<std::size_t>(n));
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    seen.push_back({ms, all.size()});
  }
  return seen;
}

// limit_rate and limit_rate_after apply to a proxied response as to a file:
// at any moment the client has at most limit_rate_after bytes plus
// limit_rate per second since it asked (a lower bound on the time the body
// takes, caused by the limit; no upper bound is checked).
void expect_rate_limited(VigilServer& server, int port, const std::string& body,
                         const std::string& head_check) {
  constexpr std::size_t kRate = 64 * 1024;  // limit_rate 64k
  constexpr std::size_t kAfter = 8 * 1024;  // limit_rate_after 8k
  Client c(port);
  ASSERT_TRUE(c.ok());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.send("GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  std::string all;
  const std::vector<Arrival> seen = receive_timed(c.fd(), t0, all, 10000);
  ASSERT_FALSE(seen.empty()) << server.output();
  const std::size_t head_end = all.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  EXPECT_NE(all.find(head_check), std::string::npos) << all.substr(0, head_end);
  EXPECT_EQ(static_cast<std::size_t>(std::count(all.begin() + static_cast<std::ptrdiff_t>(head_end),
                                                all.end(), body[0])),
            body.size());
  for (const Arrival& a : seen) {
    // 20 ms of slack for the millisecond clocks on both sides.
    const std::size_t allowed = kAfter + kRate * static_cast<std::size_t>(a.ms + 20) / 1000;
    EXPECT_LE(a.bytes, allowed) << "at " << a.ms << " ms";
  }
  // The whole response past limit_rate_after took at least its time at the rate.
  const std::int64_t least = static_cast<std::int64_t>((all.size() - kAfter) * 1000 / kRate) - 20;
  EXPECT_GE(seen.back().ms, least) << all.size() << " bytes";
}

TEST_F(ProxyLimits, LimitRateAppliesToAProxiedResponse) {
  const std::string body(160 * 1024, 'p');
  Backend backend([&body](BackendConn& c, const BackendRequest&) {
    return c.send(backend_response(200, body));
  });
  ASSERT_TRUE(start("", "location / { limit_rate 64k; limit_rate_after 8k; proxy_pass http://" +
                            backend.address() + "; }"))
      << server_.output();
  expect_rate_limited(server_, port_, body, "Content-Length: 163840");
}

TEST_F(ProxyLimits, LimitRateAppliesToAProxiedBodyOfUnknownLength) {
  // A close-delimited body reaches an HTTP/1.1 client chunked: the limit
  // counts the framing too, as the bytes on the wire.
  const std::string body(96 * 1024, 'q');
  Backend backend([&body](BackendConn& c, const BackendRequest&) {
    (void)c.send("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body);
    return false;
  });
  ASSERT_TRUE(start("", "location / { limit_rate 64k; limit_rate_after 8k; proxy_pass http://" +
                            backend.address() + "; }"))
      << server_.output();
  expect_rate_limited(server_, port_, body, "Transfer-Encoding: chunked");
}

// proxy_limit_rate paces the reading from the backend: at any moment the
// client has at most what came with the response head (one proxy_buffer_size
// buffer) plus the rate per second since it asked; proxy_limit_rate 0 at an
// inner level lifts it. The whole body arrives either way.
TEST_F(ProxyLimits, ProxyLimitRatePacesTheBackend) {
  constexpr std::size_t kRate = 32 * 1024;
  constexpr std::size_t kHeadBuffer = 4096;
  const std::string body(80 * 1024, 'r');
  Backend backend([&body](BackendConn& c, const BackendRequest&) {
    return c.send(backend_response(200, body));
  });
  ASSERT_TRUE(start("", "proxy_limit_rate 32k; proxy_buffer_size 4k;\n"
                        "location / { proxy_pass http://" + backend.address() + "; }\n"
                        "location /free { proxy_pass http://" + backend.address() +
                        "; proxy_limit_rate 0; }"))
      << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.ok());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.send("GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  std::string all;
  const std::vector<Arrival> seen = receive_timed(c.fd(), t0, all, 10000);
  ASSERT_FALSE(seen.empty()) << server_.output();
  const std::size_t head_end = all.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  EXPECT_EQ(all.size() - head_end - 4, body.size());
  for (const Arrival& a : seen) {
    const std::size_t allowed =
        head_end + 4 + kHeadBuffer + kRate * static_cast<std::size_t>(a.ms + 20) / 1000;
    EXPECT_LE(a.bytes, allowed) << "at " << a.ms << " ms";
  }
  const std::int64_t least =
      static_cast<std::int64_t>((body.size() - kHeadBuffer) * 1000 / kRate) - 20;
  EXPECT_GE(seen.back().ms, least);

  Response r = get(port_, "GET /free HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.body, body);
}

}  // namespace
}  // namespace vigil::test
