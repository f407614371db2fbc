// error_log below the main level (http, server, location; stream and its
// servers; mail and its servers) and syslog targets: the files vigil writes
// at each level, and the datagrams a UDP socket of the test receives.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "integration/http_harness.h"
#include "vigil/version.h"

namespace vigil::test {
namespace {

// A syslog server of the test: a UDP socket on 127.0.0.1, any port.
class UdpReceiver {
 public:
  UdpReceiver() {
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ == -1 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == -1 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == -1) {
      return;
    }
    port_ = ntohs(a.sin_port);
  }
  ~UdpReceiver() {
    if (fd_ != -1) ::close(fd_);
  }
  int port() const { return port_; }
  // Datagrams until one contains `needle` (it is the last one returned), or
  // the time is up.
  std::vector<std::string> until(const std::string& needle, int timeout_ms = 5000) {
    std::vector<std::string> got;
    wait_until(
        [&] {
          pollfd p{fd_, POLLIN, 0};
          while (::poll(&p, 1, 0) == 1) {
            char buf[8192];
            ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n <= 0) break;
            got.emplace_back(buf, static_cast<std::size_t>(n));
            if (got.back().find(needle) != std::string::npos) return true;
          }
          return false;
        },
        timeout_ms);
    return got;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Reads until `end` has arrived (or EOF, or the time is up).
std::string read_until(int fd, const std::string& end, int timeout_ms) {
  std::string out;
  while (out.find(end) == std::string::npos) {
    std::string more = read_n(fd, 1, timeout_ms);
    if (more.empty()) break;
    out += more;
  }
  return out;
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

class ErrorLog : public ::testing::Test {
 protected:
  // Waits until `file` holds `needle`; returns its text.
  std::string wait_file(const std::string& file, const std::string& needle) {
    std::string text;
    wait_until(
        [&] {
          text = server_.read(file);
          return text.find(needle) != std::string::npos;
        },
        3000);
    return text;
  }
  std::string check(const std::string& conf, int* rc) {
    server_.write("conf/t.conf", conf);
    auto [code, out] = run({kVigil, "-p", server_.dir(), "-c", "conf/t.conf", "-t"});
    *rc = code;
    return out;
  }
  VigilServer server_;
};

TEST_F(ErrorLog, EachHttpLevelReplacesTheOneAbove) {
  const int first = free_port();
  const int second = free_port();
  ASSERT_TRUE(server_.start(
      "error_log logs/http.log warn;\n"
      "server { listen 127.0.0.1:" +
      std::to_string(first) +
      "; error_log logs/server.log info;\n"
      "  location /loc/ { error_log logs/loc_a.log error; error_log logs/loc_b.log info; }\n"
      "  location /crit/ { error_log logs/crit.log crit; }\n"
      "  location /srv/ { }\n"
      "}\n"
      "server { listen 127.0.0.1:" +
      std::to_string(second) + "; location / { } }\n"))
      << server_.output();

  ASSERT_EQ(get(first, simple_get("/loc/missing-a")).status, 404);
  ASSERT_EQ(get(first, simple_get("/srv/missing-b")).status, 404);
  ASSERT_EQ(get(first, simple_get("/crit/missing-c")).status, 404);
  ASSERT_EQ(get(second, simple_get("/missing-d")).status, 404);

  // Every log at a location's level gets the line, none of those above.
  const std::string a = wait_file("logs/loc_a.log", "missing-a");
  const std::string b = wait_file("logs/loc_b.log", "missing-a");
  EXPECT_NE(a.find("[error]"), std::string::npos) << a;
  EXPECT_NE(b.find("[error]"), std::string::npos) << b;
  const std::string srv = wait_file("logs/server.log", "missing-b");
  EXPECT_EQ(srv.find("missing-a"), std::string::npos) << srv;
  EXPECT_EQ(srv.find("missing-c"), std::string::npos) << srv;
  EXPECT_EQ(a.find("missing-b"), std::string::npos) << a;
  // A level filters: an [error] line is below crit.
  EXPECT_EQ(server_.read("logs/crit.log"), "");
  // A server without error_log inherits http's.
  const std::string http = wait_file("logs/http.log", "missing-d");
  EXPECT_EQ(http.find("missing-a"), std::string::npos) << http;
  EXPECT_EQ(http.find("missing-b"), std::string::npos) << http;
  // The main level's log (stderr here) sees none of them.
  EXPECT_EQ(server_.output().find("missing-"), std::string::npos) << server_.output();
  // nginx's line: time, level, pid#tid, connection number.
  EXPECT_TRUE(std::regex_search(
      a, std::regex(R"(^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[error\] \d+#0: \*\d+ open\(\) ")")))
      << a;
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(ErrorLog, SeveralAtOneLevelEachWriteTheirLevel) {
  ASSERT_TRUE(server_.start(
      "server { listen 127.0.0.1:0;\n"
      "  location /dup/ { error_log logs/dup.log; error_log logs/dup.log; }\n"
      "  location /high/ { error_log logs/high.log emerg; error_log logs/high.log; }\n"
      "}\n"))
      << server_.output();
  const int port = server_.port();
  ASSERT_EQ(get(port, simple_get("/dup/x")).status, 404);
  ASSERT_EQ(get(port, simple_get("/high/x")).status, 404);
  EXPECT_EQ(count_of(wait_file("logs/dup.log", "[error]"), "[error]"), 2u);
  EXPECT_EQ(count_of(wait_file("logs/high.log", "[error]"), "[error]"), 1u);
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(ErrorLog, ReopenedOnUsr1) {
  ASSERT_TRUE(
      server_.start("server { listen 127.0.0.1:0; error_log logs/srv.log; location / { } }"))
      << server_.output();
  const int port = server_.port();
  ASSERT_EQ(get(port, simple_get("/before")).status, 404);
  wait_file("logs/srv.log", "before");
  ASSERT_EQ(std::rename(server_.path("logs/srv.log").c_str(), server_.path("logs/old.log").c_str()),
            0);
  server_.signal(SIGUSR1);
  ASSERT_TRUE(server_.wait_output("reopening logs")) << server_.output();
  ASSERT_EQ(get(port, simple_get("/after")).status, 404);
  EXPECT_NE(wait_file("logs/srv.log", "after").find("after"), std::string::npos);
  EXPECT_EQ(server_.read("logs/old.log").find("after"), std::string::npos);
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(ErrorLog, ErrorsNameTheDirective) {
  int rc = 0;
  std::string out =
      check("events {}\nhttp {\nserver { location / { error_log memory:1m debug; } }\n}\n", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("[emerg]"), std::string::npos) << out;
  EXPECT_NE(out.find("\"memory:\""), std::string::npos) << out;
  EXPECT_NE(out.find("t.conf:3"), std::string::npos) << out;
  out = check(
      "events {}\nstream {\nserver { listen 127.0.0.1:1; proxy_pass 127.0.0.1:2;\n"
      "error_log syslog:server=127.0.0.1,facility=nope; }\n}\n",
      &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("unknown syslog facility \"nope\""), std::string::npos) << out;
  EXPECT_NE(out.find("t.conf:4"), std::string::npos) << out;
  out = check("error_log syslog:tag=x;\nevents {}\n", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("no syslog server specified"), std::string::npos) << out;
  out = check("events {}\nhttp {\nserver { location / { error_log logs/a.log loud; } }\n}\n", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("invalid value \"loud\""), std::string::npos) << out;
  out = check("events {}\nmail {\nerror_log logs/m.log info;\n}\n", &rc);
  EXPECT_EQ(rc, 0) << out;
}

TEST_F(ErrorLog, SyslogDatagrams) {
  UdpReceiver sys;
  ASSERT_GT(sys.port(), 0);
  const std::string to = "syslog:server=127.0.0.1:" + std::to_string(sys.port());
  ASSERT_TRUE(
      server_.start("server { listen 127.0.0.1:0;\n"
                    "  location /plain/ { error_log " +
                    to +
                    "; }\n"
                    "  location /user/ { error_log " +
                    to +
                    ",facility=user,severity=alert,tag=vtest; }\n"
                    "  location /bare/ { error_log " +
                    to +
                    ",nohostname; }\n"
                    "}\n"))
      << server_.output();
  const int port = server_.port();
  ASSERT_EQ(get(port, simple_get("/plain/x1")).status, 404);
  std::vector<std::string> got = sys.until("x1");
  ASSERT_FALSE(got.empty());
  // local7.err: <187>; the error log's line, without its newline, after the
  // RFC 3164 header.
  EXPECT_TRUE(std::regex_match(
      got.back(),
      std::regex(R"(<187>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ nginx: )"
                 R"(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[error\] \d+#0: \*\d+ open\(\) .*x1.*)")))
      << got.back();
  ASSERT_EQ(get(port, simple_get("/user/x2")).status, 404);
  got = sys.until("x2");
  ASSERT_FALSE(got.empty());
  // user (1) and the message's own severity (error, 3): error_log ignores severity=.
  EXPECT_TRUE(got.back().starts_with("<11>")) << got.back();
  EXPECT_NE(got.back().find(" vtest: "), std::string::npos) << got.back();
  ASSERT_EQ(get(port, simple_get("/bare/x3")).status, 404);
  got = sys.until("x3");
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(
      std::regex_search(got.back(), std::regex(R"(^<187>\w{3} [ \d]\d \d\d:\d\d:\d\d nginx: )")))
      << got.back();
  EXPECT_EQ(server_.stop(), 0);
}

// access_log to syslog: each line (without its newline) is a datagram, at
// local7.info unless facility=/severity= say otherwise; if= and the format
// apply as to a file; stream's access_log takes the same target.
TEST_F(ErrorLog, AccessLogToSyslog) {
  UdpReceiver sys;
  ASSERT_GT(sys.port(), 0);
  const std::string to = "syslog:server=127.0.0.1:" + std::to_string(sys.port());
  const int stream_port = free_port();
  const int backend = free_port();
  ASSERT_TRUE(server_.start(
      "log_format uri \"$uri:$status\";\n"
      "server { listen 127.0.0.1:0;\n"
      "  location /plain/ { access_log " +
          to +
          " uri; }\n"
          "  location /user/ { access_log " +
          to +
          ",facility=user,severity=alert,tag=vtest uri; }\n"
          "  location /if/ { access_log " +
          to +
          " uri if=$arg_log; }\n"
          "}\n"
          "server { listen 127.0.0.1:" +
          std::to_string(backend) + "; return 200 up; }\n",
      "stream { log_format s \"stream $status $upstream_addr\";\n"
      "  server { listen 127.0.0.1:" +
          std::to_string(stream_port) + "; proxy_pass 127.0.0.1:" + std::to_string(backend) +
          "; access_log " + to + ",nohostname s; }\n}\n"))
      << server_.output();
  const int port = server_.port();
  ASSERT_EQ(get(port, simple_get("/plain/a1")).status, 404);
  std::vector<std::string> got = sys.until("a1");
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(std::regex_match(
      got.back(),
      std::regex(R"(<190>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ nginx: /plain/a1:404)")))
      << got.back();
  ASSERT_EQ(get(port, simple_get("/user/a2")).status, 404);
  got = sys.until("a2");
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(got.back().starts_with("<9>")) << got.back();  // user.alert
  EXPECT_TRUE(got.back().ends_with(" vtest: /user/a2:404")) << got.back();
  // if=: an empty or "0" value logs nothing; the next line that is logged
  // comes alone.
  ASSERT_EQ(get(port, simple_get("/if/skipped?log=0")).status, 404);
  ASSERT_EQ(get(port, simple_get("/if/kept?log=1")).status, 404);
  got = sys.until("kept");
  ASSERT_FALSE(got.empty());
  for (const std::string& d : got) EXPECT_EQ(d.find("skipped"), std::string::npos) << d;

  Client c(stream_port);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send(simple_get("/")));
  EXPECT_EQ(c.read_response().body, "up");
  c.close();
  got = sys.until("stream 200");
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(std::regex_match(
      got.back(),
      std::regex(R"(<190>\w{3} [ \d]\d \d\d:\d\d:\d\d nginx: stream 200 127\.0\.0\.1:\d+)")))
      << got.back();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(ErrorLog, AccessLogToSyslogIsNeverBuffered) {
  int rc = 0;
  std::string out = check(
      "events {}\nhttp {\nserver { listen 127.0.0.1:1;\n"
      "  access_log syslog:server=127.0.0.1 combined buffer=4k; }\n}\n",
      &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("logs to syslog cannot be buffered"), std::string::npos) << out;
  EXPECT_NE(out.find("t.conf:4"), std::string::npos) << out;
  out = check(
      "events {}\nstream {\nlog_format s $status;\n"
      "server { listen 127.0.0.1:1; proxy_pass 127.0.0.1:2;\n"
      "  access_log syslog:server=127.0.0.1,severity=loud s; }\n}\n",
      &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("unknown syslog severity \"loud\""), std::string::npos) << out;
}

TEST_F(ErrorLog, StreamServerLevel) {
  const int closed = free_port();
  const int first = free_port();
  const int second = free_port();
  ASSERT_TRUE(server_.start_raw(
      "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
      "events { worker_connections 64; }\n"
      "stream {\n error_log logs/stream.log info;\n"
      " server { listen 127.0.0.1:" +
      std::to_string(first) + "; proxy_pass 127.0.0.1:" + std::to_string(closed) +
      "; error_log logs/s1.log info; }\n"
      " server { listen 127.0.0.1:" +
      std::to_string(second) + "; proxy_pass 127.0.0.1:" + std::to_string(closed) +
      "; }\n"
      "}\n"))
      << server_.output();
  {
    Client c(first);
    ASSERT_TRUE(c.ok());
    wait_file("logs/s1.log", "bytes from/to client");
  }
  {
    Client c(second);
    ASSERT_TRUE(c.ok());
    wait_file("logs/stream.log", "bytes from/to client");
  }
  const std::string s1 = server_.read("logs/s1.log");
  EXPECT_NE(s1.find("[error]"), std::string::npos) << s1;
  EXPECT_NE(s1.find("connect() failed"), std::string::npos) << s1;
  EXPECT_NE(s1.find("server: 127.0.0.1:" + std::to_string(first)), std::string::npos) << s1;
  const std::string st = server_.read("logs/stream.log");
  EXPECT_EQ(st.find(":" + std::to_string(first)), std::string::npos) << st;
  EXPECT_NE(st.find("connect() failed"), std::string::npos) << st;
  EXPECT_EQ(server_.output().find("connect() failed"), std::string::npos) << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(ErrorLog, MailServerLevel) {
  ASSERT_TRUE(server_.start_raw(
      "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
      "events { worker_connections 64; }\n"
      "mail {\n auth_http 127.0.0.1:1/auth;\n error_log logs/mail.log info;\n"
      " server { listen 127.0.0.1:0; protocol imap; error_log logs/imap.log info; }\n"
      " server { listen 127.0.0.1:0; protocol imap; }\n"
      "}\n"))
      << server_.output();
  std::vector<int> ports{server_.port(0), server_.port(1)};
  for (int port : ports) {
    Client c(port);
    ASSERT_TRUE(c.ok());
    ASSERT_NE(read_until(c.fd(), "\r\n", 3000).find("* OK"), std::string::npos);
  }
  // Each session's start and end, at info, in its server's log alone.
  const std::string one = ":" + std::to_string(ports[0]);
  const std::string two = ":" + std::to_string(ports[1]);
  const std::string imap = wait_file("logs/imap.log", "mail imap session of");
  const std::string mail = wait_file("logs/mail.log", "mail imap session of");
  EXPECT_NE(imap.find("connected to 127.0.0.1" + one), std::string::npos) << imap;
  EXPECT_EQ(imap.find("connected to 127.0.0.1" + two), std::string::npos) << imap;
  EXPECT_NE(mail.find("connected to 127.0.0.1" + two), std::string::npos) << mail;
  EXPECT_EQ(mail.find("connected to 127.0.0.1" + one), std::string::npos) << mail;
  EXPECT_EQ(server_.output().find("mail imap session of"), std::string::npos) << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

// Every main-level error_log gets the start-up line, which names Vigil and
// its version, not nginx (docs/compatibility.md: the "error global"
// assertions of stream_error_log.t and mail_error_log.t look for
// "nginx/<version>" there), with stream and mail blocks as with http.
TEST_F(ErrorLog, EveryGlobalLogNamesVigilAtStart) {
  for (const char* master : {"off", "on"}) {
    VigilServer server;
    ASSERT_TRUE(server.start_raw(
        std::string("daemon off;\nmaster_process ") + master +
            ";\nworker_processes 1;\nerror_log stderr info;\nerror_log logs/glob.log info;\n"
            "error_log logs/glob2.log info;\npid logs/vigil.pid;\n"
            "events { worker_connections 64; }\n"
            "stream {\n server { listen 127.0.0.1:0; proxy_pass 127.0.0.1:1; }\n}\n"
            "mail {\n auth_http 127.0.0.1:1/auth;\n"
            " server { listen 127.0.0.1:0; protocol imap; }\n}\n",
        "started"))
        << server.output();
    const std::string want = std::string("vigil/") + VIGIL_VERSION_STRING + " started";
    for (const char* file : {"logs/glob.log", "logs/glob2.log"}) {
      std::string text;
      EXPECT_TRUE(wait_until(
          [&] {
            text = server.read(file);
            return text.find(want) != std::string::npos;
          },
          3000))
          << master << " " << file << ": " << text;
      EXPECT_EQ(text.find("nginx/"), std::string::npos) << text;
    }
    EXPECT_EQ(server.stop(), 0);
  }
}

}  // namespace
}  // namespace vigil::test
