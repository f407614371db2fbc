// Pipelined requests over TLS to a proxied location. While the proxy waits
// for its backend it watches the client for an early close; with TLS the next
// request may already sit decrypted inside OpenSSL, where the socket shows
// nothing. That watch must not take the read readiness away, or the next
// request waits for bytes that never come.
#include <gtest/gtest.h>

#include <string>

#include "integration/proxy_backend.h"
#include "tls_harness.h"

namespace vigil {
namespace {

using test::Backend;
using test::TlsClient;
using test::TlsServer;

// A GET whose head is exactly `size` bytes (padded with a header).
std::string get_of_size(const std::string& target, std::size_t size) {
  std::string head = "GET " + target + " HTTP/1.1\r\nHost: localhost\r\nX-Pad: ";
  const std::size_t rest = std::string("\r\n\r\n").size();
  EXPECT_LT(head.size() + rest, size);
  head.append(size - head.size() - rest, 'p');
  head += "\r\n\r\n";
  return head;
}

class TlsProxyPipeline : public ::testing::TestWithParam<std::string> {};

TEST_P(TlsProxyPipeline, ARequestLeftInsideOpensslIsServedAfterTheProxiedOne) {
  Backend backend;
  TlsServer s;
  ASSERT_TRUE(s.pki_ok());
  int port = test::free_port();
  // client_header_buffer_size 1k (the default): the first request fills the
  // buffer exactly, so the second stays in OpenSSL's record buffer.
  const std::string conf =
      "access_log off;\n" +
      test::tls_server_block(port, "location / { proxy_pass http://" + backend.address() + "; }");
  ASSERT_TRUE(s.start(conf, "", "use " + GetParam() + ";")) << s.output();

  TlsClient c(port);
  ASSERT_TRUE(c.handshake()) << c.error();
  // Both requests in one record.
  ASSERT_TRUE(c.send(get_of_size("/first", 1024) + test::simple_get("/second")));
  auto r1 = c.read_response();
  ASSERT_TRUE(r1.complete);
  EXPECT_EQ(r1.body, "backend GET /first");
  auto r2 = c.read_response(false, 4000);
  ASSERT_TRUE(r2.complete) << "the pipelined request was not answered";
  EXPECT_EQ(r2.body, "backend GET /second");
  EXPECT_EQ(backend.requests(), 2);
}

INSTANTIATE_TEST_SUITE_P(Backends, TlsProxyPipeline,
                         ::testing::Values("epoll", "io_uring", "poll", "select"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace vigil
