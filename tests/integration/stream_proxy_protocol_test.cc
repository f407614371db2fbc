// The stream proxy and the PROXY protocol: "listen ... proxy_protocol" with
// the variables in "return", set_real_ip_from (the stream realip module),
// "proxy_protocol on" toward the upstream carrying the client, the
// proxy_protocol_timeout, broken headers, and HAProxy as a real sender of
// version 2 headers.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <algorithm>

#include <string>

#include "integration/http_harness.h"
#include "integration/tcp_backend.h"
#include "test_process.h"
#include "test_util.h"

namespace vigil::test {
namespace {

const std::string kTcp4 = "PROXY TCP4 192.0.2.1 192.0.2.2 1234 5678\r\n";
const char* kReturn =
    "  return \"$proxy_protocol_addr:$proxy_protocol_port "
    "$proxy_protocol_server_addr:$proxy_protocol_server_port "
    "$remote_addr $realip_remote_addr\";\n";

// Everything the connection gives until EOF.
std::string answer(int port, const std::string& send) {
  Client c(port);
  if (!c.ok() || !c.send(send)) return "(no connection)";
  if (!c.closed_within(5000)) return "(not closed)";
  return c.extra();
}

// Answers each connection with the first line it read, then echoes the rest.
class FirstLineBackend : public TcpBackend {
 public:
  FirstLineBackend()
      : TcpBackend([](int c) {
          std::string got;
          char buf[4096];
          for (;;) {
            const ssize_t n = ::read(c, buf, sizeof buf);
            if (n <= 0) return;
            got.append(buf, static_cast<std::size_t>(n));
            if (got.find("close") != std::string::npos) break;
          }
          send_all(c, got);
        }) {}
};

class StreamProxyProtocol : public ::testing::Test {
 protected:
  VigilServer server_;
  // The port of the n-th "listening on" line.
  int port_at(std::size_t n) {
    const int p = server_.port(n);
    return p < 0 ? 0 : p;
  }
};

// A variable stream `return` does not know is an error at load (nginx's
// words), never text sent as written.
TEST_F(StreamProxyProtocol, ReturnRefusesUnknownVariables) {
  const auto fails = [&](const std::string& ret, const std::string& what) {
    server_.write("conf/t.conf", "events {}\nstream {\n server {\n  listen 127.0.0.1:0;\n  return \"" +
                                     ret + "\";\n }\n}\n");
    const auto [rc, out] = run({kVigil, "-p", server_.dir(), "-c", "conf/t.conf", "-t"});
    EXPECT_NE(rc, 0) << ret;
    EXPECT_NE(out.find(what), std::string::npos) << out;
  };
  fails("$no_such_variable", "unknown \"no_such_variable\" variable");
  fails("${remote_addr", "the closing bracket in \"remote_addr\" variable is missing");
}

TEST_F(StreamProxyProtocol, ReturnShowsTheHeaderOnItsListenerOnly) {
  ASSERT_TRUE(server_.start_raw(
      "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
      "events {}\nstream {\n server {\n  listen 127.0.0.1:0 proxy_protocol;\n"
      "  listen 127.0.0.1:0;\n" + std::string(kReturn) + " }\n}\n"))
      << server_.output();
  const int pp = port_at(0);
  const int plain = port_at(1);
  ASSERT_NE(pp, 0);
  ASSERT_NE(plain, 0);
  EXPECT_EQ(answer(pp, kTcp4), "192.0.2.1:1234 192.0.2.2:5678 127.0.0.1 127.0.0.1");
  EXPECT_EQ(answer(pp, "PROXY UNKNOWN\r\n"), ": : 127.0.0.1 127.0.0.1");
  EXPECT_EQ(answer(plain, ""), ": : 127.0.0.1 127.0.0.1");
  // A broken header: closed without an answer, nginx's log line.
  EXPECT_EQ(answer(pp, "HELLO\r\n"), "");
  EXPECT_TRUE(server_.wait_output("broken header: \"HELLO")) << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(StreamProxyProtocol, SetRealIpFromTrustsOnlyItsPeers) {
  ASSERT_TRUE(server_.start_raw(
      "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
      "events {}\nstream {\n server {\n  listen 127.0.0.1:0 proxy_protocol;\n"
      "  set_real_ip_from 127.0.0.0/8;\n" + std::string(kReturn) +
      " }\n server {\n  listen 127.0.0.1:0 proxy_protocol;\n  set_real_ip_from ::1;\n" +
      kReturn + " }\n}\n"))
      << server_.output();
  EXPECT_EQ(answer(port_at(0), kTcp4), "192.0.2.1:1234 192.0.2.2:5678 192.0.2.1 127.0.0.1");
  EXPECT_EQ(answer(port_at(1), kTcp4), "192.0.2.1:1234 192.0.2.2:5678 127.0.0.1 127.0.0.1");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(StreamProxyProtocol, ProxyProtocolOnSendsTheClientToTheUpstream) {
  FirstLineBackend backend;
  ASSERT_TRUE(backend.ready());
  ASSERT_TRUE(server_.start_raw(
      "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
      "events {}\nstream {\n proxy_protocol on;\n"
      " server {\n  listen 127.0.0.1:0;\n  proxy_pass " + backend.addr() + ";\n }\n"
      " server {\n  listen 127.0.0.1:0 proxy_protocol;\n  set_real_ip_from 127.0.0.1;\n"
      "  proxy_pass " + backend.addr() + ";\n }\n"
      " server {\n  listen 127.0.0.1:0;\n  proxy_protocol off;\n  proxy_pass " +
      backend.addr() + ";\n }\n}\n"))
      << server_.output();
  {
    Client c(port_at(0));
    ASSERT_TRUE(c.send("close"));
    sockaddr_in me{};
    socklen_t len = sizeof me;
    ASSERT_EQ(::getsockname(c.fd(), reinterpret_cast<sockaddr*>(&me), &len), 0);
    ASSERT_TRUE(c.closed_within(5000));
    EXPECT_EQ(c.extra(), "PROXY TCP4 127.0.0.1 127.0.0.1 " + std::to_string(ntohs(me.sin_port)) +
                             " " + std::to_string(port_at(0)) + "\r\nclose");
  }
  // Received from a trusted peer: the header's client goes on, toward the
  // address the client reached.
  EXPECT_EQ(answer(port_at(1), kTcp4 + "close"),
            "PROXY TCP4 192.0.2.1 127.0.0.1 1234 " + std::to_string(port_at(1)) + "\r\nclose");
  EXPECT_EQ(answer(port_at(2), "close"), "close");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(StreamProxyProtocol, AnIncompleteHeaderTimesOut) {
  ASSERT_TRUE(server_.start_raw(
      "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
      "events {}\nstream {\n server {\n  listen 127.0.0.1:0 proxy_protocol;\n"
      "  proxy_protocol_timeout 500ms;\n" + std::string(kReturn) + " }\n}\n"))
      << server_.output();
  EXPECT_EQ(answer(port_at(0), std::string("\r\n\r\n\0\r\nQUIT\n\x21", 13)), "");
  EXPECT_TRUE(server_.wait_output("client timed out while reading PROXY protocol"))
      << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

// nginx's stream reads the header in a session: one that is not a header
// ends it with $status 400 (at once, even before its line ends), one that
// does not come in time with 200; both are logged.
TEST_F(StreamProxyProtocol, AFailedHeaderIsALoggedSession) {
  ASSERT_TRUE(server_.start_raw(
      "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
      "events {}\nstream {\n log_format st $status;\n server {\n"
      "  listen 127.0.0.1:0 proxy_protocol;\n  proxy_protocol_timeout 300ms;\n"
      "  access_log logs/st.log st;\n" +
      std::string(kReturn) + " }\n}\n"))
      << server_.output();
  const auto log_has = [&](std::size_t lines) {
    std::string text;
    wait_for([&] {
      text = read_file(server_.dir() + "/logs/st.log");
      return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) >= lines;
    });
    return text;
  };
  EXPECT_EQ(answer(port_at(0), "HELLO\r\n"), "");
  EXPECT_EQ(log_has(1), "400\n");
  {
    // No line end yet, and the client waits: refused at once all the same.
    Client c(port_at(0));
    ASSERT_TRUE(c.send("PROXY INVALID"));
    EXPECT_TRUE(c.closed_within(5000));
  }
  EXPECT_EQ(log_has(2), "400\n400\n");
  EXPECT_EQ(answer(port_at(0), "PROXY TCP4 "), "");
  EXPECT_EQ(log_has(3), "400\n400\n200\n");
  EXPECT_TRUE(server_.wait_output("client timed out while reading PROXY protocol"))
      << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

// HAProxy in front, "send-proxy-v2" with TLVs: a real peer's v2 header. Its
// frontend is a unix socket (no port to guess), so the header says AF_UNIX:
// no addresses, and the bytes after it arrive intact.
TEST_F(StreamProxyProtocol, HaproxySendProxyV2) {
  FirstLineBackend backend;
  ASSERT_TRUE(backend.ready());
  ASSERT_TRUE(server_.start_raw(
      "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
      "events {}\nstream {\n server {\n  listen 127.0.0.1:0 proxy_protocol;\n" +
      std::string(kReturn) + " }\n}\n"))
      << server_.output();
  const std::string sock = server_.path("hap.sock");
  server_.write("haproxy.cfg",
                "global\n  log stderr local0 debug\ndefaults\n  mode tcp\n  timeout connect 5s\n"
                "  timeout client 5s\n  timeout server 5s\nfrontend f\n  bind unix@" + sock +
                    "\n  unique-id-format abc123\n  default_backend b\nbackend b\n"
                    "  server v 127.0.0.1:" + std::to_string(port_at(0)) +
                    " send-proxy-v2 proxy-v2-options crc32c,unique-id\n");
  Process hap({"haproxy", "-db", "-f", server_.path("haproxy.cfg")});
  ASSERT_TRUE(wait_for([&] { return ::access(sock.c_str(), F_OK) == 0; }, 10000)) << hap.output();
  std::string got;
  ASSERT_TRUE(wait_for(
      [&] {
        const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un un{};
        un.sun_family = AF_UNIX;
        std::snprintf(un.sun_path, sizeof un.sun_path, "%s", sock.c_str());
        if (::connect(fd, reinterpret_cast<sockaddr*>(&un), sizeof un) != 0) {
          ::close(fd);
          return false;
        }
        got = read_n(fd, 1 << 16, 5000);
        ::close(fd);
        return !got.empty();
      },
      10000))
      << hap.output() << server_.output();
  EXPECT_EQ(got, ": : 127.0.0.1 127.0.0.1") << server_.output();
  EXPECT_EQ(server_.output().find("broken header"), std::string::npos) << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

}  // namespace
}  // namespace vigil::test
