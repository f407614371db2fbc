// log_format and access_log with a named format: the variables as the server
// fills them, escaping modes, and the errors nginx would report.
#include <gtest/gtest.h>

#include <algorithm>

#include <string>

#include "integration/http_harness.h"

namespace vigil::test {
namespace {

class LogFormat : public ::testing::Test {
 protected:
  bool start(const std::string& http) {
    port_ = free_port();
    server_.write("html/index.html", "hello\n");
    return server_.start(http + "\nserver { listen 127.0.0.1:" + std::to_string(port_) +
                         "; access_log logs/custom.log " + format_ + " buffer=0; location / { } }");
  }
  // Waits for the log to hold `lines` lines and returns it.
  std::string log(std::size_t lines) {
    std::string text;
    wait_until(
        [&] {
          text = server_.read("logs/custom.log");
          return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) >= lines;
        },
        3000);
    return text;
  }
  VigilServer server_;
  int port_ = 0;
  std::string format_ = "main";
};

TEST_F(LogFormat, VariablesAsTheServerFillsThem) {
  ASSERT_TRUE(
      start("log_format main '$request_method $uri $args|$status $body_bytes_sent|$http_x_test|"
            "$host|$server_port|$request_uri|$connection_requests|$upstream_addr';"))
      << server_.output();
  Client c(port_);
  ASSERT_TRUE(
      c.send("GET /./index.html?a=1 HTTP/1.1\r\nHost: Example.ORG\r\nX-Test: t1\r\n"
             "X-Test: t2\r\n\r\n"));
  Response r = c.read_response();
  ASSERT_EQ(r.status, 200);
  ASSERT_TRUE(c.send("GET /missing HTTP/1.1\r\nHost: a\r\n\r\n"));
  ASSERT_EQ(c.read_response().status, 404);
  std::string text = log(2);
  const std::string port = std::to_string(port_);
  EXPECT_EQ(
      text,
      "GET /index.html a=1|200 6|t1, t2|example.org|" + port +
          "|/./index.html?a=1|1|-\n"
          "GET /missing -|404 " +
          std::to_string(std::string("<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>"
                                     "\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>"
                                     "vigil/" VIGIL_VERSION "</center>\r\n</body>\r\n</html>\r\n")
                             .size()) +
          "|-|a|" + port + "|/missing|2|-\n");
}

TEST_F(LogFormat, JsonEscaping) {
  ASSERT_TRUE(start("log_format main escape=json '{\"ua\":\"$http_user_agent\"}';"))
      << server_.output();
  Response r = get(port_, simple_get("/", "x", "User-Agent: a\"b\\c\r\n"));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(log(1), "{\"ua\":\"a\\\"b\\\\c\"}\n");
}

TEST_F(LogFormat, DefaultEscapingAndMissingValues) {
  ASSERT_TRUE(start("log_format main '\"$http_user_agent\" \"$http_referer\"';"))
      << server_.output();
  Response r = get(port_, simple_get("/", "x", "User-Agent: q\"x\r\n"));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(log(1), "\"q\\x22x\" \"-\"\n");
}

TEST_F(LogFormat, CombinedByName) {
  format_ = "combined";
  ASSERT_TRUE(start("")) << server_.output();
  Response r = get(port_, simple_get("/", "x", "User-Agent: ua\r\n"));
  ASSERT_EQ(r.status, 200);
  std::string text = log(1);
  EXPECT_NE(text.find("127.0.0.1 - - ["), std::string::npos) << text;
  EXPECT_NE(text.find("] \"GET / HTTP/1.1\" 200 6 \"-\" \"ua\"\n"), std::string::npos) << text;
}

// `vigil -t` on an http block; returns its output (rc in *rc).
std::string check_conf(VigilServer& server, const std::string& http, int* rc) {
  server.write("conf/t.conf", "events {}\nhttp {\n" + http + "\n}\n");
  auto [code, out] = run({kVigil, "-p", server.dir(), "-c", "conf/t.conf", "-t"});
  *rc = code;
  return out;
}

TEST_F(LogFormat, Errors) {
  int rc = 0;
  std::string out = check_conf(server_, "server { access_log logs/a.log nosuch; }", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("unknown log format \"nosuch\" in "), std::string::npos) << out;
  out = check_conf(server_, "log_format main '$nosuch';", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("unknown \"nosuch\" variable in "), std::string::npos) << out;
  out = check_conf(server_, "log_format main a; log_format main b;", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("duplicate log_format name \"main\""), std::string::npos) << out;
  out = check_conf(server_, "log_format main escape=xml a;", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("unknown log format escaping \"xml\""), std::string::npos) << out;
  out = check_conf(server_, "server { location / { log_format x a; } }", &rc);
  EXPECT_NE(rc, 0);
  out = check_conf(server_, "log_format main '$host'; server { access_log logs/a.log main; }", &rc);
  EXPECT_EQ(rc, 0) << out;
}

// Several access_log lines at one level each get the line (a path named
// twice is one file, written in each format); if= leaves a line out when
// its value is empty or "0"; "off" at a level means none there.
TEST_F(LogFormat, SeveralAccessLogsAndConditions) {
  port_ = free_port();
  server_.write("html/index.html", "hello\n");
  ASSERT_TRUE(
      server_.start("log_format a 'a $uri $arg_x';\nlog_format b 'b $status';\n"
                    "server { listen 127.0.0.1:" +
                    std::to_string(port_) +
                    ";\n"
                    "  access_log logs/one.log a buffer=0;\n"
                    "  access_log logs/two.log b buffer=0 if=$arg_log;\n"
                    "  access_log logs/one.log b buffer=0;\n"
                    "  location / { }\n"
                    "  location /quiet { access_log off; return 204; }\n"
                    "}"))
      << server_.output();
  EXPECT_EQ(get(port_, simple_get("/index.html?x=1&log=1", "x")).status, 200);
  EXPECT_EQ(get(port_, simple_get("/index.html?x=2&log=0", "x")).status, 200);
  EXPECT_EQ(get(port_, simple_get("/quiet", "x")).status, 204);
  EXPECT_EQ(get(port_, simple_get("/none?log=yes", "x")).status, 404);
  std::string one;
  ASSERT_TRUE(wait_until(
      [&] {
        one = server_.read("logs/one.log");
        return std::count(one.begin(), one.end(), '\n') >= 6;
      },
      3000))
      << one;
  EXPECT_EQ(one, "a /index.html 1\nb 200\na /index.html 2\nb 200\na /none -\nb 404\n");
  EXPECT_EQ(server_.read("logs/two.log"), "b 200\nb 404\n");
}

}  // namespace
}  // namespace vigil::test
