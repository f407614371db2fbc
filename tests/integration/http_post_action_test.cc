// post_action (nginx's): after the response, the request goes on to the
// location's post_action URI or named location, whose answer the client
// never sees; the access log line is written once, at the post action's
// end, in its location. A proxied post action reaches its backend (the
// "download finished" notification it is used for); keep-alive goes on.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "integration/http_harness.h"
#include "integration/proxy_backend.h"
#include "test_util.h"

namespace vigil::test {
namespace {

class HttpPostAction : public ::testing::Test {
 protected:
  bool start(const std::string& locations) {
    port_ = free_port();
    server_.write("html/index.html", "SEE-THIS");
    server_.write("html/post.html", "HIDDEN");
    server_.write("html/remote", "SEE-THIS");
    return server_.start(
        "log_format u \"$uri $request\";\n"
        "server { listen 127.0.0.1:" +
        std::to_string(port_) + "; root html; access_log logs/u.log u;\n" + locations + "\n}");
  }
  std::string log() { return read_file(server_.dir() + "/logs/u.log"); }
  // Waits until the log has `lines` lines.
  bool log_lines(std::size_t lines) {
    return wait_until([&] {
      const std::string l = log();
      return static_cast<std::size_t>(std::count(l.begin(), l.end(), '\n')) >= lines;
    });
  }

  VigilServer server_;
  int port_ = 0;
};

TEST_F(HttpPostAction, AStaticPostActionIsNotSentAndIsLogged) {
  ASSERT_TRUE(
      start("location / { post_action /post.html; }\n"
            "location /post.html { }\n"
            "location /off/ { post_action off; }"))
      << server_.output();
  server_.write("html/off/f", "OFF");
  Client c(port_);
  ASSERT_TRUE(c.ok());
  // Two on one connection: nothing of the post action's answer comes
  // between them.
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(c.send(simple_get("/")));
    const Response r = c.read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "SEE-THIS");
    EXPECT_EQ(r.header("connection"), "keep-alive");
  }
  ASSERT_TRUE(c.send(simple_get("/off/f")));
  const Response off = c.read_response();
  EXPECT_EQ(off.body, "OFF");
  EXPECT_EQ(c.extra(), "");
  // One line per request; the post action's URI for the two that had one.
  ASSERT_TRUE(log_lines(3)) << log();
  EXPECT_EQ(log(),
            "/post.html GET / HTTP/1.1\n/post.html GET / HTTP/1.1\n/off/f GET /off/f HTTP/1.1\n");
}

TEST_F(HttpPostAction, AProxiedPostActionReachesItsBackend) {
  Backend notify;
  ASSERT_TRUE(
      start("location /remote { post_action /notify; }\n"
            "location /named { alias html/remote; post_action @done; }\n"
            "location /notify { internal; proxy_pass http://" +
            notify.address() +
            "/done?for=$request_uri; }\n"
            "location @done { proxy_pass http://" +
            notify.address() + "; }"))
      << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send(simple_get("/remote")));
  Response r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "SEE-THIS");
  ASSERT_TRUE(wait_until([&] { return notify.requests() == 1; })) << server_.output();
  EXPECT_EQ(notify.last().target, "/done?for=/remote");
  EXPECT_EQ(notify.last().method, "GET");
  // A named location: the request's own URI goes to the backend.
  ASSERT_TRUE(c.send(simple_get("/named")));
  r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "SEE-THIS");
  ASSERT_TRUE(wait_until([&] { return notify.requests() == 2; })) << server_.output();
  EXPECT_EQ(notify.last().target, "/named");
  // The backend's answer never reached the client, and the connection
  // still serves.
  ASSERT_TRUE(c.send(simple_get("/remote")));
  r = c.read_response();
  EXPECT_EQ(r.body, "SEE-THIS");
  EXPECT_EQ(r.body.find("backend"), std::string::npos);
  ASSERT_TRUE(log_lines(3)) << log();
  EXPECT_NE(log().find("/notify GET /remote HTTP/1.1\n"), std::string::npos) << log();
}

TEST_F(HttpPostAction, AnErrorOfThePostActionIsNotSentEither) {
  ASSERT_TRUE(
      start("location / { post_action /missing; }\n"
            "location /x { post_action @nowhere; }"))
      << server_.output();
  server_.write("html/x", "X");
  Client c(port_);
  ASSERT_TRUE(c.ok());
  for (const char* target : {"/", "/x", "/"}) {
    SCOPED_TRACE(target);
    ASSERT_TRUE(c.send(simple_get(target)));
    const Response r = c.read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.header("connection"), "keep-alive");
  }
  EXPECT_TRUE(server_.wait_output("could not find named location \"@nowhere\""))
      << server_.output();
}

TEST_F(HttpPostAction, TakesOneArgument) {
  VigilServer s;
  auto [rc, out] = check_http_conf(s, "post_action;");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("invalid number of arguments in \"post_action\""), std::string::npos) << out;
  EXPECT_NE(out.find("t.conf:3"), std::string::npos) << out;
  VigilServer ok;
  auto [rc2, out2] = check_http_conf(ok, "post_action /p;");
  EXPECT_EQ(rc2, 0) << out2;
}

}  // namespace
}  // namespace vigil::test
