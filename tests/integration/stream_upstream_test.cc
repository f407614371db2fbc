// The stream proxy on the upstream layer, end to end: weighted round-robin,
// backup servers, max_fails/fail_timeout, hash $remote_addr, health and
// counters shared by two workers through `zone`, and the directives stream
// does not have (keepalive).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>

#include "integration/http_harness.h"
#include "integration/tcp_backend.h"
#include "test_util.h"

namespace vigil::test {
namespace {

// Answers every connection with its name and closes it.
class NamedBackend : public TcpBackend {
 public:
  explicit NamedBackend(const std::string& name)
      : TcpBackend([name](int c) { (void)send_all(c, name); }) {}
};

std::string dead_addr() {
  return "127.0.0.1:" + std::to_string(free_port());
}

class StreamUpstream : public ::testing::Test {
 protected:
  bool start(const std::string& upstream_body) {
    port_ = free_port();
    return server_.start("", "stream {\n upstream u {\n" + upstream_body +
                                 "\n }\n server { listen 127.0.0.1:" + std::to_string(port_) +
                                 "; proxy_pass u; proxy_connect_timeout 2s; }\n}\n");
  }
  // One client: what the proxied backend said.
  std::string ask() {
    Client c(port_);
    if (!c.ok()) return "";
    return read_n(c.fd(), 100, 3000);
  }
  std::map<std::string, int> ask_n(int n) {
    std::map<std::string, int> seen;
    for (int i = 0; i < n; ++i) ++seen[ask()];
    return seen;
  }
  static int count(const std::string& text, const std::string& needle) {
    int n = 0;
    for (std::size_t p = 0; (p = text.find(needle, p)) != std::string::npos; p += needle.size())
      ++n;
    return n;
  }

  VigilServer server_;
  int port_ = 0;
};

TEST_F(StreamUpstream, WeightedRoundRobin) {
  NamedBackend a("A"), b("B");
  ASSERT_TRUE(a.ready() && b.ready());
  ASSERT_TRUE(start("server " + a.addr() + " weight=2;\n server " + b.addr() + ";"))
      << server_.output();
  auto seen = ask_n(30);
  EXPECT_EQ(seen["A"], 20);
  EXPECT_EQ(seen["B"], 10);
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(StreamUpstream, BackupOnlyWhenThePrimariesAreGone) {
  NamedBackend a("A"), b("B");
  ASSERT_TRUE(a.ready() && b.ready());
  ASSERT_TRUE(start("server " + a.addr() + ";\n server " + b.addr() + " backup;"))
      << server_.output();
  auto seen = ask_n(6);
  EXPECT_EQ(seen["A"], 6);
  EXPECT_EQ(b.accepted(), 0);
  EXPECT_EQ(server_.stop(), 0);

  ASSERT_TRUE(start("server " + dead_addr() + ";\n server " + b.addr() + " backup;"))
      << server_.output();
  seen = ask_n(6);
  EXPECT_EQ(seen["B"], 6);
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(StreamUpstream, MaxFailsTakesADeadServerOutForFailTimeout) {
  NamedBackend a("A");
  ASSERT_TRUE(a.ready());
  const std::string dead = dead_addr();
  ASSERT_TRUE(start("server " + dead + " max_fails=1 fail_timeout=60s;\n server " + a.addr() + ";"))
      << server_.output();
  // Every client reaches A; the dead server is tried once, then skipped.
  auto seen = ask_n(10);
  EXPECT_EQ(seen["A"], 10);
  EXPECT_EQ(server_.stop(), 0);
  const std::string out = server_.output();
  EXPECT_EQ(count(out, "upstream server temporarily disabled, upstream: " + dead), 1) << out;
}

TEST_F(StreamUpstream, MaxFailsZeroKeepsTryingTheDeadServer) {
  NamedBackend a("A");
  ASSERT_TRUE(a.ready());
  const std::string dead = dead_addr();
  ASSERT_TRUE(start("server " + dead + " max_fails=0;\n server " + a.addr() + ";"))
      << server_.output();
  auto seen = ask_n(6);
  EXPECT_EQ(seen["A"], 6);
  EXPECT_EQ(server_.stop(), 0);
  // Round-robin puts every other first try on the dead server.
  EXPECT_EQ(count(server_.output(), "upstream " + dead + " refused the connection") +
                count(server_.output(), "connect() failed while connecting to upstream " + dead),
            3)
      << server_.output();
}

TEST_F(StreamUpstream, HashOfTheRemoteAddressSticks) {
  NamedBackend a("A"), b("B"), c("C");
  ASSERT_TRUE(a.ready() && b.ready() && c.ready());
  ASSERT_TRUE(start("hash $remote_addr;\n server " + a.addr() + ";\n server " + b.addr() +
                    ";\n server " + c.addr() + ";"))
      << server_.output();
  auto seen = ask_n(12);
  EXPECT_EQ(seen.size(), 1u) << "one client address, one server";
  EXPECT_EQ(seen.begin()->second, 12);
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(StreamUpstream, HashOfTheRemotePortSpreads) {
  NamedBackend a("A"), b("B"), c("C");
  ASSERT_TRUE(a.ready() && b.ready() && c.ready());
  ASSERT_TRUE(start("hash \"$remote_addr:$remote_port\" consistent;\n server " + a.addr() +
                    ";\n server " + b.addr() + ";\n server " + c.addr() + ";"))
      << server_.output();
  auto seen = ask_n(30);
  EXPECT_GE(seen.size(), 2u) << "client ports differ, so do the servers";
  EXPECT_EQ(seen[""], 0);
  EXPECT_EQ(server_.stop(), 0);
}

// A key that is empty for this connection ($proxy_protocol_addr without a
// PROXY protocol header) is balanced round-robin, as nginx, with and without
// `consistent` (nginx-tests stream_upstream_hash.t).
TEST_F(StreamUpstream, HashOfAnEmptyKeyIsRoundRobin) {
  for (const char* method :
       {"hash $proxy_protocol_addr;", "hash $proxy_protocol_addr consistent;"}) {
    NamedBackend a("A"), b("B");
    ASSERT_TRUE(a.ready() && b.ready());
    ASSERT_TRUE(
        start(std::string(method) + "\n server " + a.addr() + ";\n server " + b.addr() + ";"))
        << server_.output();
    auto seen = ask_n(4);
    EXPECT_EQ(seen["A"], 2) << method;
    EXPECT_EQ(seen["B"], 2) << method;
    EXPECT_EQ(server_.stop(), 0);
  }
}

TEST(StreamUpstreamConf, KeepaliveAndIpHashAreHttpOnly) {
  VigilServer s;
  auto check = [&](const std::string& stream, const std::string& want) {
    s.write("conf/t.conf", "events {}\n" + stream);
    auto [rc, out] = run({kVigil, "-t", "-p", s.dir(), "-c", "conf/t.conf"});
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find(want), std::string::npos) << out;
  };
  check("stream {\nupstream u { server 127.0.0.1:1; keepalive 4; } }",
        "\"keepalive\" directive is not allowed here in " + s.dir() + "/conf/t.conf:3");
  check("stream {\nupstream u { ip_hash; server 127.0.0.1:1; } }",
        "\"ip_hash\" directive is not allowed here in " + s.dir() + "/conf/t.conf:3");
  check("stream {\nupstream u {\n hash $remote_addr;\n server 127.0.0.1:1 backup;\n} }",
        "balancing method does not support parameter \"backup\" in " + s.dir() + "/conf/t.conf:5");
}

// Two workers, one zone: a failure seen by whichever worker took the client
// disables the server for both; the counters in /metrics are the sum.
TEST(StreamUpstreamWorkers, ZoneSharesHealthAndCountersAcrossWorkers) {
  NamedBackend a("A");
  ASSERT_TRUE(a.ready());
  const std::string dead = dead_addr();
  const int sport = free_port(), hport = free_port();
  VigilServer server;
  server.write("conf/vigil.conf",
               "daemon off;\nmaster_process on;\nworker_processes 2;\nerror_log stderr info;\n"
               "pid logs/vigil.pid;\nevents { worker_connections 128; }\n"
               "http { upstream h { server 127.0.0.1:1 weight=3; }\n server { listen 127.0.0.1:" +
                   std::to_string(hport) +
                   "; location = /metrics { metrics; } } }\n"
                   "stream {\n upstream u {\n  zone u 64k;\n  server " +
                   dead + " max_fails=1 fail_timeout=60s;\n  server " + a.addr() +
                   ";\n }\n server { listen 127.0.0.1:" + std::to_string(sport) +
                   "; proxy_pass u; }\n}\n");
  Process proc({kVigil, "-p", server.dir(), "-c", "conf/vigil.conf"});
  ASSERT_TRUE(proc.wait_for_output("started")) << proc.output();
  // Both workers are up once each has published its figures.
  ASSERT_TRUE(run_until(
      [] { ::usleep(20000); },
      [&] {
        Response r = get(hport, simple_get("/metrics"));
        std::size_t n = 0;
        for (std::size_t p = 0;
             (p = r.body.find("vigil_worker_connections_max{", p)) != std::string::npos; ++p)
          ++n;
        return n >= 2;
      }));
  int answered = 0;
  for (int i = 0; i < 20; ++i) {
    Client c(sport);
    answered += read_n(c.fd(), 10, 3000) == "A";
  }
  EXPECT_EQ(answered, 20);
  Response m = get(hport, simple_get("/metrics"));
  const std::string labels = "{protocol=\"stream\",upstream=\"u\",server=\"";
  EXPECT_NE(m.body.find("vigil_upstream_requests_total" + labels + a.addr() + "\"} 20\n"),
            std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find("vigil_upstream_failures_total" + labels + dead + "\"} 1\n"),
            std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find("vigil_upstream_up" + labels + dead + "\"} 0\n"), std::string::npos)
      << m.body;
  // http's upstream blocks are the same layer's, in the same families.
  EXPECT_NE(m.body.find("vigil_upstream_requests_total{protocol=\"http\",upstream=\"h\",server="
                        "\"127.0.0.1:1\"} 0\n"),
            std::string::npos)
      << m.body;
  proc.signal(SIGTERM);
  EXPECT_EQ(proc.wait(), 0);
  // The dead server was tried once in all, not once per worker.
  const std::string& out = proc.output();
  int disabled = 0;
  const std::string needle = "upstream server temporarily disabled, upstream: " + dead;
  for (std::size_t p = 0; (p = out.find(needle, p)) != std::string::npos; p += needle.size())
    ++disabled;
  EXPECT_EQ(disabled, 1) << out;
}

}  // namespace
}  // namespace vigil::test
