// ssl_preread end to end: `openssl s_client` connects through a stream
// server that reads the ClientHello without terminating TLS, routes it with
// `map $ssl_preread_server_name` (or the ALPN list) and `proxy_pass $var`
// to one of two TLS backends, which answer with their name and the SNI they
// saw (so the hello reached them unchanged). Also: the variables in the
// access log, a client that is not TLS, the preread buffer too small, and
// the directives' errors.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "integration/http_harness.h"
#include "integration/tcp_backend.h"
#include "integration/tls_harness.h"
#include "test_util.h"

namespace vigil::test {
namespace {

// What `openssl s_client` printed of the server's data (it reads until the
// server closes; -quiet leaves out the session's details).
std::string s_client(int port, const std::string& args) {
  const std::string cmd = "timeout 20 openssl s_client -connect 127.0.0.1:" + std::to_string(port) +
                          " -quiet -ign_eof " + args + " </dev/null 2>/dev/null";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return "<popen failed>";
  std::string out;
  char buf[512];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  ::pclose(f);
  return out;
}

std::string read_to_eof(int fd, int timeout_ms = 10000) {
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

class StreamSslPreread : public ::testing::Test {
 protected:
  // Two TLS backends, A (on a_) and B (an upstream group on b_), and the
  // stream servers `servers` in front of them.
  bool start(const std::string& head, const std::string& servers) {
    if (!s_.pki_ok()) return false;
    const std::string cert = "ssl_certificate ../server.crt; ssl_certificate_key ../server.key;";
    return s_.start_raw(
        "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
        "events { }\nstream {\n" +
        head + "\n  upstream backend_b { server 127.0.0.1:" + std::to_string(b_) + "; }\n" +
        "  server { listen 127.0.0.1:" + std::to_string(a_) + " ssl; " + cert +
        " return \"A $ssl_server_name\\n\"; }\n"
        "  server { listen 127.0.0.1:" +
        std::to_string(b_) + " ssl; " + cert + " return \"B $ssl_server_name\\n\"; }\n" + servers +
        "\n}\n");
  }
  std::string front_server(const std::string& more) {
    return "  server { listen 127.0.0.1:" + std::to_string(front_) + "; ssl_preread on; " + more +
           " }\n";
  }
  std::string wait_log_lines(const std::string& name, std::size_t lines) {
    std::string text;
    wait_for([&] {
      text = read_file(s_.dir() + "/logs/" + name);
      return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) >= lines;
    });
    return text;
  }
  // `vigil -t` on a stream block: the exit code and the output.
  std::pair<int, std::string> check(const std::string& stream) {
    s_.write("conf/t.conf", "events {}\nstream {\n" + stream + "\n}\n");
    return run({kVigil, "-p", s_.dir(), "-c", "conf/t.conf", "-t"});
  }

  TlsServer s_;
  int a_ = free_port();
  int b_ = free_port();
  int front_ = free_port();
};

TEST_F(StreamSslPreread, RoutesByServerNameToTwoTlsBackends) {
  ASSERT_TRUE(
      start("  map $ssl_preread_server_name $backend {\n"
            "    a.test 127.0.0.1:" +
                std::to_string(a_) +
                ";\n"
                "    b.test backend_b;\n"
                "    default 127.0.0.1:" +
                std::to_string(a_) + ";\n  }\n",
            front_server("proxy_pass $backend;")))
      << s_.output();
  for (const char* version : {"-tls1_2", "-tls1_3"}) {
    SCOPED_TRACE(version);
    EXPECT_EQ(s_client(front_, std::string(version) + " -servername a.test"), "A a.test\n");
    EXPECT_EQ(s_client(front_, std::string(version) + " -servername b.test -alpn h2"),
              "B b.test\n");
    EXPECT_EQ(s_client(front_, std::string(version) + " -noservername"), "A \n");
  }
  EXPECT_EQ(s_.stop(), 0);
}

TEST_F(StreamSslPreread, RoutesByAlpn) {
  ASSERT_TRUE(
      start("  map $ssl_preread_alpn_protocols $backend {\n"
            "    \"h2,http/1.1\" backend_b;\n"
            "    default 127.0.0.1:" +
                std::to_string(a_) + ";\n  }\n",
            front_server("proxy_pass $backend;")))
      << s_.output();
  EXPECT_EQ(s_client(front_, "-servername x.test -alpn h2,http/1.1"), "B x.test\n");
  EXPECT_EQ(s_client(front_, "-servername x.test -alpn http/1.1"), "A x.test\n");
  EXPECT_EQ(s_client(front_, "-servername x.test"), "A x.test\n");
}

TEST_F(StreamSslPreread, VariablesInTheAccessLog) {
  ASSERT_TRUE(
      start("  log_format hello \"$ssl_preread_protocol|$ssl_preread_server_name|"
            "$ssl_preread_alpn_protocols|$status\";\n",
            front_server("proxy_pass backend_b; access_log logs/hello.log hello;")))
      << s_.output();
  EXPECT_EQ(s_client(front_, "-tls1_2 -servername one.test -alpn foo,bar"), "B one.test\n");
  EXPECT_EQ(wait_log_lines("hello.log", 1), "TLSv1.2|one.test|foo,bar|200\n");
  EXPECT_EQ(s_client(front_, "-tls1_3 -noservername"), "B \n");
  EXPECT_EQ(wait_log_lines("hello.log", 2), "TLSv1.2|one.test|foo,bar|200\nTLSv1.3|||200\n");
}

// Not TLS: the session goes on at once with the variables empty, and the
// bytes read reach the upstream unchanged, the first and the later ones.
TEST_F(StreamSslPreread, NotTlsGoesOnWithEmptyVariables) {
  TcpBackend echo([](int fd) {
    std::string got;
    char buf[256];
    while (got.size() < 10) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return;
      got.append(buf, static_cast<std::size_t>(n));
    }
    (void)send_all(fd, "echo:" + got);
  });
  ASSERT_TRUE(echo.ready());
  const int relay = free_port();
  ASSERT_TRUE(
      start("", front_server("preread_timeout 60s; return \"[$ssl_preread_server_name]\";") +
                    "  server { listen 127.0.0.1:" + std::to_string(relay) +
                    "; ssl_preread on; proxy_pass " + echo.addr() + "; }\n"))
      << s_.output();
  Client c(front_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send("GET / HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(read_to_eof(c.fd()), "[]");
  Client d(relay);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d.send("hello"));
  ASSERT_TRUE(d.send("world"));
  EXPECT_EQ(read_to_eof(d.fd()), "echo:helloworld");
}

// A ClientHello longer than preread_buffer_size: the session ends with 400.
TEST_F(StreamSslPreread, PrereadBufferFull) {
  ASSERT_TRUE(start("  log_format st $status;\n",
                    front_server("preread_buffer_size 42; proxy_pass backend_b; "
                                 "access_log logs/st.log st;")))
      << s_.output();
  EXPECT_EQ(s_client(front_, "-servername a.test"), "");
  EXPECT_EQ(wait_log_lines("st.log", 1), "400\n");
  EXPECT_TRUE(s_.wait_log("preread buffer full")) << s_.output();
}

TEST_F(StreamSslPreread, DirectiveErrors) {
  const std::string srv = "server { listen 127.0.0.1:" + std::to_string(front_) + "; return x; ";
  auto [rc, out] = check(srv + "ssl_preread maybe; }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("t.conf:"), std::string::npos) << out;
  std::tie(rc, out) = check(srv + "preread_buffer_size 0; }");
  EXPECT_NE(rc, 0) << out;
  std::tie(rc, out) = check(srv + "preread_timeout x; }");
  EXPECT_NE(rc, 0) << out;
  std::tie(rc, out) =
      check("ssl_preread on; preread_buffer_size 1k; preread_timeout 5s;\n" + srv + "}");
  EXPECT_EQ(rc, 0) << out;
}

}  // namespace
}  // namespace vigil::test
