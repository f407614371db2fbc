// proxy_pass with variables naming a host in stream: the server's
// `resolver` finds its addresses at run time, each tried once
// (proxy_next_upstream_tries counts them); nginx's statuses and lines when
// there is no port, no resolver, no such name or no answer.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <memory>
#include <regex>
#include <string>

#include "integration/http_harness.h"
#include "test_process.h"
#include "test_util.h"

namespace vigil::test {
namespace {

const std::string kDnsServer = std::string(VIGIL_SOURCE_DIR) + "/tests/integration/dns_server.py";

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

class StreamResolver : public ::testing::Test {
 protected:
  void SetUp() override {
    dns_ = std::make_unique<Process>(std::vector<std::string>{"python3", kDnsServer});
    ASSERT_TRUE(dns_->wait_for_output("DNS ", 15000)) << dns_->output();
    std::smatch m;
    const std::string out = dns_->output();
    ASSERT_TRUE(std::regex_search(out, m, std::regex("DNS (\\d+)"))) << out;
    dns_port_ = std::stoi(m[1]);
  }
  // The stream block `stream`, with a `return SEE-THIS` server on backend_.
  bool start(const std::string& stream) {
    return server_.start_raw(
        "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
        "events { worker_connections 256; }\nstream {\nlog_format st $status;\n"
        "server { listen 127.0.0.1:" +
        std::to_string(backend_) + "; return SEE-THIS; }\n" + stream + "\n}\n");
  }
  std::string resolver() const { return "resolver 127.0.0.1:" + std::to_string(dns_port_) + ";"; }
  static std::string listen(int port) { return "listen 127.0.0.1:" + std::to_string(port) + ";"; }
  // The status logged in logs/NAME.log, once there.
  std::string status_log(const std::string& name) {
    std::string text;
    wait_for([&] {
      text = read_file(server_.dir() + "/logs/" + name + ".log");
      return !text.empty();
    });
    return text;
  }

  std::unique_ptr<Process> dns_;
  int dns_port_ = 0;
  int backend_ = free_port();
  VigilServer server_;
};

TEST_F(StreamResolver, ANameIsResolvedAtRunTime) {
  const int port = free_port();
  ASSERT_TRUE(
      start(resolver() + "\nmap $server_port $up { default a.test:" + std::to_string(backend_) +
            "; }\nserver { " + listen(port) + " proxy_pass $up; access_log logs/a.log st; }"))
      << server_.output();
  EXPECT_EQ(exchange(port), "SEE-THIS");
  EXPECT_EQ(status_log("a"), "200\n");
  EXPECT_TRUE(dns_->wait_for_output("Q udp a.test A", 5000)) << dns_->output();
  // A second session is answered from the cache.
  EXPECT_EQ(exchange(port), "SEE-THIS");
  EXPECT_EQ(server_.stop(), 0);
}

// Each address once, in the reply's order (127.0.0.2 twice, refused, then
// 127.0.0.1): proxy_next_upstream_tries 2 stops short of the third.
TEST_F(StreamResolver, EachAddressIsATry) {
  const int three = free_port();
  const int two = free_port();
  const int all = free_port();
  ASSERT_TRUE(start(resolver() + "\nmap $server_port $host { default many.test; }\n" + "server { " +
                    listen(three) + " proxy_pass $host:" + std::to_string(backend_) +
                    "; proxy_next_upstream_tries 3; }\n"
                    "server { " +
                    listen(two) + " proxy_pass $host:" + std::to_string(backend_) +
                    "; proxy_next_upstream_tries 2; access_log logs/two.log st; }\n"
                    "server { " +
                    listen(all) + " proxy_pass $host:" + std::to_string(backend_) +
                    "; proxy_next_upstream_tries 0; }"))
      << server_.output();
  EXPECT_EQ(exchange(three), "SEE-THIS");
  EXPECT_EQ(exchange(two), "");
  EXPECT_EQ(status_log("two"), "502\n");
  EXPECT_EQ(exchange(all), "SEE-THIS");
  EXPECT_EQ(server_.stop(), 0);
}

// nginx's stream statuses: no port and no resolver are 500, a name that
// does not resolve or a resolver that does not answer 502.
TEST_F(StreamResolver, FailuresAreLoggedWithNginxsStatuses) {
  const int noport = free_port();
  const int nx = free_port();
  const int slow = free_port();
  const int none = free_port();
  ASSERT_TRUE(start("map $server_port $up { " + std::to_string(noport) + " a.test; " +
                    std::to_string(nx) + " nx.test:" + std::to_string(backend_) + "; " +
                    std::to_string(slow) + " slow.test:" + std::to_string(backend_) + "; " +
                    std::to_string(none) + " example.test:" + std::to_string(backend_) +
                    "; }\n"
                    "server { " +
                    listen(noport) + resolver() +
                    " proxy_pass $up; access_log logs/noport.log st; }\n"
                    "server { " +
                    listen(nx) + resolver() +
                    " proxy_pass $up; access_log logs/nx.log st; }\n"
                    "server { " +
                    listen(slow) + resolver() +
                    " resolver_timeout 300ms; proxy_pass $up; access_log logs/slow.log st; }\n"
                    "server { " +
                    listen(none) + " proxy_pass $up; access_log logs/none.log st; }"))
      << server_.output();
  EXPECT_EQ(exchange(noport), "");
  EXPECT_EQ(status_log("noport"), "500\n");
  EXPECT_TRUE(server_.wait_output("no port in upstream \"a.test\"")) << server_.output();
  EXPECT_EQ(exchange(nx), "");
  EXPECT_EQ(status_log("nx"), "502\n");
  EXPECT_TRUE(server_.wait_output("nx.test could not be resolved (3: Host not found)"))
      << server_.output();
  EXPECT_EQ(exchange(slow), "");
  EXPECT_EQ(status_log("slow"), "502\n");
  EXPECT_TRUE(server_.wait_output("slow.test could not be resolved (110: Operation timed out)"))
      << server_.output();
  EXPECT_EQ(exchange(none), "");
  EXPECT_EQ(status_log("none"), "500\n");
  EXPECT_TRUE(server_.wait_output("no resolver defined to resolve example.test"))
      << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

// The worker stops while a session waits for its name: the session ends
// and its query is forgotten (nothing touches the session's memory later).
TEST_F(StreamResolver, StoppingWhileResolving) {
  const int port = free_port();
  ASSERT_TRUE(
      start(resolver() + "\nmap $server_port $up { default slow.test:" + std::to_string(backend_) +
            "; }\nserver { " + listen(port) + " proxy_pass $up; access_log logs/gone.log st; }"))
      << server_.output();
  Client c(port);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(dns_->wait_for_output("Q udp slow.test A", 5000)) << dns_->output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(StreamResolver, ResolverErrorsNameFileAndLine) {
  server_.write("conf/t.conf",
                "events {}\nstream {\nresolver 127.0.0.1:53 valid=x;\nserver { listen 127.0.0.1:" +
                    std::to_string(free_port()) + "; return x; }\n}\n");
  auto [rc, out] = run({kVigil, "-p", server_.dir(), "-c", "conf/t.conf", "-t"});
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("invalid parameter \"valid=x\" in "), std::string::npos) << out;
  EXPECT_NE(out.find("t.conf:3"), std::string::npos) << out;
  server_.write("conf/t.conf",
                "events {}\nstream {\nresolver_timeout 1x;\nserver { listen 127.0.0.1:" +
                    std::to_string(free_port()) + "; return x; }\n}\n");
  std::tie(rc, out) = run({kVigil, "-p", server_.dir(), "-c", "conf/t.conf", "-t"});
  EXPECT_NE(rc, 0);
  EXPECT_EQ(out.find("unknown directive"), std::string::npos) << out;
  EXPECT_NE(out.find("t.conf:3"), std::string::npos) << out;
}

}  // namespace
}  // namespace vigil::test
