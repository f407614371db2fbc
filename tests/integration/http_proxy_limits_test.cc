// limit_conn and limit_req on proxied locations: the pre-access phase runs
// for every content handler, so a proxied request is counted while it waits
// on its upstream, and limit_req applies before the backend is asked.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

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
  ASSERT_TRUE(start("limit_conn_zone $binary_remote_addr zone=perip:1m;",
                    "location / { limit_conn perip 1; proxy_pass http://" + backend.address() +
                        "; }"))
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

}  // namespace
}  // namespace vigil::test
