// The stream variables, end to end: `return` with variables, log_format and
// access_log (buffer=, flush=, if=, off, a path with variables), the
// upstream attempts in the log, `map`, and proxy_pass with variables, on a
// real vigil with real sockets.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <csignal>
#include <regex>
#include <string>

#include "integration/http_harness.h"
#include "integration/tcp_backend.h"
#include "test_util.h"

namespace vigil::test {
namespace {

// Everything the peer sends until it closes (or `timeout_ms` passed).
std::string read_to_eof(int fd, int timeout_ms = 5000) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  for (;;) {
    const long long left = ms_left(deadline);
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// What a stream server answers a fresh connection (after sending `data`).
std::string exchange(int port, const std::string& data = "") {
  Client c(port);
  if (!c.ok()) return "<no connection>";
  if (!data.empty() && !c.send(data)) return "<send failed>";
  return read_to_eof(c.fd());
}

// Reads "ack" after the client's first bytes, then closes.
class AckBackend : public TcpBackend {
 public:
  AckBackend()
      : TcpBackend([](int c) {
          char buf[4096];
          if (::read(c, buf, sizeof buf) > 0) (void)send_all(c, "ack");
        }) {}
};

class StreamVariables : public ::testing::Test {
 protected:
  // A configuration of a stream block `stream` (and no http block).
  bool start(const std::string& stream) {
    return server_.start_raw(
        "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
        "events { worker_connections 256; }\nstream {\n" +
        stream + "\n}\n");
  }
  std::string log_path(const std::string& name) { return server_.dir() + "/logs/" + name; }
  // Waits until the log has `lines` lines; its text.
  std::string wait_log(const std::string& name, std::size_t lines = 1) {
    std::string text;
    wait_for([&] {
      text = read_file(log_path(name));
      return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) >= lines;
    });
    return text;
  }
  // `vigil -t` on the stream block `stream`: the exit code and the output.
  std::pair<int, std::string> check(const std::string& stream) {
    server_.write("conf/t.conf", "events {}\nstream {\n" + stream + "\n}\n");
    return run({kVigil, "-p", server_.dir(), "-c", "conf/t.conf", "-t"});
  }
  static std::string listen(int port) {
    return "listen 127.0.0.1:" + std::to_string(port) + ";";
  }

  VigilServer server_;
};

TEST_F(StreamVariables, ReturnWritesTheConnectionsVariables) {
  const int port = free_port();
  ASSERT_TRUE(start("server { " + listen(port) +
                    " return \"$remote_addr|$server_addr|$server_port|$protocol|$status|"
                    "$nginx_version|${connection}x|$bytes_received|$realip_remote_addr\"; }"))
      << server_.output();
  const std::string got = exchange(port);
  EXPECT_TRUE(std::regex_match(got, std::regex("127\\.0\\.0\\.1\\|127\\.0\\.0\\.1\\|" +
                                               std::to_string(port) +
                                               "\\|TCP\\|200\\|1\\.22\\.1\\|\\d+x\\|0\\|127\\.0\\.0\\.1")))
      << got;
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(StreamVariables, AccessLogLineWhenTheSessionEnds) {
  AckBackend backend;
  ASSERT_TRUE(backend.ready());
  const int port = free_port();
  ASSERT_TRUE(start("log_format bytes \"$remote_addr $status $bytes_received $bytes_sent "
                    "$upstream_addr $upstream_bytes_sent $upstream_bytes_received\";\n"
                    "log_format times \"$upstream_connect_time $upstream_first_byte_time "
                    "$upstream_session_time $session_time\";\n"
                    "log_format clock $msec!$time_local!$time_iso8601!$pid!$hostname;\n"
                    "access_log logs/clock.log clock;\n"
                    "server { " +
                    listen(port) + " proxy_pass " + backend.addr() +
                    "; access_log logs/bytes.log bytes; access_log logs/times.log times; }"))
      << server_.output();
  EXPECT_EQ(exchange(port, "SEE-THIS"), "ack");
  EXPECT_EQ(wait_log("bytes.log"), "127.0.0.1 200 8 3 " + backend.addr() + " 8 3\n");
  const std::string times = wait_log("times.log");
  EXPECT_TRUE(std::regex_match(times, std::regex(R"(\d+\.\d{3} \d+\.\d{3} \d+\.\d{3} \d+\.\d{3}\n)")))
      << times;
  // A server's access_log replaces the stream block's: nothing there, but
  // the file was opened (created) at start, as nginx opens every log file.
  EXPECT_EQ(::access(log_path("clock.log").c_str(), F_OK), 0);
  EXPECT_EQ(read_file(log_path("clock.log")), "");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(StreamVariables, AccessLogOffConditionAndVariablePath) {
  AckBackend backend;
  ASSERT_TRUE(backend.ready());
  const int logged = free_port(), skipped = free_port(), off = free_port(), var = free_port();
  ASSERT_TRUE(start("log_format addr $server_port;\n"
                    "access_log logs/main.log addr;\n"
                    "map $server_port $logme { " + std::to_string(logged) + " 1; default 0; }\n"
                    "server { " + listen(logged) + " " + listen(skipped) +
                    " proxy_pass " + backend.addr() + "; access_log logs/if.log addr if=$logme; }\n"
                    "server { " + listen(off) + " proxy_pass " + backend.addr() +
                    "; access_log off; }\n"
                    "server { " + listen(var) + " proxy_pass " + backend.addr() +
                    "; access_log logs/var_$bytes_sent.log addr; }\n"))
      << server_.output();
  EXPECT_EQ(exchange(skipped, "x"), "ack");
  EXPECT_EQ(exchange(logged, "x"), "ack");
  EXPECT_EQ(exchange(off, "x"), "ack");
  EXPECT_EQ(exchange(var, "x"), "ack");
  EXPECT_EQ(wait_log("var_3.log"), std::to_string(var) + "\n");
  EXPECT_EQ(wait_log("if.log"), std::to_string(logged) + "\n");
  EXPECT_EQ(server_.stop(), 0);
  // Nothing from the server with "access_log off"; the stream block's log
  // served no server.
  EXPECT_EQ(read_file(log_path("main.log")), "");
}

TEST_F(StreamVariables, BufferedLogIsFlushedByItsTimer) {
  AckBackend backend;
  ASSERT_TRUE(backend.ready());
  const int port = free_port();
  ASSERT_TRUE(start("log_format addr \"$remote_addr $binary_remote_addr\";\n"
                    "server { " + listen(port) + " proxy_pass " + backend.addr() +
                    "; access_log logs/buf.log addr buffer=64k flush=100ms; }"))
      << server_.output();
  EXPECT_EQ(exchange(port, "x"), "ack");
  // Only the flush timer writes the line: the server keeps running.
  EXPECT_EQ(wait_log("buf.log"), "127.0.0.1 \\x7F\\x00\\x00\\x01\n");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(StreamVariables, EveryAttemptInTheUpstreamVariables) {
  AckBackend backend;
  ASSERT_TRUE(backend.ready());
  ClosedPort closed;
  const int port = free_port(), none = free_port();
  const std::string dead = "127.0.0.1:" + std::to_string(closed.port());
  ASSERT_TRUE(start("log_format ups \"$status $upstream_addr $upstream_bytes_sent "
                    "$upstream_connect_time\";\n"
                    "upstream u { server " + dead + "; server " + backend.addr() + "; }\n"
                    "upstream gone { server " + dead + " down; }\n"
                    "server { " + listen(port) + " proxy_pass u; access_log logs/u.log ups; }\n"
                    "server { " + listen(none) + " proxy_pass gone; access_log logs/gone.log ups; }\n"))
      << server_.output();
  EXPECT_EQ(exchange(port, "x"), "ack");
  const std::string u = wait_log("u.log");
  EXPECT_TRUE(std::regex_match(u, std::regex("200 " + dead + ", " + backend.addr() +
                                             R"( 0, 1 -, \d+\.\d{3}\n)")))
      << u;
  EXPECT_EQ(exchange(none, "x"), "");
  EXPECT_EQ(wait_log("gone.log"), "502 gone 0 -\n");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(StreamVariables, ProxyPassWithVariables) {
  AckBackend backend;
  ASSERT_TRUE(backend.ready());
  const int by_name = free_port(), by_addr = free_port(), bad = free_port(), name = free_port();
  ASSERT_TRUE(start("upstream " + std::to_string(by_name) + " { server " + backend.addr() + "; }\n"
                    "log_format ups $upstream_addr;\n"
                    "server { " + listen(by_name) + " proxy_pass $server_port; }\n"
                    "server { " + listen(by_addr) + " proxy_pass $server_addr:" +
                    std::to_string(backend.port()) + "; access_log logs/addr.log ups; }\n"
                    "log_format st \"$status $upstream_addr\";\n"
                    "server { " + listen(bad) + " proxy_pass $server_addr; "
                    "access_log logs/bad.log st; }\n"
                    "server { " + listen(name) + " proxy_pass x.invalid:$server_port; "
                    "access_log logs/name.log st; }\n"))
      << server_.output();
  EXPECT_EQ(exchange(by_name, "x"), "ack");
  EXPECT_EQ(exchange(by_addr, "x"), "ack");
  EXPECT_EQ(wait_log("addr.log"), backend.addr() + "\n");
  // No port: the session ends at once, with an error and no attempt; a
  // host name needs a resolver.
  EXPECT_EQ(exchange(bad, "x"), "");
  EXPECT_EQ(wait_log("bad.log"), "500 -\n");
  EXPECT_TRUE(server_.wait_output("no port in upstream \"127.0.0.1\"")) << server_.output();
  EXPECT_EQ(exchange(name, "x"), "");
  EXPECT_EQ(wait_log("name.log"), "500 -\n");  // nginx's stream: 500 (http's: 502)
  EXPECT_TRUE(server_.wait_output("no resolver defined to resolve x.invalid")) << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

// proxy_download_rate with variables: the value when the upstream is
// connected; 1 byte a second holds back all but the first byte of "ack" for
// a second, and "0" (as anything that is no size) is no limit.
TEST_F(StreamVariables, RateFromVariables) {
  AckBackend backend;
  ASSERT_TRUE(backend.ready());
  const int slow = free_port(), fast = free_port();
  ASSERT_TRUE(start("map $server_port $rate { " + std::to_string(slow) + " 1; default 0; }\n"
                    "proxy_download_rate $rate;\n"
                    "server { " + listen(slow) + " " + listen(fast) + " proxy_pass " +
                    backend.addr() + "; }\n"))
      << server_.output();
  EXPECT_EQ(exchange(fast, "x"), "ack");
  Client c(slow);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send("x"));
  EXPECT_EQ(read_n(c.fd(), 1), "a");
  EXPECT_TRUE(holds_for([&] { return !readable(c.fd(), 0); }, 300));
  EXPECT_EQ(read_to_eof(c.fd()), "ck");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(StreamVariables, MapWithCapturesAndDefault) {
  const int a = free_port(), b = free_port();
  ASSERT_TRUE(start("map $server_port $which { " + std::to_string(a) +
                    " first; \"~^(\\d)(?<rest>\\d+)$\" \"$1-$rest $protocol\"; }\n"
                    "map $which $upper { default none; FIRST one; }\n"
                    "server { " + listen(a) + " " + listen(b) + " return \"$which/$upper\"; }"))
      << server_.output();
  EXPECT_EQ(exchange(a), "first/one");
  // An expression's groups, by number and by name, in its value.
  const std::string bp = std::to_string(b);
  EXPECT_EQ(exchange(b), bp.substr(0, 1) + "-" + bp.substr(1) + " TCP/none");
  EXPECT_EQ(server_.stop(), 0);
}

// A reload is a configuration of its own: a map the running one declared
// is no variable of the new one, which is refused (the old one serves on).
TEST_F(StreamVariables, ReloadDoesNotSeeTheRunningConfigurationsMaps) {
  const int port = free_port();
  const std::string head =
      "daemon off;\nmaster_process on;\nworker_processes 1;\nerror_log stderr info;\n"
      "pid logs/vigil.pid;\nevents { worker_connections 256; }\nstream {\n";
  ASSERT_TRUE(server_.start_raw(head + "map $server_port $x { default old; }\nserver { " +
                                    listen(port) + " return $x; }\n}\n",
                                "running:"))
      << server_.output();
  EXPECT_EQ(exchange(port), "old");
  server_.write("conf/vigil.conf", head + "server { " + listen(port) + " return $x; }\n}\n");
  server_.process().signal(SIGHUP);
  EXPECT_TRUE(server_.wait_output("unknown \"x\" variable")) << server_.output();
  EXPECT_EQ(exchange(port), "old");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(StreamVariables, BadConfigurationsAreRefused) {
  const std::string srv = "server { " + listen(free_port()) + " ";
  auto [rc, out] = check(srv + "return $no_such; }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("unknown \"no_such\" variable"), std::string::npos) << out;
  std::tie(rc, out) = check(srv + "return x; access_log logs/a.log; }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("log format is not specified"), std::string::npos) << out;
  std::tie(rc, out) = check(srv + "return x; access_log logs/a.log nope; }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("unknown log format \"nope\""), std::string::npos) << out;
  std::tie(rc, out) = check("log_format f $status;\n" + srv +
                            "return x; access_log logs/$pid.log f buffer=4k; }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("buffered logs cannot have variables in name"), std::string::npos) << out;
  std::tie(rc, out) = check("log_format f $status;\nlog_format f $pid;\n" + srv + "return x; }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("duplicate log_format name \"f\""), std::string::npos) << out;
  std::tie(rc, out) = check("map $pid $remote_addr { default 1; }\n" + srv + "return x; }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("the duplicate \"remote_addr\" variable"), std::string::npos) << out;
  std::tie(rc, out) = check(srv + "proxy_pass $nothing_here; }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("unknown \"nothing_here\" variable"), std::string::npos) << out;
}

}  // namespace
}  // namespace vigil::test
