// proxy_pass with variables and the resolver: the URL evaluated per
// request, names resolved by a real DNS server (dns_server.py: UDP and TCP,
// truncation, CNAMEs, errors, silence), the answers cached, and nginx's
// error lines when a name cannot be resolved.
#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <string>

#include "integration/http_harness.h"
#include "integration/proxy_backend.h"
#include "test_process.h"

namespace vigil::test {
namespace {

const std::string kDnsServer = std::string(VIGIL_SOURCE_DIR) + "/tests/integration/dns_server.py";

std::size_t count(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = hay.find(needle); at != std::string::npos;
       at = hay.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

class Resolver : public ::testing::Test {
 protected:
  void SetUp() override {
    dns_ = std::make_unique<Process>(std::vector<std::string>{"python3", kDnsServer});
    ASSERT_TRUE(dns_->wait_for_output("DNS ", 15000)) << dns_->output();
    std::smatch m;
    const std::string out = dns_->output();
    ASSERT_TRUE(std::regex_search(out, m, std::regex("DNS (\\d+)"))) << out;
    dns_port_ = std::stoi(m[1]);
  }

  std::string resolver() const { return "127.0.0.1:" + std::to_string(dns_port_); }

  bool start(const std::string& locations, const std::string& http = "") {
    port_ = free_port();
    return server_.start(http + "\nserver { listen 127.0.0.1:" + std::to_string(port_) +
                         "; server_name front; access_log off;\n" + locations + "\n}");
  }
  Response get(const std::string& target) {
    Client c(port_);
    if (!c.ok() || !c.send(simple_get(target, "front"))) return {};
    return c.read_response();
  }
  // The DNS server saw `needle` (a "Q udp name A" line) `n` times so far.
  bool dns_saw(const std::string& needle, std::size_t n = 1) {
    // Polls the server's output (read as it arrives) until n lines are there.
    for (int i = 0; i < 100 && count(dns_->output(), needle) < n; ++i) {
      dns_->wait_for_output("\x01\x02", 50);
    }
    return count(dns_->output(), needle) == n;
  }

  std::unique_ptr<Process> dns_;
  int dns_port_ = 0;
  VigilServer server_;
  Backend backend_;
  int port_ = 0;
};

TEST_F(Resolver, ANameInTheUrlIsResolvedAndProxiedWithTheClientsUri) {
  ASSERT_TRUE(start("location / { resolver " + resolver() + "; proxy_pass http://$arg_h:" +
                    std::to_string(backend_.port()) + "; }"))
      << server_.output();
  Response r = get("/some/path?h=a.test");
  ASSERT_EQ(r.status, 200) << r.head << server_.output();
  EXPECT_EQ(backend_.last().target, "/some/path?h=a.test");
  EXPECT_EQ(backend_.last().header("host"), "a.test:" + std::to_string(backend_.port()));
  // nginx 1.22 asks for both families by default.
  EXPECT_TRUE(dns_saw("Q udp a.test A\n"));
  EXPECT_TRUE(dns_saw("Q udp a.test AAAA\n"));
}

TEST_F(Resolver, AUriPartWithVariablesIsSentAsEvaluated) {
  ASSERT_TRUE(start("location /loc/ { resolver " + resolver() + "; proxy_pass http://a.test:" +
                    std::to_string(backend_.port()) + "/fixed$is_args$args; }"))
      << server_.output();
  Response r = get("/loc/x/y?k=v");
  ASSERT_EQ(r.status, 200) << r.head << server_.output();
  // No location prefix replaced: the evaluated URI as it is.
  EXPECT_EQ(backend_.last().target, "/fixed?k=v");
}

TEST_F(Resolver, AnswersAreCachedAndShared) {
  ASSERT_TRUE(start("location / { resolver " + resolver() + " ipv6=off; proxy_pass http://$arg_h:" +
                    std::to_string(backend_.port()) + "; }"))
      << server_.output();
  ASSERT_EQ(get("/?h=a.test").status, 200) << server_.output();
  ASSERT_EQ(get("/?h=A.test").status, 200) << server_.output();
  EXPECT_TRUE(dns_saw("Q udp a.test A\n", 1)) << dns_->output();
  EXPECT_EQ(count(dns_->output(), "AAAA"), 0u) << dns_->output();
  EXPECT_EQ(backend_.requests(), 2);
}

TEST_F(Resolver, ValidOverridesTheTtl) {
  // ttl0.test answers with TTL 0: without valid= every request asks again.
  ASSERT_TRUE(start("location /a { resolver " + resolver() + " ipv6=off; proxy_pass http://$arg_h:" +
                    std::to_string(backend_.port()) + "; }\n" + "location /b { resolver " +
                    resolver() + " ipv6=off valid=60s; proxy_pass http://$arg_h:" +
                    std::to_string(backend_.port()) + "; }"))
      << server_.output();
  ASSERT_EQ(get("/a?h=ttl0.test").status, 200);
  ASSERT_EQ(get("/a?h=ttl0.test").status, 200);
  EXPECT_TRUE(dns_saw("Q udp ttl0.test A\n", 2)) << dns_->output();
  ASSERT_EQ(get("/b?h=ttl0.test").status, 200);
  ASSERT_EQ(get("/b?h=ttl0.test").status, 200);
  EXPECT_TRUE(dns_saw("Q udp ttl0.test A\n", 3)) << dns_->output();
}

TEST_F(Resolver, ACnameIsFollowed) {
  ASSERT_TRUE(start("location / { resolver " + resolver() + "; proxy_pass http://$arg_h:" +
                    std::to_string(backend_.port()) + "; }"))
      << server_.output();
  ASSERT_EQ(get("/?h=alias.test").status, 200) << server_.output();
  EXPECT_TRUE(dns_saw("Q udp a.test A\n"));
  ASSERT_EQ(get("/?h=inline.test").status, 200) << server_.output();
  Response r = get("/?h=loop.test");
  EXPECT_EQ(r.status, 502);
  EXPECT_TRUE(server_.wait_log("loop.test could not be resolved (2: Server failure)"))
      << server_.output();
}

TEST_F(Resolver, BothFamiliesMakeOneAnswerAsNginxDoes) {
  ASSERT_TRUE(start("location / { resolver " + resolver() + "; proxy_pass http://$arg_h:" +
                    std::to_string(backend_.port()) + "; }"))
      << server_.output();
  // An error for either question is the name's, whatever the other gave.
  EXPECT_EQ(get("/?h=half.test").status, 502);
  EXPECT_TRUE(server_.wait_log("half.test could not be resolved (2: Server failure)"))
      << server_.output();
  // A CNAME for one question: the target is asked for every type.
  ASSERT_EQ(get("/?h=zc.test").status, 200) << server_.output();
  EXPECT_TRUE(dns_saw("Q udp a.test A\n"));
  EXPECT_TRUE(dns_saw("Q udp a.test AAAA\n"));
}

// As nginx's resolver: a CNAME is followed from the answer that completes the
// pair only. One that comes while the other question is out is dropped, and
// an empty answer after it leaves the name without addresses (nginx-tests'
// http_resolver_aaaa.t, "CNAME zero").
TEST_F(Resolver, ACnameBeforeAnEmptyAnswerIsNotFollowed) {
  ASSERT_TRUE(start("location / { resolver " + resolver() +
                    "; proxy_pass http://$arg_h:" + std::to_string(backend_.port()) + "; }"))
      << server_.output();
  EXPECT_EQ(get("/?h=cz.test").status, 502);
  EXPECT_TRUE(server_.wait_log("cz.test could not be resolved (3: Host not found)"))
      << server_.output();
  EXPECT_TRUE(dns_saw("Q udp cz.test AAAA\n"));
  EXPECT_TRUE(dns_saw("Q udp a.test A\n", 0));
}

TEST_F(Resolver, ATruncatedReplyIsAskedAgainOverTcp) {
  ASSERT_TRUE(start("location / { resolver " + resolver() + " ipv6=off; proxy_pass http://$arg_h:" +
                    std::to_string(backend_.port()) + "; }"))
      << server_.output();
  ASSERT_EQ(get("/?h=tc.test").status, 200) << server_.output();
  EXPECT_TRUE(dns_saw("Q udp tc.test A\n"));
  EXPECT_TRUE(dns_saw("Q tcp tc.test A\n"));
}

TEST_F(Resolver, AReplyWithAnotherIdIsIgnored) {
  ASSERT_TRUE(start("location / { resolver " + resolver() + " ipv6=off; proxy_pass http://$arg_h:" +
                    std::to_string(backend_.port()) + "; }"))
      << server_.output();
  ASSERT_EQ(get("/?h=badid.test").status, 200) << server_.output();
}

TEST_F(Resolver, FailuresAre502WithNginxsErrorLines) {
  ASSERT_TRUE(start("location / { resolver " + resolver() +
                    "; resolver_timeout 300ms; proxy_pass http://$arg_h:" +
                    std::to_string(backend_.port()) + "; }\n" +
                    "location /none { proxy_pass http://$arg_h:" + std::to_string(backend_.port()) +
                    "; }"))
      << server_.output();
  EXPECT_EQ(get("/?h=nx.test").status, 502);
  EXPECT_TRUE(server_.wait_log("nx.test could not be resolved (3: Host not found)"))
      << server_.output();
  // Errors are not cached (nginx neither): the next request asks again.
  EXPECT_EQ(get("/?h=nx.test").status, 502);
  EXPECT_TRUE(dns_saw("Q udp nx.test A\n", 2)) << dns_->output();
  EXPECT_EQ(get("/?h=fail.test").status, 502);
  EXPECT_TRUE(server_.wait_log("fail.test could not be resolved (2: Server failure)"))
      << server_.output();
  EXPECT_EQ(get("/?h=refused.test").status, 502);
  EXPECT_TRUE(server_.wait_log("refused.test could not be resolved (5: Operation refused)"));
  EXPECT_EQ(get("/?h=slow.test").status, 502);
  EXPECT_TRUE(server_.wait_log("slow.test could not be resolved (110: Operation timed out)"))
      << server_.output();
  EXPECT_EQ(get("/none?h=a.test").status, 502);
  EXPECT_TRUE(server_.wait_log("no resolver defined to resolve a.test")) << server_.output();
  EXPECT_EQ(backend_.requests(), 0);
}

TEST_F(Resolver, AddressesAndUpstreamBlocksNeedNoResolver) {
  ASSERT_TRUE(start("location / { proxy_pass http://$arg_h; proxy_set_header X-Port $proxy_port; }",
                    "upstream u { server " + backend_.address() + "; }"))
      << server_.output();
  Response r = get("/p?h=" + backend_.address() + "/q");
  ASSERT_EQ(r.status, 200) << r.head << server_.output();
  EXPECT_EQ(backend_.last().target, "/q");
  r = get("/p?h=u/r");
  ASSERT_EQ(r.status, 200) << r.head << server_.output();
  EXPECT_EQ(backend_.last().target, "/r");
  EXPECT_EQ(backend_.last().header("host"), "u");
  EXPECT_EQ(backend_.last().header("x-port"), "80");
  r = get("/p?h=" + backend_.address() + "/s");
  EXPECT_EQ(backend_.last().header("x-port"), std::to_string(backend_.port()));
}

TEST_F(Resolver, ABadUrlIs500) {
  ASSERT_TRUE(start("location / { proxy_pass $arg_u; }")) << server_.output();
  EXPECT_EQ(get("/?u=ftp://x/").status, 500);
  EXPECT_TRUE(server_.wait_log("invalid URL prefix in \"ftp://x/\"")) << server_.output();
  EXPECT_EQ(get("/?u=http://127.0.0.1:99999/").status, 500);
  EXPECT_TRUE(server_.wait_log("invalid port in upstream")) << server_.output();
}

TEST_F(Resolver, AClientThatLeavesWhileResolvingIsForgotten) {
  ASSERT_TRUE(start("location / { resolver " + resolver() + "; proxy_pass http://$arg_h:" +
                    std::to_string(backend_.port()) + "; }"))
      << server_.output();
  {
    Client c(port_);
    ASSERT_TRUE(c.ok() && c.send(simple_get("/?h=slow.test", "front")));
    ASSERT_TRUE(dns_->wait_for_output("Q udp slow.test A", 5000));
  }  // closed while the name is being resolved
  // The server goes on serving, and the same name later waits afresh.
  ASSERT_EQ(get("/?h=a.test").status, 200) << server_.output();
  EXPECT_TRUE(server_.running());
}

}  // namespace
}  // namespace vigil::test
