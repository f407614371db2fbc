// Tests for src/event/tls/tls_io.cc: the TLS I/O functions on hand-built
// connections over socketpairs. The handshake is done here with plain
// OpenSSL calls (both ends in this process); the connection under test is
// the server end with the TLS functions installed, as after tls_start_server.

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "event/tls/tls.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/loop.h"

namespace vigil {
namespace {

// A self-signed P-256 certificate made in memory.
struct Identity {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  Identity() {
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("unit"), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    X509_sign(cert, key, EVP_sha256());
  }
  ~Identity() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
};

class TlsIo : public ::testing::Test {
 protected:
  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    server_fd_ = sv[0];
    client_fd_ = sv[1];
    sctx_ = SSL_CTX_new(TLS_server_method());
    ASSERT_EQ(SSL_CTX_use_certificate(sctx_, id_.cert), 1);
    ASSERT_EQ(SSL_CTX_use_PrivateKey(sctx_, id_.key), 1);
    SSL_CTX_set_mode(sctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(sctx_, SSL_OP_IGNORE_UNEXPECTED_EOF);
    cctx_ = SSL_CTX_new(TLS_client_method());
    server_ = SSL_new(sctx_);
    client_ = SSL_new(cctx_);
    SSL_set_fd(server_, server_fd_);
    SSL_set_fd(client_, client_fd_);
    SSL_set_accept_state(server_);
    SSL_set_connect_state(client_);
    // Both ends step until both are done (nonblocking sockets).
    bool s_done = false, c_done = false;
    for (int i = 0; i < 1000 && !(s_done && c_done); ++i) {
      if (!c_done) c_done = SSL_do_handshake(client_) == 1;
      if (!s_done) s_done = SSL_do_handshake(server_) == 1;
    }
    ASSERT_TRUE(s_done && c_done);

    tc_.ssl = server_;
    tc_.handshaked = 1;
    c_.fd = server_fd_;
    c_.read = &rev_;
    c_.write = &wev_;
    c_.ssl = &tc_;
    c_.recv = tls_recv;
    c_.send = tls_send;
    c_.recv_chain = tls_recv_chain;
    c_.send_chain = tls_send_chain;
    rev_.data = wev_.data = &c_;
    wev_.write = 1;
    rev_.ready = wev_.ready = 1;
  }
  void TearDown() override {
    if (tc_.stage != nullptr) std::free(tc_.stage);
    SSL_free(server_);
    SSL_free(client_);
    SSL_CTX_free(sctx_);
    SSL_CTX_free(cctx_);
    ::close(server_fd_);
    ::close(client_fd_);
  }

  void client_write(const std::string& data) {
    std::size_t n = 0;
    ASSERT_EQ(SSL_write_ex(client_, data.data(), data.size(), &n), 1);
    ASSERT_EQ(n, data.size());
  }
  // Reads what the client can now (0 bytes when nothing is ready).
  std::string client_read_available() {
    std::string out;
    char buf[16384];
    for (;;) {
      std::size_t n = 0;
      if (SSL_read_ex(client_, buf, sizeof buf, &n) != 1) break;
      out.append(buf, n);
    }
    return out;
  }

  Identity id_;
  int server_fd_ = -1, client_fd_ = -1;
  SSL_CTX* sctx_ = nullptr;
  SSL_CTX* cctx_ = nullptr;
  SSL* server_ = nullptr;
  SSL* client_ = nullptr;
  TlsConnection tc_;
  Event rev_, wev_;
  Connection c_;
};

TEST_F(TlsIo, AFullBufferKeepsReadyAndPostsWhatOpensslStillHolds) {
  EventLoopConfig cfg;
  cfg.connections = 8;
  auto loop = EventLoop::create(cfg, Log::global());
  ASSERT_TRUE(loop);
  c_.loop = loop.value().get();

  client_write(std::string(3000, 'x'));  // one record
  char buf[100];
  ASSERT_EQ(tls_recv(c_, buf, sizeof buf), 100);
  EXPECT_EQ(rev_.ready, 1u) << "more is there: the caller must come back";
  EXPECT_EQ(rev_.posted, 1u) << "plaintext inside OpenSSL raises no event: posted_next carries it";
  EXPECT_EQ(loop.value()->posted_next().front(), &rev_);
  PostedQueue::remove(rev_);

  char rest[4096];
  ASSERT_EQ(tls_recv(c_, rest, sizeof rest), 2900);
  EXPECT_EQ(rev_.ready, 0u) << "drained: wait for the socket";
  EXPECT_EQ(rev_.posted, 0u);
  EXPECT_EQ(tls_recv(c_, rest, sizeof rest), kIoAgain);
  c_.loop = nullptr;
}

TEST_F(TlsIo, CloseNotifyAndABareCloseReadAsEof) {
  client_write("last");
  ASSERT_EQ(SSL_shutdown(client_), 0);  // close_notify sent
  char buf[64];
  ASSERT_EQ(tls_recv(c_, buf, sizeof buf), 4);
  EXPECT_EQ(tls_recv(c_, buf, sizeof buf), 0);
  EXPECT_EQ(rev_.eof, 1u);
  EXPECT_EQ(c_.error, 0u);
}

TEST_F(TlsIo, PeerCloseWithoutNotifyIsEof) {
  ::shutdown(client_fd_, SHUT_WR);
  char buf[64];
  EXPECT_EQ(tls_recv(c_, buf, sizeof buf), 0);
  EXPECT_EQ(rev_.eof, 1u);
}

TEST_F(TlsIo, AForgedRecordIsAnError) {
  // An application-data record whose authentication tag cannot be right.
  std::string forged = "\x17\x03\x03\x00\x20";
  forged += std::string(32, '\x55');
  ASSERT_EQ(::send(client_fd_, forged.data(), forged.size(), 0),
            static_cast<ssize_t>(forged.size()));
  char buf[64];
  EXPECT_EQ(tls_recv(c_, buf, sizeof buf), kIoError);
  EXPECT_EQ(c_.error, 1u);
  ERR_clear_error();
}

TEST_F(TlsIo, AFileGoesOutThroughABoundedBufferAndArrivesIntact) {
  char path[] = "/tmp/vigil_tls_io_XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::unlink(path);
  std::string content(300 * 1024, '\0');
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 31 + 7);
  ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));

  std::string head = "HEADER\r\n";
  Buf h;
  h.reset(head.data(), head.size());
  h.last = h.start + head.size();
  Buf f;
  f.in_file = true;
  f.file_fd = fd;
  f.file_pos = 0;
  f.file_last = static_cast<off_t>(content.size());
  Chain c2{&f, nullptr};
  Chain c1{&h, &c2};

  std::string got;
  Chain* rest = &c1;
  int rounds = 0;
  while (rest != nullptr && rounds++ < 10000) {
    wev_.ready = 1;
    rest = tls_send_chain(c_, rest, 0);
    ASSERT_NE(rest, kChainError);
    if (rest != nullptr) {
      EXPECT_NE(tc_.stage, nullptr);
      EXPECT_EQ(wev_.ready, 0u) << "stopped only because the socket was full";
    }
    got += client_read_available();
  }
  ASSERT_EQ(rest, nullptr);
  EXPECT_EQ(tc_.stage, nullptr) << "the file buffer is given back once the file is sent";
  for (int i = 0; i < 100 && got.size() < head.size() + content.size(); ++i) {
    got += client_read_available();
  }
  EXPECT_EQ(got, head + content);
  EXPECT_GT(rounds, 1) << "the socketpair's buffer must have filled at least once";
  ::close(fd);
}

TEST_F(TlsIo, APartialWriteIsCompletedFromWhereTheBufferMovedTo) {
  std::string data(1 << 20, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i ^ (i >> 9));
  std::size_t sent = 0;
  std::string got;
  int short_calls = 0;  // calls that found the socket full (partial or kIoAgain)
  for (int i = 0; i < 100000 && sent < data.size(); ++i) {
    // A copy at a new address each time: ACCEPT_MOVING_WRITE_BUFFER.
    std::string tail = data.substr(sent);
    const long n = tls_send(c_, tail.data(), tail.size());
    ASSERT_NE(n, kIoError);
    if (n == kIoAgain || static_cast<std::size_t>(n) < tail.size()) {
      ++short_calls;
      EXPECT_EQ(wev_.ready, 0u);
    }
    if (n > 0) sent += static_cast<std::size_t>(n);
    got += client_read_available();
    wev_.ready = 1;
  }
  for (int i = 0; i < 100 && got.size() < data.size(); ++i) got += client_read_available();
  EXPECT_EQ(sent, data.size());
  EXPECT_TRUE(got == data);
  EXPECT_EQ(c_.sent, static_cast<off_t>(data.size()));
  EXPECT_GT(short_calls, 0) << "the socketpair's buffer must have filled at least once";
}

}  // namespace
}  // namespace vigil
