// TLS 1.2 renegotiation is refused (a client-initiated renegotiation costs
// the server a full handshake for the price of a record): the client's
// attempt fails, the connection does not go on with new keys, and the
// server keeps serving other connections.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tls_harness.h"

namespace vigil {
namespace {

using test::TlsClient;
using test::TlsServer;

TEST(TlsRenegotiation, AClientInitiatedRenegotiationIsRefused) {
  TlsServer s;
  ASSERT_TRUE(s.pki_ok());
  int port = test::free_port();
  s.write("html/index.html", "hello tls\n");
  ASSERT_TRUE(s.start("access_log off;\n" + test::tls_server_block(port))) << s.output();

  TlsClient c(port, {.max_version = TLS1_2_VERSION});
  ASSERT_TRUE(c.handshake()) << c.error();
  ASSERT_EQ(c.version(), "TLSv1.2");
  // One request first, so the connection is known to work before the attempt.
  ASSERT_TRUE(c.send(test::simple_get("/", "localhost")));
  auto first = c.read_response();
  ASSERT_TRUE(first.complete);
  EXPECT_EQ(first.body, "hello tls\n");

  ASSERT_EQ(SSL_renegotiate(c.ssl()), 1);
  // The client sends a new ClientHello; the server answers with a
  // no_renegotiation alert (or ends the connection). Either way the
  // renegotiation never completes.
  EXPECT_FALSE(c.handshake(3000)) << "the server accepted a renegotiation";

  // The server still serves a new connection.
  TlsClient next(port);
  ASSERT_TRUE(next.handshake()) << next.error();
  ASSERT_TRUE(next.send(test::simple_get("/", "localhost")));
  auto r = next.read_response();
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello tls\n");
}

}  // namespace
}  // namespace vigil
