// log_format and access_log with a named format: the variables as the server
// fills them, escaping modes, and the errors nginx would report.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
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

// One HTTP/1.0 request, answered and closed: the server logs a request
// before it closes its connection, so its line is in the file then.
int get_closed(int port, const std::string& target) {
  Client c(port);
  if (!c.ok() || !c.send("GET " + target + " HTTP/1.0\r\nHost: h\r\n\r\n")) return 0;
  const Response r = c.read_response();
  EXPECT_TRUE(c.closed_within(3000)) << target;
  return r.status;
}

// Lines as nginx writes them: a line with no buffer= is in the file when
// the response is (no 1 s wait); escape=none and escape=json leave a
// missing value out, the default writes "-"; JSON escapes in upper case;
// $uri is empty, not missing, for a path above the root.
TEST_F(LogFormat, UnbufferedByDefaultAndMissingValues) {
  port_ = free_port();
  ASSERT_TRUE(server_.start(
      "log_format d '$uri:$arg_a';\nlog_format n escape=none '$uri:$arg_a';\n"
      "log_format j escape=json '$uri:$arg_a';\n"
      "server { listen 127.0.0.1:" + std::to_string(port_) + ";\n"
      "  access_log logs/d.log d; access_log logs/n.log n; access_log logs/j.log j;\n"
      "  location / { return 200; } }"))
      << server_.output();
  EXPECT_EQ(get_closed(port_, "/x"), 200);
  // Read at once: the line was written before the response.
  EXPECT_EQ(server_.read("logs/d.log"), "/x:-\n");
  EXPECT_EQ(server_.read("logs/n.log"), "/x:\n");
  EXPECT_EQ(server_.read("logs/j.log"), "/x:\n");
  EXPECT_EQ(get_closed(port_, "/y?a=%1B"), 200);
  EXPECT_EQ(get_closed(port_, "/../up"), 400);
  EXPECT_EQ(server_.read("logs/j.log"), "/x:\n/y:%1B\n:\n");
  EXPECT_EQ(server_.read("logs/d.log"), "/x:-\n/y:%1B\n:-\n");
}

std::string gzip_decode_file(const std::string& path) {
  std::string out;
  FILE* f = ::popen(("gzip -dc " + path + " 2>/dev/null").c_str(), "r");
  if (f == nullptr) return "<popen failed>";
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  if (::pclose(f) != 0) out += "<gzip failed>";
  return out;
}

// access_log gzip: buffered (64k unless buffer= says), each write one gzip
// member that gzip -d reads back, the flush timer writing it.
TEST_F(LogFormat, GzipLogs) {
  port_ = free_port();
  ASSERT_TRUE(server_.start("log_format t '$uri:$status';\n"
                            "server { listen 127.0.0.1:" + std::to_string(port_) + ";\n"
                            "  access_log logs/z.log t gzip=9 flush=100ms;\n"
                            "  location / { return 200; } }"))
      << server_.output();
  for (const char* uri : {"/a", "/b", "/c"}) EXPECT_EQ(get_closed(port_, uri), 200);
  struct stat st {};
  ASSERT_TRUE(wait_until([&] { return ::stat(server_.path("logs/z.log").c_str(), &st) == 0 && st.st_size > 0; }));
  std::string text;
  ASSERT_TRUE(wait_until([&] {
    text = gzip_decode_file(server_.path("logs/z.log"));
    return text == "/a:200\n/b:200\n/c:200\n";
  })) << text;
  // A second write is a second member: the file is still one gzip stream.
  EXPECT_EQ(get_closed(port_, "/d"), 200);
  ASSERT_TRUE(wait_until([&] {
    text = gzip_decode_file(server_.path("logs/z.log"));
    return text == "/a:200\n/b:200\n/c:200\n/d:200\n";
  })) << text;
}

// A path with variables is opened per line (nothing when the root is
// missing); open_log_file_cache keeps descriptors by use, min_uses and max
// as nginx's: a cached file keeps its lines after it is moved away.
TEST_F(LogFormat, VariablePathsAndTheirCache) {
  port_ = free_port();
  ::mkdir(server_.path("logs/dir").c_str(), 0755);
  ASSERT_TRUE(server_.start(
      "log_format t '$uri';\n"
      "server { listen 127.0.0.1:" + std::to_string(port_) + ";\n"
      "  location /v { access_log logs/v_$arg_n t; return 200; }\n"
      "  location /noroot { root nowhere; access_log logs/v_$arg_n t; return 200; }\n"
      "  location /c { open_log_file_cache max=3 inactive=20s min_uses=2 valid=1m;\n"
      "    access_log logs/dir/c_$arg_n t; return 200; } }"))
      << server_.output();
  EXPECT_EQ(get_closed(port_, "/v?n=one"), 200);
  EXPECT_EQ(get_closed(port_, "/v?n=two"), 200);
  EXPECT_EQ(get_closed(port_, "/v?n=one"), 200);
  EXPECT_EQ(server_.read("logs/v_one"), "/v\n/v\n");
  EXPECT_EQ(server_.read("logs/v_two"), "/v\n");
  EXPECT_EQ(get_closed(port_, "/noroot?n=three"), 200);
  EXPECT_TRUE(server_.wait_output("testing \"")) << server_.output();
  struct stat st {};
  EXPECT_NE(::stat(server_.path("logs/v_three").c_str(), &st), 0);

  for (const char* n : {"lru", "lru", "once", "first", "first", "second", "second"}) {
    EXPECT_EQ(get_closed(port_, std::string("/c?n=") + n), 200);
  }
  ASSERT_EQ(::rename(server_.path("logs/dir").c_str(), server_.path("logs/moved").c_str()), 0);
  for (const char* n : {"lru", "once", "first", "second"}) {
    EXPECT_EQ(get_closed(port_, std::string("/c?n=") + n), 200);
  }
  EXPECT_EQ(server_.read("logs/moved/c_lru"), "/c\n/c\n");  // evicted: its file was gone
  EXPECT_EQ(server_.read("logs/moved/c_once"), "/c\n");      // used once: never kept open
  EXPECT_EQ(server_.read("logs/moved/c_first"), "/c\n/c\n/c\n");
  EXPECT_EQ(server_.read("logs/moved/c_second"), "/c\n/c\n/c\n");
  EXPECT_TRUE(server_.wait_output("open() \"")) << server_.output();
}

TEST(AccessLogConf, ErrorsAsNginx) {
  VigilServer server;
  const auto fails = [&](const std::string& http, const std::string& what) {
    const auto [rc, out] = check_http_conf(server, http);
    EXPECT_NE(rc, 0) << http;
    EXPECT_NE(out.find(what), std::string::npos) << out;
  };
  fails("access_log logs/a.log combined flush=1s;", "no buffer is defined for access_log");
  fails("access_log logs/$host.log combined buffer=4k;", "buffered logs cannot have variables in name");
  fails("access_log logs/$host.log combined gzip;", "buffered logs cannot have variables in name");
  fails("access_log logs/a.log combined gzip=10;", "invalid compression level \"10\"");
  fails("open_log_file_cache inactive=1s;", "must have \"max\" parameter");
  fails("open_log_file_cache max=0;", "invalid \"max\" value");
}

}  // namespace
}  // namespace vigil::test
