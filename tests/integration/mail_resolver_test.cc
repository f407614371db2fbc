// SMTP's client name (resolver in mail): the PTR name of the client's
// address, kept when that name's addresses include the client's, goes to
// auth_http as Client-Host; nginx's placeholders when it cannot be known.
#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <string>

#include "integration/mail_harness.h"
#include "test_process.h"

namespace vigil::test {
namespace {

const std::string kDnsServer = std::string(VIGIL_SOURCE_DIR) + "/tests/integration/dns_server.py";

class MailResolver : public MailTest {
 protected:
  void SetUp() override {
    MailTest::SetUp();
    dns_ = std::make_unique<Process>(std::vector<std::string>{"python3", kDnsServer});
    ASSERT_TRUE(dns_->wait_for_output("DNS ", 15000)) << dns_->output();
    std::smatch m;
    const std::string out = dns_->output();
    ASSERT_TRUE(std::regex_search(out, m, std::regex("DNS (\\d+)"))) << out;
    dns_port_ = std::stoi(m[1]);
  }
  bool start_smtp(const std::string& extra) {
    return start(" server {\n  listen 127.0.0.1:0;\n  protocol smtp;\n" + extra + " }\n");
  }
  std::unique_ptr<Process> dns_;
  int dns_port_ = 0;
};

TEST_F(MailResolver, TheClientsNameGoesToAuthHttp) {
  ASSERT_TRUE(start_smtp("  resolver 127.0.0.1:" + std::to_string(dns_port_) + " ipv6=off;\n"))
      << server_.output();
  expect_client("smtp", server_.port());
  EXPECT_TRUE(peers_saw("client=127.0.0.1 host=a.test")) << peers_output();
  EXPECT_TRUE(dns_->wait_for_output("Q udp 1.0.0.127.in-addr.arpa PTR", 5000)) << dns_->output();
  EXPECT_TRUE(dns_->wait_for_output("Q udp a.test A", 5000)) << dns_->output();
}

TEST_F(MailResolver, AnUnansweredLookupIsTemporarilyUnavailable) {
  // A port nobody answers on: the lookup times out.
  const int silent = free_port();
  ASSERT_TRUE(start_smtp("  resolver 127.0.0.1:" + std::to_string(silent) +
                         ";\n  resolver_timeout 300ms;\n"))
      << server_.output();
  expect_client("smtp", server_.port());
  EXPECT_TRUE(peers_saw("client=127.0.0.1 host=[TEMPUNAVAIL]")) << peers_output();
  EXPECT_TRUE(server_.wait_output("127.0.0.1 could not be resolved (110: Operation timed out)"))
      << server_.output();
}

// A reply whose only record for the reverse name is a DNAME (which renames
// the names below its owner, not the owner: RFC 6672 §2.3) answers nothing:
// a temporary failure, as nginx ends it, not "no such name".
TEST_F(MailResolver, AReplyWithoutAPtrRecordIsTemporarilyUnavailable) {
  Process dname({"python3", kDnsServer, "ptr-dname"});
  ASSERT_TRUE(dname.wait_for_output("DNS ", 15000)) << dname.output();
  std::smatch m;
  const std::string out = dname.output();
  ASSERT_TRUE(std::regex_search(out, m, std::regex("DNS (\\d+)"))) << out;
  ASSERT_TRUE(start_smtp("  resolver 127.0.0.1:" + std::string(m[1]) + ";\n")) << server_.output();
  expect_client("smtp", server_.port());
  EXPECT_TRUE(peers_saw("client=127.0.0.1 host=[TEMPUNAVAIL]")) << peers_output();
  EXPECT_TRUE(server_.wait_output("no PTR type in DNS response for \"1.0.0.127.in-addr.arpa\""))
      << server_.output();
}

TEST_F(MailResolver, WithoutAResolverTheNameIsUnavailable) {
  ASSERT_TRUE(start_smtp("")) << server_.output();
  expect_client("smtp", server_.port());
  EXPECT_TRUE(peers_saw("client=127.0.0.1 host=[UNAVAILABLE]")) << peers_output();
}

}  // namespace
}  // namespace vigil::test
