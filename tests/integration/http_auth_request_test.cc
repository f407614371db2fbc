// auth_request through the real vigil binary, with a real authentication
// service (a backend on its own socket) and a real application upstream that
// records what it was sent: 2xx lets the request through, 401 answers with
// the service's challenges, 403 refuses, anything else (a 404, a timeout's
// 504, a refused connection's 502) is a 500 with nginx's log line;
// auth_request_set feeds proxy_set_header; the service's body never reaches
// the client; a client that leaves while the service thinks is cleaned up
// (the service's connection closed); satisfy any/all with allow/deny.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <string>

#include "integration/http_harness.h"
#include "integration/proxy_backend.h"
#include "test_process.h"

namespace vigil::test {
namespace {

// (A `return` in the protected location would answer in the rewrite phase,
// before access, as in nginx: the locations serve a file.)
class AuthRequest : public ::testing::Test {
 protected:
  bool start(const std::string& locations, const std::string& http = "") {
    port_ = free_port();
    server_.write("html/page", "PAGE");
    return server_.start(http + "\nserver { listen 127.0.0.1:" + std::to_string(port_) +
                         "; root html; access_log logs/access.log;\n" + locations + "\n}");
  }
  Response request(const std::string& raw) {
    Client c(port_);
    if (!c.ok() || !c.send(raw)) return {};
    return c.read_response();
  }
  // The usual oauth2-proxy / Authelia shape: an internal location proxying
  // to the service without the body, with the original URI.
  std::string auth_location(const Backend& service, const std::string& extra = "") {
    return "location = /auth { internal; proxy_pass http://" + service.address() +
           "/verify; proxy_pass_request_body off; proxy_set_header Content-Length \"\";"
           " proxy_set_header X-Original-URI $request_uri;"
           " proxy_set_header X-Original-Method $request_method; " +
           extra + " }\n";
  }

  VigilServer server_;
  int port_ = 0;
};

// The service decides by the original URI.
bool decide(BackendConn& c, const BackendRequest& r) {
  const std::string uri = r.header("x-original-uri");
  if (uri.find("ok") != std::string::npos) {
    return c.send(backend_response(200, "SERVICE-BODY", "X-User: alice\r\nX-Groups: a,b\r\n"));
  }
  if (uri.find("login") != std::string::npos) {
    return c.send(backend_response(401, "SERVICE-BODY",
                                   "WWW-Authenticate: Bearer realm=\"one\"\r\n"
                                   "WWW-Authenticate: Basic realm=\"two\"\r\n"));
  }
  if (uri.find("no") != std::string::npos) return c.send(backend_response(403, "SERVICE-BODY"));
  return c.send(backend_response(404, "SERVICE-BODY"));
}

bool echo_app(BackendConn& c, const BackendRequest& r) {
  return c.send(backend_response(
      200, "app " + r.method + " " + r.target + " user=" + r.header("x-user") + " body=" + r.body));
}

TEST_F(AuthRequest, AllowedRequestReachesTheUpstreamWithTheSetVariables) {
  Backend service(decide);
  Backend app(echo_app);
  ASSERT_TRUE(start(auth_location(service) +
                    "location /app/ { auth_request /auth;"
                    " auth_request_set $user $upstream_http_x_user;"
                    " auth_request_set $groups \"[$upstream_http_x_groups]\";"
                    " add_header X-Groups $groups;"
                    " auth_request_set $sent $sent_http_x_groups; add_header X-Sent $sent;"
                    " proxy_set_header X-User $user; proxy_pass http://" +
                    app.address() + "; }"))
      << server_.output();
  Response r = request(simple_get("/app/ok?x=1"));
  EXPECT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(r.body, "app GET /app/ok?x=1 user=alice body=");
  EXPECT_EQ(r.header("x-groups"), "[a,b]");
  EXPECT_EQ(r.header("x-sent"), "a,b");
  EXPECT_EQ(r.head.find("SERVICE-BODY"), std::string::npos);
  ASSERT_EQ(service.requests(), 1);
  const BackendRequest s = service.last();
  EXPECT_EQ(s.method, "GET");
  EXPECT_EQ(s.target, "/verify");
  EXPECT_EQ(s.header("x-original-uri"), "/app/ok?x=1");
  EXPECT_EQ(s.header("x-original-method"), "GET");
  EXPECT_FALSE(s.has("content-length"));
  EXPECT_EQ(app.requests(), 1);
}

// A POST: the subrequest is a GET without the body, which the upstream then
// gets whole.
TEST_F(AuthRequest, PostBodyGoesToTheUpstreamNotTheService) {
  Backend service(decide);
  Backend app(echo_app);
  ASSERT_TRUE(start(auth_location(service) +
                    "location /app/ { auth_request /auth; proxy_pass http://" + app.address() +
                    "; }"))
      << server_.output();
  Response r =
      request("POST /app/ok HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(r.body, "app POST /app/ok user= body=hello");
  const BackendRequest s = service.last();
  EXPECT_EQ(s.method, "GET");
  EXPECT_EQ(s.header("x-original-method"), "POST");
  EXPECT_TRUE(s.body.empty());
  EXPECT_FALSE(s.has("content-length"));
}

TEST_F(AuthRequest, UnauthorizedPassesEveryChallengeForbiddenRefuses) {
  Backend service(decide);
  Backend app(echo_app);
  ASSERT_TRUE(start(auth_location(service) +
                    "location /app/ { auth_request /auth; proxy_pass http://" + app.address() +
                    "; }"))
      << server_.output();
  Response r = request(simple_get("/app/login"));
  EXPECT_EQ(r.status, 401) << r.head;
  EXPECT_NE(r.head.find("\r\nWWW-Authenticate: Bearer realm=\"one\"\r\n"), std::string::npos)
      << r.head;
  EXPECT_NE(r.head.find("\r\nWWW-Authenticate: Basic realm=\"two\"\r\n"), std::string::npos)
      << r.head;
  EXPECT_EQ(r.body.find("SERVICE-BODY"), std::string::npos);
  r = request(simple_get("/app/no"));
  EXPECT_EQ(r.status, 403) << r.head;
  EXPECT_FALSE(r.has("www-authenticate"));
  EXPECT_EQ(r.body.find("SERVICE-BODY"), std::string::npos);
  EXPECT_EQ(app.requests(), 0);
  EXPECT_EQ(service.requests(), 2);
}

TEST_F(AuthRequest, AnyOtherStatusIs500WithNginxLogLine) {
  Backend service(decide);
  ASSERT_TRUE(start(auth_location(service) + "location /app/ { auth_request /auth; }"))
      << server_.output();
  Response r = request(simple_get("/app/elsewhere"));
  EXPECT_EQ(r.status, 500) << r.head;
  EXPECT_TRUE(server_.wait_output("auth request unexpected status: 404")) << server_.output();
}

// A local auth location (return, a static file), `internal` kept from the
// client, and auth_request off below a server-wide one.
TEST_F(AuthRequest, LocalLocationsInternalAndOff) {
  server_.write("html/pub/index.html", "PUBLIC");
  server_.write("html/static-auth", "STATIC-AUTH-BODY");
  server_.write("html/page", "PAGE");
  ASSERT_TRUE(
      start("auth_request /deny;\n"
            "location = /deny { internal; return 403; }\n"
            "location = /allow { internal; return 204; }\n"
            "location = /static-auth { internal; }\n"
            "location /pub/ { auth_request off; }\n"
            "location = /page { auth_request /allow; }\n"
            "location = /page2 { auth_request /static-auth; alias html/page; }\n"))
      << server_.output();
  EXPECT_EQ(request(simple_get("/page")).body, "PAGE");
  Response r = request(simple_get("/page2"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "PAGE");
  EXPECT_EQ(request(simple_get("/pub/")).body, "PUBLIC");
  EXPECT_EQ(request(simple_get("/other")).status, 403);
  // The internal locations themselves are not found (find-config decides
  // before the access phase, as in nginx).
  EXPECT_EQ(request(simple_get("/allow")).status, 404);
}

TEST_F(AuthRequest, KeepAliveRequestsEachAskTheService) {
  Backend service(decide);
  ASSERT_TRUE(start(auth_location(service) +
                    "location /app/ { auth_request /auth; try_files /page =404; }"))
      << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.ok());
  for (const char* path : {"/app/ok1", "/app/no", "/app/ok2"}) {
    ASSERT_TRUE(c.send(simple_get(path)));
    Response r = c.read_response();
    if (std::string(path).find("ok") != std::string::npos) {
      EXPECT_EQ(r.status, 200) << path;
      EXPECT_EQ(r.body, "PAGE");
    } else {
      EXPECT_EQ(r.status, 403) << path;
    }
  }
  EXPECT_EQ(service.requests(), 3);
}

TEST_F(AuthRequest, ServiceTimeoutAndRefusalAre500) {
  std::atomic<bool> release{false};
  Backend slow([&](BackendConn&, const BackendRequest&) {
    wait_until([&] { return release.load(); }, 5000);
    return false;
  });
  const std::string dead = "127.0.0.1:" + std::to_string(free_port());
  ASSERT_TRUE(start(auth_location(slow, "proxy_read_timeout 300ms;") +
                    "location = /auth-dead { internal; proxy_pass http://" + dead +
                    "; }\n"
                    "location /slow/ { auth_request /auth; }\n"
                    "location /dead/ { auth_request /auth-dead; }\n"))
      << server_.output();
  Response r = request(simple_get("/slow/x"));
  EXPECT_EQ(r.status, 500) << r.head;
  EXPECT_TRUE(server_.wait_output("upstream timed out")) << server_.output();
  EXPECT_TRUE(server_.wait_output("auth request unexpected status: 504")) << server_.output();
  release = true;
  r = request(simple_get("/dead/x"));
  EXPECT_EQ(r.status, 500) << r.head;
  EXPECT_TRUE(server_.wait_output("auth request unexpected status: 502")) << server_.output();
}

// The client leaves while the service has not answered: the request ends
// (499 in the access log), the service's connection is closed, nothing is
// answered later, and the server goes on serving.
TEST_F(AuthRequest, ClientGoneWhileTheServiceThinks) {
  std::atomic<bool> received{false};
  std::atomic<bool> upstream_closed{false};
  Backend service([&](BackendConn& c, const BackendRequest& r) {
    if (r.header("x-original-uri") == "/app/ok") return c.send(backend_response(200, ""));
    received = true;
    pollfd p{c.fd(), POLLIN, 0};
    for (int i = 0; i < 100 && !upstream_closed; ++i) {
      if (::poll(&p, 1, 50) == 1) {
        char ch;
        if (::recv(c.fd(), &ch, 1, 0) <= 0) upstream_closed = true;
      }
    }
    return false;
  });
  ASSERT_TRUE(start(auth_location(service) +
                    "location /app/ { auth_request /auth; try_files /page =404; }"))
      << server_.output();
  {
    Client c(port_);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c.send(simple_get("/app/wait")));
    ASSERT_TRUE(wait_until([&] { return received.load(); }, 5000));
  }
  EXPECT_TRUE(wait_until([&] { return upstream_closed.load(); }, 5000));
  EXPECT_TRUE(wait_until([&] {
    return server_.read("logs/access.log").find("\"GET /app/wait HTTP/1.1\" 499") !=
           std::string::npos;
  })) << server_.read("logs/access.log");
  Response r = request(simple_get("/app/ok"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "PAGE");
}

// satisfy: allow/deny and auth_basic first, then auth_request (nginx's order).
TEST_F(AuthRequest, SatisfyAnyAndAll) {
  Backend service(decide);
  ASSERT_TRUE(start(auth_location(service) +
                    "location /any-allow/ { satisfy any; allow all; auth_request /auth;"
                    " try_files /page =404; }\n"
                    "location /any-deny/ { satisfy any; deny all; auth_request /auth;"
                    " try_files /page =404; }\n"
                    "location /all-deny/ { satisfy all; deny all; auth_request /auth;"
                    " try_files /page =404; }\n"
                    "location /all-allow/ { satisfy all; allow all; auth_request /auth;"
                    " try_files /page =404; }\n"))
      << server_.output();
  EXPECT_EQ(request(simple_get("/any-allow/login")).status, 200);
  EXPECT_EQ(request(simple_get("/any-deny/ok")).status, 200);
  Response r = request(simple_get("/any-deny/login"));
  EXPECT_EQ(r.status, 401);
  EXPECT_TRUE(r.has("www-authenticate"));
  EXPECT_EQ(request(simple_get("/any-deny/no")).status, 403);
  EXPECT_EQ(request(simple_get("/all-deny/ok")).status, 403);
  EXPECT_EQ(request(simple_get("/all-allow/no")).status, 403);
  EXPECT_EQ(request(simple_get("/all-allow/ok")).status, 200);
  // "any" with allow, and "all" with deny, decide without asking the service.
  EXPECT_EQ(service.requests(), 5);
}

TEST_F(AuthRequest, ModuleIsListedInTheBuildDescription) {
  auto [rc, out] = run({std::string(VIGIL_BINARY), "-V"});
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("--with-http_auth_request_module"), std::string::npos) << out;
}

}  // namespace
}  // namespace vigil::test
