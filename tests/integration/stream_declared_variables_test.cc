// The variables a stream block declares besides `map`: `set` (server level,
// before limit_conn and the access rules, a map's value replaced for the
// session), `split_clients` (nginx's MurmurHash2 parts) and `geo` (CIDR and
// ranges, include, delete, default, a source variable, IPv6 and unix-domain
// clients), end to end on a real vigil with real sockets.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <string>

#include "integration/http_harness.h"
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

std::string exchange(int port) {
  Client c(port);
  if (!c.ok()) return "<no connection>";
  return read_to_eof(c.fd());
}

class StreamDeclaredVariables : public ::testing::Test {
 protected:
  bool start(const std::string& stream) {
    return server_.start_raw(
        "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
        "events { worker_connections 256; }\nstream {\n" +
        stream + "\n}\n");
  }
  // `vigil -t` on the stream block `stream`: the exit code and the output.
  std::pair<int, std::string> check(const std::string& stream) {
    server_.write("conf/t.conf", "events {}\nstream {\n" + stream + "\n}\n");
    return run({kVigil, "-p", server_.dir(), "-c", "conf/t.conf", "-t"});
  }
  // `stream` must be refused with `error` naming conf/t.conf and `line`.
  void refused(const std::string& stream, const std::string& error, int line) {
    auto [rc, out] = check(stream);
    EXPECT_NE(rc, 0) << stream;
    EXPECT_NE(out.find("[emerg] " + error), std::string::npos) << out;
    EXPECT_NE(out.find("t.conf:" + std::to_string(line)), std::string::npos) << error << "\n"
                                                                             << out;
  }
  static std::string listen(int port) { return "listen 127.0.0.1:" + std::to_string(port) + ";"; }

  VigilServer server_;
};

// nginx's stream_set.t: `set` runs in the order written, after the content
// handler's directive in the file; a map's value is replaced for the
// session; a variable only `set` declares is empty where nothing set it.
TEST_F(StreamDeclaredVariables, SetInOrderReplacingAMapsValue) {
  const int p1 = free_port();
  const int p2 = free_port();
  const int p3 = free_port();
  ASSERT_TRUE(start(
      "map 0 $map_var { default original; }\n"
      "server { " +
      listen(p1) +
      " return $map_var:$set_var; set $set_var $map_var; set $map_var new; }\n"
      "server { " +
      listen(p2) +
      " return \"[$set_var]\"; }\n"
      "server { " +
      listen(p3) + " set $who \"$remote_addr/$server_port\"; set $who \"<$who>\"; return $who; }"))
      << server_.output();
  EXPECT_EQ(exchange(p1), "new:original");
  EXPECT_EQ(exchange(p2), "[]");
  EXPECT_EQ(exchange(p3), "<127.0.0.1/" + std::to_string(p3) + ">");
  EXPECT_EQ(server_.stop(), 0);
}

// `set` comes before limit_conn (nginx's pre-access phase, set first), so
// its value can key a zone: every client shares one entry here.
TEST_F(StreamDeclaredVariables, SetBeforeLimitConn) {
  const int port = free_port();
  ASSERT_TRUE(start(
      "limit_conn_zone $key zone=z:1m;\nlog_format l \"$key $status\";\n"
      "server { " +
      listen(port) + " set $key all; limit_conn z 1; access_log logs/l.log l; return $key; }"))
      << server_.output();
  EXPECT_EQ(exchange(port), "all");
  std::string log;
  EXPECT_TRUE(wait_for([&] {
    log = read_file(server_.dir() + "/logs/l.log");
    return !log.empty();
  }));
  EXPECT_EQ(log, "all 200\n");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(StreamDeclaredVariables, SetErrorsNameFileAndLine) {
  const std::string srv = "server {\n" + listen(free_port()) + "\n";
  refused(srv + "set $remote_addr x;\nreturn x;\n}", "the duplicate \"remote_addr\" variable", 5);
  refused(srv + "set x y;\nreturn x;\n}", "invalid variable name \"x\"", 5);
  refused(srv + "set $a $nope;\nreturn x;\n}", "unknown \"nope\" variable", 5);
  // A name used, never declared: the line of its first use.
  refused(srv + "return $later;\n}\nserver {\n" + listen(free_port()) + "\nreturn $later;\n}",
          "unknown \"later\" variable", 5);
  refused("set $a 1;\n" + srv + "return x;\n}", "\"set\" directive is not allowed here", 3);
  refused(srv + "set $a;\nreturn x;\n}", "invalid number of arguments in \"set\" directive", 5);
}

// nginx's MurmurHash2 decides the part: "1" hashes to 28.6% of the space,
// "a" to 57.2%, "hello" to 89.6% (tests/unit/http/split_clients_test.cc).
TEST_F(StreamDeclaredVariables, SplitClientsParts) {
  const int p1 = free_port();
  const int p2 = free_port();
  const int p3 = free_port();
  ASSERT_TRUE(start("map $server_port $src { " + std::to_string(p1) + " 1; " + std::to_string(p2) +
                    " a; " + std::to_string(p3) +
                    " hello; }\n"
                    "split_clients $src $part { 30% low; 29.5% mid; * rest; }\n"
                    "split_clients \"${src}\" $short { 50% half; }\n"
                    "server { " +
                    listen(p1) +
                    " return $part:$short; }\n"
                    "server { " +
                    listen(p2) +
                    " return $part:$short; }\n"
                    "server { " +
                    listen(p3) + " return $part:$short; }"))
      << server_.output();
  EXPECT_EQ(exchange(p1), "low:half");
  EXPECT_EQ(exchange(p2), "mid:");
  EXPECT_EQ(exchange(p3), "rest:");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(StreamDeclaredVariables, SplitClientsErrorsNameFileAndLine) {
  const std::string srv = "server { " + listen(free_port()) + " return x; }\n";
  refused("split_clients $pid $v {\n60% a;\n50% b;\n}\n" + srv,
          "percent total is greater than 100%", 5);
  refused("split_clients $pid $v {\nx% a;\n}\n" + srv, "invalid percent value \"x%\"", 4);
  refused("split_clients $pid $v {\n10% a b;\n}\n" + srv,
          "invalid number of arguments in \"split_clients\" block", 4);
  refused("split_clients $pid $status {\n}\n" + srv, "the duplicate \"status\" variable", 3);
}

// nginx's stream_geo.t, shortened: the client is 127.0.0.1.
TEST_F(StreamDeclaredVariables, GeoNetworksAndRanges) {
  server_.write("conf/nets.conf", "127.0.0.0/8 loopback;\n");
  server_.write("conf/ranges.conf", "127.0.0.0-127.255.255.255 loopback;\n");
  const int port = free_port();
  const int other = free_port();
  ASSERT_TRUE(start(
      "geo $geo { 127.0.0.0/8 loopback; 127.0.0.1 host; 0.0.0.0/0 world; }\n"
      "geo $inc { include nets.conf; 0.0.0.0/0 world; }\n"
      "geo $del { 127.0.0.0/8 loopback; 0.0.0.0/0 world; delete 127.0.0.0/8; }\n"
      "geo $none { 192.0.2.0/24 test; }\n"
      "geo $r { ranges; default d; 127.0.0.0-127.0.0.255 test; 127.0.0.1-127.0.0.1 lo; }\n"
      "geo $rinc { ranges; default d; include ranges.conf; }\n"
      "geo $rdel { ranges; default d; 127.0.0.0-127.0.0.255 t; delete 127.0.0.1-127.0.0.1; }\n"
      "map $server_port $var { " +
      std::to_string(port) + " 192.0.2.9; " + std::to_string(other) +
      " \"::ffff:192.0.2.1\"; default junk; }\n"
      "geo $var $fromvar { default dflt; 192.0.2.0/24 test; }\n"
      "geo $var $fromvar_r { ranges; default dflt; 192.0.2.0-192.0.2.1 test; }\n"
      "server { " +
      listen(port) +
      " return \"$geo $inc $del [$none] $r $rinc $rdel $fromvar $fromvar_r\"; }\n"
      "server { " +
      listen(other) + " return \"$fromvar $fromvar_r\"; }"))
      << server_.output();
  EXPECT_EQ(exchange(port), "host loopback world [] lo loopback d test dflt");
  EXPECT_EQ(exchange(other), "test test");
  EXPECT_EQ(server_.stop(), 0);
}

// nginx's stream_geo_unix.t and stream_geo_ipv6.t: a unix-domain client, or
// a value that is no address, is 255.255.255.255; an IPv6 client is looked
// up in the IPv6 networks (and, with ranges, as 255.255.255.255).
TEST_F(StreamDeclaredVariables, GeoUnixAndIpv6Clients) {
  const int port = free_port();
  const int via6 = free_port();
  const int v6 = free_port();
  const std::string sock = server_.dir() + "/geo.sock";
  ASSERT_TRUE(
      start("geo $geo { default default; 255.255.255.255 none; ::1/128 six; }\n"
            "geo $remote_addr $geora { default default; 255.255.255.255 none; }\n"
            "geo $geor { ranges; 0.0.0.0-255.255.255.254 test; default none; }\n"
            "server { listen unix:" +
            sock +
            "; return \"$geo $geora $geor\"; }\n"
            "server { listen [::1]:" +
            std::to_string(v6) +
            "; return \"$geo $geora $geor\"; }\n"
            "server { " +
            listen(port) + " proxy_pass unix:" + sock +
            "; }\n"
            "server { " +
            listen(via6) + " proxy_pass [::1]:" + std::to_string(v6) + "; }"))
      << server_.output();
  EXPECT_EQ(exchange(port), "none none none");
  EXPECT_EQ(exchange(via6), "six default none");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(StreamDeclaredVariables, GeoErrorsNameFileAndLine) {
  const std::string srv = "server { " + listen(free_port()) + " return x; }\n";
  refused("geo $g {\n300.0.0.0/8 x;\n}\n" + srv, "invalid network \"300.0.0.0/8\"", 4);
  refused("geo $g {\nranges;\n10.0.0.0/8 x;\n}\n" + srv, "invalid range \"10.0.0.0/8\"", 5);
  refused("geo $g {\n10.0.0.0/8 x;\nranges;\n}\n" + srv, "\"ranges\" must come before", 5);
  // nginx's stream geo has no proxy.
  refused("geo $g {\nproxy 10.0.0.1;\n}\n" + srv, "invalid network \"proxy\"", 4);
  refused("geo $g {\nproxy_recursive;\n}\n" + srv, "invalid number of the geo parameters", 4);
  refused("geo $g {\ninclude missing.conf;\n}\n" + srv,
          "open() \"" + server_.dir() + "/conf/missing.conf\" failed", 4);
  refused("geo remote_addr $g {\n}\n" + srv, "invalid variable name \"remote_addr\"", 3);
  refused("geo $g {\n}\nserver {\nlisten 127.0.0.1:1;\ngeo $h { }\n}\n",
          "\"geo\" directive is not allowed here", 7);
}

}  // namespace
}  // namespace vigil::test
