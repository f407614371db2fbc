// Tests for src/event/tls/socket_bio.cc and the error handling of tls_io.cc
// that relies on it: the TLS I/O functions over our own socket BIO.

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/sslerr.h>
#include <signal.h>

#include "tls_pair.h"

namespace vigil {
namespace {

using test::TestContexts;
using test::TestTlsPair;

class SocketBio : public ::testing::Test {
 protected:
  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);
    ASSERT_TRUE(ctx_.ok);
    pair_ = std::make_unique<TestTlsPair>(ctx_, nullptr);
    ASSERT_TRUE(pair_->ok);
    ERR_clear_error();
  }
  TestContexts ctx_;
  std::unique_ptr<TestTlsPair> pair_;
};

TEST_F(SocketBio, ARequestAndItsAnswerGoThrough) {
  ASSERT_EQ(BIO_method_name(SSL_get_rbio(pair_->tc.ssl)), std::string("vigil socket"));
  ASSERT_TRUE(pair_->client_write("GET / HTTP/1.1\r\n\r\n"));
  char buf[4096];
  ASSERT_EQ(tls_recv(pair_->c, buf, sizeof buf), 18);
  EXPECT_EQ(std::string(buf, 18), "GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(pair_->tc.drained, 1u) << "one short read(): the socket is empty";
  EXPECT_EQ(pair_->rev.ready, 0u) << "no second read() to meet EAGAIN";
  const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  ASSERT_EQ(tls_send(pair_->c, answer.data(), answer.size()), static_cast<long>(answer.size()));
  EXPECT_EQ(pair_->client_read_available(), answer);
  EXPECT_EQ(SSL_get_fd(pair_->tc.ssl), pair_->server_fd);
}

TEST_F(SocketBio, AnEmptySocketIsAgainNotAnError) {
  char buf[64];
  EXPECT_EQ(tls_recv(pair_->c, buf, sizeof buf), kIoAgain);
  EXPECT_EQ(pair_->rev.ready, 0u);
  EXPECT_EQ(pair_->c.error, 0u);
  EXPECT_EQ(pair_->tc.read_eof, 0u);
}

// tls_recv and tls_send do not clear the error queue before each call: an
// error some other code left there must not make a read that would block,
// or a write, look like a failure.
TEST_F(SocketBio, AStaleErrorInTheQueueChangesNothing) {
  ERR_raise(ERR_LIB_SSL, SSL_R_BAD_LENGTH);
  ASSERT_NE(ERR_peek_error(), 0u);
  char buf[64];
  EXPECT_EQ(tls_recv(pair_->c, buf, sizeof buf), kIoAgain);
  EXPECT_EQ(pair_->c.error, 0u);
  ASSERT_TRUE(pair_->client_write("abc"));
  pair_->rev.ready = 1;
  EXPECT_EQ(tls_recv(pair_->c, buf, sizeof buf), 3);
  EXPECT_EQ(tls_send(pair_->c, "xyz", 3), 3);
  EXPECT_EQ(pair_->client_read_available(), "xyz");
  EXPECT_EQ(pair_->c.error, 0u);
  ERR_clear_error();
}

TEST_F(SocketBio, ACloseWithoutCloseNotifyIsAnEof) {
  ASSERT_TRUE(pair_->client_write("last"));
  ASSERT_EQ(::shutdown(pair_->client_fd, SHUT_WR), 0);
  pair_->rev.pending_eof = 1;  // as EPOLLRDHUP reports it
  char buf[64];
  ASSERT_EQ(tls_recv(pair_->c, buf, sizeof buf), 4);
  EXPECT_EQ(tls_recv(pair_->c, buf, sizeof buf), 0);
  EXPECT_EQ(pair_->rev.eof, 1u);
  EXPECT_EQ(pair_->tc.read_eof, 1u) << "BIO_eof told OpenSSL it was the end, not a retry";
  EXPECT_EQ(pair_->c.error, 0u);
}

TEST_F(SocketBio, AForgedRecordIsAnErrorAndItsErrorsAreConsumed) {
  // An application-data record whose authentication tag cannot be right.
  unsigned char rec[5 + 40] = {0x17, 0x03, 0x03, 0x00, 40};
  for (std::size_t i = 5; i < sizeof rec; ++i) rec[i] = static_cast<unsigned char>(i);
  ASSERT_EQ(::write(pair_->client_fd, rec, sizeof rec), static_cast<ssize_t>(sizeof rec));
  char buf[64];
  EXPECT_EQ(tls_recv(pair_->c, buf, sizeof buf), kIoError);
  EXPECT_EQ(pair_->c.error, 1u);
  EXPECT_EQ(ERR_peek_error(), 0u) << "the failure's errors were logged and taken off the queue";
}

TEST_F(SocketBio, AWriteToAClosedPeerIsAnErrorNotASignal) {
  ::signal(SIGPIPE, SIG_DFL);  // MSG_NOSIGNAL, not the ignored signal, keeps us alive
  ::close(pair_->client_fd);
  pair_->client_fd = -1;
  const std::string big(256 * 1024, 'x');
  long n = 0;
  for (int i = 0; i < 64 && n >= 0; ++i) n = tls_send(pair_->c, big.data(), big.size());
  ::signal(SIGPIPE, SIG_IGN);
  EXPECT_EQ(n, kIoError);
  EXPECT_EQ(pair_->c.error, 1u);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

}  // namespace
}  // namespace vigil
