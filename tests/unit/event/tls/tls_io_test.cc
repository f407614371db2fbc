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
#include <memory>
#include <string>

#include "event/tls/tls.h"
#include "tls_pair.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/loop.h"

namespace vigil {
namespace {

// A TLS connection over a socketpair, handshaken: `server` is the end under
// test, wrapped in a Connection with the TLS functions installed, as after
// tls_start_server.
struct TlsPair {
  bool ok = false;
  int server_fd = -1, client_fd = -1;
  SSL* server = nullptr;
  SSL* client = nullptr;
  TlsConnection tc;
  Event rev, wev;
  Connection c;

  TlsPair(SSL_CTX* sctx, SSL_CTX* cctx) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return;
    server_fd = sv[0];
    client_fd = sv[1];
    server = SSL_new(sctx);
    client = SSL_new(cctx);
    SSL_set_fd(server, server_fd);
    SSL_set_fd(client, client_fd);
    SSL_set_accept_state(server);
    SSL_set_connect_state(client);
    if (!test::handshake_both(server, client)) return;
    tc.ssl = server;
    test::wire_tls_connection(c, rev, wev, tc, server_fd);
    ok = true;
  }
  ~TlsPair() {
    tls_release_stage(c);
    SSL_free(server);
    SSL_free(client);
    if (server_fd != -1) ::close(server_fd);
    if (client_fd != -1) ::close(client_fd);
  }
  TlsPair(const TlsPair&) = delete;
  TlsPair& operator=(const TlsPair&) = delete;

  std::string client_read_available() { return test::read_available(client); }
};

class TlsIo : public ::testing::Test {
 protected:
  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);
    sctx_ = SSL_CTX_new(TLS_server_method());
    ASSERT_EQ(SSL_CTX_use_certificate(sctx_, id_.cert), 1);
    ASSERT_EQ(SSL_CTX_use_PrivateKey(sctx_, id_.key), 1);
    SSL_CTX_set_mode(sctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(sctx_, SSL_OP_IGNORE_UNEXPECTED_EOF);
    cctx_ = SSL_CTX_new(TLS_client_method());
    pair_ = std::make_unique<TlsPair>(sctx_, cctx_);
    ASSERT_TRUE(pair_->ok);
    server_fd_ = pair_->server_fd;
    client_fd_ = pair_->client_fd;
    server_ = pair_->server;
    client_ = pair_->client;
  }
  void TearDown() override {
    pair_.reset();
    SSL_CTX_free(sctx_);
    SSL_CTX_free(cctx_);
  }

  void client_write(const std::string& data) {
    std::size_t n = 0;
    ASSERT_EQ(SSL_write_ex(client_, data.data(), data.size(), &n), 1);
    ASSERT_EQ(n, data.size());
  }
  std::string client_read_available() { return pair_->client_read_available(); }

  test::TestIdentity id_;
  SSL_CTX* sctx_ = nullptr;
  SSL_CTX* cctx_ = nullptr;
  std::unique_ptr<TlsPair> pair_;
  int server_fd_ = -1, client_fd_ = -1;
  SSL* server_ = nullptr;
  SSL* client_ = nullptr;
};

TEST_F(TlsIo, AFullBufferKeepsReadyAndPostsWhatOpensslStillHolds) {
  EventLoopConfig cfg;
  cfg.connections = 8;
  auto loop = EventLoop::create(cfg, Log::global());
  ASSERT_TRUE(loop);
  pair_->c.loop = loop.value().get();

  client_write(std::string(3000, 'x'));  // one record
  char buf[100];
  ASSERT_EQ(tls_recv(pair_->c, buf, sizeof buf), 100);
  EXPECT_EQ(pair_->rev.ready, 1u) << "more is there: the caller must come back";
  EXPECT_EQ(pair_->rev.posted, 1u)
      << "plaintext inside OpenSSL raises no event: posted_next carries it";
  EXPECT_EQ(loop.value()->posted_next().front(), &pair_->rev);
  PostedQueue::remove(pair_->rev);

  char rest[4096];
  ASSERT_EQ(tls_recv(pair_->c, rest, sizeof rest), 2900);
  EXPECT_EQ(pair_->rev.ready, 0u) << "drained: wait for the socket";
  EXPECT_EQ(pair_->rev.posted, 0u);
  EXPECT_EQ(tls_recv(pair_->c, rest, sizeof rest), kIoAgain);
  pair_->c.loop = nullptr;
}

TEST_F(TlsIo, CloseNotifyAndABareCloseReadAsEof) {
  client_write("last");
  ASSERT_EQ(SSL_shutdown(client_), 0);  // close_notify sent
  char buf[64];
  ASSERT_EQ(tls_recv(pair_->c, buf, sizeof buf), 4);
  EXPECT_EQ(tls_recv(pair_->c, buf, sizeof buf), 0);
  EXPECT_EQ(pair_->rev.eof, 1u);
  EXPECT_EQ(pair_->c.error, 0u);
}

// An error some other code left in this thread's OpenSSL queue (an embedder's
// failed call it never cleared) must not make a clean close look failed:
// SSL_get_error() reads the queue before the connection's state.
TEST_F(TlsIo, AStaleErrorInTheQueueDoesNotTurnACleanCloseIntoAnError) {
  client_write("last");
  ASSERT_EQ(SSL_shutdown(client_), 0);  // close_notify sent
  ERR_raise(ERR_LIB_USER, ERR_R_INTERNAL_ERROR);  // stale, from elsewhere
  ASSERT_NE(ERR_peek_error(), 0u);
  char buf[64];
  EXPECT_EQ(tls_recv(pair_->c, buf, sizeof buf), 4);  // the data, then close_notify
  EXPECT_EQ(pair_->rev.eof, 1u);
  EXPECT_EQ(pair_->c.error, 0u);
  EXPECT_EQ(tls_recv(pair_->c, buf, sizeof buf), 0);
  ERR_clear_error();
}

TEST_F(TlsIo, AStaleErrorInTheQueueDoesNotTurnABareCloseIntoAnError) {
  ::shutdown(client_fd_, SHUT_WR);
  ERR_raise(ERR_LIB_USER, ERR_R_INTERNAL_ERROR);
  char buf[64];
  EXPECT_EQ(tls_recv(pair_->c, buf, sizeof buf), 0);
  EXPECT_EQ(pair_->rev.eof, 1u);
  EXPECT_EQ(pair_->c.error, 0u);
  ERR_clear_error();
}

TEST_F(TlsIo, AStaleErrorInTheQueueDoesNotFailAWrite) {
  ERR_raise(ERR_LIB_USER, ERR_R_INTERNAL_ERROR);
  // A write that succeeds never asks SSL_get_error; one the socket refuses
  // (a closed peer) must be reported as the socket's error, not the stale one.
  EXPECT_EQ(tls_send(pair_->c, "abc", 3), 3);
  EXPECT_EQ(pair_->c.error, 0u);
  ERR_clear_error();
}

TEST_F(TlsIo, PeerCloseWithoutNotifyIsEof) {
  ::shutdown(client_fd_, SHUT_WR);
  char buf[64];
  EXPECT_EQ(tls_recv(pair_->c, buf, sizeof buf), 0);
  EXPECT_EQ(pair_->rev.eof, 1u);
}

TEST_F(TlsIo, AForgedRecordIsAnError) {
  // An application-data record whose authentication tag cannot be right.
  std::string forged = "\x17\x03\x03\x00\x20";
  forged += std::string(32, '\x55');
  ASSERT_EQ(::send(client_fd_, forged.data(), forged.size(), 0),
            static_cast<ssize_t>(forged.size()));
  char buf[64];
  EXPECT_EQ(tls_recv(pair_->c, buf, sizeof buf), kIoError);
  EXPECT_EQ(pair_->c.error, 1u);
  ERR_clear_error();
}

// An unlinked temporary file with `size` bytes of a pattern chosen by `seed`.
struct TempFile {
  int fd = -1;
  std::string content;
  TempFile(std::size_t size, int seed) {
    char path[] = "/tmp/vigil_tls_io_XXXXXX";
    fd = ::mkstemp(path);
    if (fd < 0) return;
    ::unlink(path);
    content.resize(size);
    for (std::size_t i = 0; i < size; ++i)
      content[i] = static_cast<char>(i * 31 + 7 + seed * (i >> 10));
    if (::write(fd, content.data(), size) != static_cast<ssize_t>(size)) {
      ::close(fd);
      fd = -1;
    }
  }
  ~TempFile() {
    if (fd >= 0) ::close(fd);
  }
  Buf whole() const {
    Buf f;
    f.in_file = true;
    f.file_fd = fd;
    f.file_pos = 0;
    f.file_last = static_cast<off_t>(content.size());
    return f;
  }
};

std::unique_ptr<EventLoop> make_loop() {
  EventLoopConfig cfg;
  cfg.connections = 8;
  auto loop = EventLoop::create(cfg, Log::global());
  return loop ? std::move(loop.value()) : nullptr;
}

TEST_F(TlsIo, AFileGoesOutThroughTheLoopsBufferAndArrivesIntact) {
  auto loop = make_loop();
  ASSERT_NE(loop, nullptr);
  pair_->c.loop = loop.get();
  const char* buffer = nullptr;  // the loop's, the same for every file
  for (int file = 0; file < 2; ++file) {
    TempFile tf(300 * 1024, file);
    ASSERT_GE(tf.fd, 0);
    std::string head = "HEADER\r\n";
    Buf h;
    h.reset(head.data(), head.size());
    h.last = h.start + head.size();
    Buf f = tf.whole();
    Chain c2{&f, nullptr};
    Chain c1{&h, &c2};

    std::string got;
    Chain* rest = &c1;
    int rounds = 0;
    while (rest != nullptr && rounds++ < 10000) {
      pair_->wev.ready = 1;
      rest = tls_send_chain(pair_->c, rest, 0);
      ASSERT_NE(rest, kChainError);
      if (rest != nullptr) {
        ASSERT_NE(pair_->tc.stage, nullptr);
        if (buffer == nullptr) buffer = pair_->tc.stage;
        EXPECT_EQ(pair_->tc.stage, buffer) << "file " << file << ": one buffer per loop";
        EXPECT_EQ(pair_->wev.ready, 0u) << "stopped only because the socket was full";
      }
      got += client_read_available();
    }
    ASSERT_EQ(rest, nullptr);
    EXPECT_EQ(pair_->tc.stage, nullptr) << "the connection lets go of the buffer once sent";
    for (int i = 0; i < 100 && got.size() < head.size() + tf.content.size(); ++i) {
      got += client_read_available();
    }
    EXPECT_TRUE(got == head + tf.content) << "file " << file;
    EXPECT_GT(rounds, 1) << "the socketpair's buffer must have filled at least once";
  }
  tls_exit_loop(*loop);
  pair_->c.loop = nullptr;
}

// Two connections send different files through the one buffer of their loop,
// each stopping when its socket is full. The first is limited to 512-byte
// records, so when it stops, part of what it staged has not reached OpenSSL
// yet; the other connection overwrites the buffer meanwhile, and the first
// must resume with its own bytes, not the other's.
TEST_F(TlsIo, ConnectionsTakeTurnsWithTheLoopsBuffer) {
  auto loop = make_loop();
  ASSERT_NE(loop, nullptr);
  TlsPair other(sctx_, cctx_);
  ASSERT_TRUE(other.ok);
  ASSERT_EQ(SSL_set_max_send_fragment(pair_->server, 512), 1);
  TlsPair* pairs[2] = {pair_.get(), &other};
  TempFile files[2] = {TempFile(200 * 1024, 1), TempFile(200 * 1024, 2)};
  Buf bufs[2] = {files[0].whole(), files[1].whole()};
  Chain chains[2] = {{&bufs[0], nullptr}, {&bufs[1], nullptr}};
  Chain* rest[2] = {&chains[0], &chains[1]};
  std::string got[2];
  int resumed_after_other = 0;
  for (int i = 0; i < 2; ++i) {
    ASSERT_GE(files[i].fd, 0);
    pairs[i]->c.loop = loop.get();
  }
  for (int round = 0; round < 20000 && (rest[0] != nullptr || rest[1] != nullptr); ++round) {
    for (int i = 0; i < 2; ++i) {
      if (rest[i] == nullptr) continue;
      const bool pending = pairs[i]->tc.stage_pos < pairs[i]->tc.stage_len;
      pairs[i]->wev.ready = 1;
      rest[i] = tls_send_chain(pairs[i]->c, rest[i], 0);
      ASSERT_NE(rest[i], kChainError) << "connection " << i;
      if (pending && i == 0) ++resumed_after_other;
      got[i] += pairs[i]->client_read_available();
    }
  }
  ASSERT_EQ(rest[0], nullptr);
  ASSERT_EQ(rest[1], nullptr);
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 100 && got[i].size() < files[i].content.size(); ++k) {
      got[i] += pairs[i]->client_read_available();
    }
    EXPECT_TRUE(got[i] == files[i].content) << "connection " << i << " got " << got[i].size();
    pairs[i]->c.loop = nullptr;
  }
  EXPECT_GT(resumed_after_other, 0) << "the first connection must have stopped mid-piece";
  tls_exit_loop(*loop);
}

// With read ahead (as the server contexts set it), one read() can take the
// next record too: OpenSSL holds it unprocessed, SSL_pending() says 0, and
// only SSL_has_pending() tells; the read event must be posted for it.
TEST_F(TlsIo, ARecordReadAheadIsPostedAsWell) {
  auto loop = make_loop();
  ASSERT_NE(loop, nullptr);
  pair_->c.loop = loop.get();
  SSL_set_read_ahead(server_, 1);
  client_write(std::string(100, 'a'));  // two records
  client_write(std::string(100, 'b'));
  char buf[100];
  ASSERT_EQ(tls_recv(pair_->c, buf, sizeof buf), 100);
  EXPECT_EQ(std::string(buf, 100), std::string(100, 'a'));
  EXPECT_EQ(SSL_pending(server_), 0) << "the second record is read but not yet decrypted";
  EXPECT_EQ(pair_->rev.posted, 1u) << "read-ahead bytes raise no event either";
  PostedQueue::remove(pair_->rev);
  char rest[4096];
  ASSERT_EQ(tls_recv(pair_->c, rest, sizeof rest), 100);
  EXPECT_EQ(std::string(rest, 100), std::string(100, 'b'));
  EXPECT_EQ(tls_recv(pair_->c, rest, sizeof rest), kIoAgain);
  pair_->c.loop = nullptr;
}

// Counts the read() calls OpenSSL makes on a socket watched by
// tls_watch_reads, passing each on to the watcher.
struct ReadCounter {
  static inline int reads = 0;
  static inline BIO_callback_fn_ex watcher = nullptr;
  static long cb(BIO* b, int oper, const char* argp, std::size_t len, int argi, long argl, int ret,
                 std::size_t* processed) {
    if (oper == (BIO_CB_READ | BIO_CB_RETURN)) ++reads;
    return watcher(b, oper, argp, len, argi, argl, ret, processed);
  }
  explicit ReadCounter(SSL* ssl) {
    BIO* bio = SSL_get_rbio(ssl);
    reads = 0;
    watcher = BIO_get_callback_ex(bio);
    BIO_set_callback_ex(bio, cb);
  }
};

// With read ahead, a read() that returns less than OpenSSL asked for found
// the socket empty: the record it brought is returned without another read()
// that could only fail with EAGAIN, and the event waits for the next edge.
TEST_F(TlsIo, AShortReadSparesTheReadThatWouldMeetEagain) {
  SSL_set_read_ahead(server_, 1);
  tls_watch_reads(pair_->tc);
  ASSERT_NE(BIO_get_callback_ex(SSL_get_rbio(server_)), nullptr);
  ReadCounter counter(server_);
  client_write("GET / HTTP/1.1\r\n\r\n");
  char buf[4096];
  ASSERT_EQ(tls_recv(pair_->c, buf, sizeof buf), 18);
  EXPECT_EQ(pair_->rev.ready, 0u);
  EXPECT_EQ(ReadCounter::reads, 1) << "one read() brought the record, none met EAGAIN";
  EXPECT_EQ(pair_->tc.drained, 1u);

  // A full buffer says nothing about the socket: the next call reads on.
  client_write(std::string(3000, 'z'));
  pair_->rev.ready = 1;
  ASSERT_EQ(tls_recv(pair_->c, buf, 1000), 1000);
  EXPECT_EQ(pair_->rev.ready, 1u);
  ASSERT_EQ(tls_recv(pair_->c, buf, sizeof buf), 2000);
  EXPECT_EQ(pair_->rev.ready, 0u);
}

// A short read in an earlier call says nothing about the socket now: data
// may have arrived since (its readiness event is what brought the caller
// back), so a call that serves bytes OpenSSL already held reads on.
TEST_F(TlsIo, AnOlderShortReadDoesNotStopALaterCall) {
  auto loop = make_loop();
  ASSERT_NE(loop, nullptr);
  pair_->c.loop = loop.get();
  SSL_set_read_ahead(server_, 1);
  tls_watch_reads(pair_->tc);
  client_write(std::string(100, 'a'));  // two records, one read() takes both
  client_write(std::string(100, 'b'));
  char buf[4096];
  ASSERT_EQ(tls_recv(pair_->c, buf, 100), 100);  // the caller's buffer is full
  PostedQueue::remove(pair_->rev);
  client_write(std::string(100, 'c'));  // arrives after that short read
  ASSERT_EQ(tls_recv(pair_->c, buf, sizeof buf), 200) << "b from OpenSSL, then c from the socket";
  EXPECT_EQ(std::string(buf, 200), std::string(100, 'b') + std::string(100, 'c'));
  EXPECT_EQ(pair_->rev.ready, 0u);
  pair_->c.loop = nullptr;
}

// After EPOLLRDHUP (pending_eof) a short read means the FIN is next: the read
// goes on and finds it in the same call.
TEST_F(TlsIo, AfterRdhupAShortReadReadsOnToTheEof) {
  SSL_set_read_ahead(server_, 1);
  tls_watch_reads(pair_->tc);
  client_write("last");
  ASSERT_EQ(::shutdown(client_fd_, SHUT_WR), 0);
  pair_->rev.pending_eof = 1;
  char buf[64];
  ASSERT_EQ(tls_recv(pair_->c, buf, sizeof buf), 4);
  EXPECT_EQ(pair_->rev.eof, 1u) << "the FIN was read with the data";
  EXPECT_EQ(tls_recv(pair_->c, buf, sizeof buf), 0);
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
    const long n = tls_send(pair_->c, tail.data(), tail.size());
    ASSERT_NE(n, kIoError);
    if (n == kIoAgain || static_cast<std::size_t>(n) < tail.size()) {
      ++short_calls;
      EXPECT_EQ(pair_->wev.ready, 0u);
    }
    if (n > 0) sent += static_cast<std::size_t>(n);
    got += client_read_available();
    pair_->wev.ready = 1;
  }
  for (int i = 0; i < 100 && got.size() < data.size(); ++i) got += client_read_available();
  EXPECT_EQ(sent, data.size());
  EXPECT_TRUE(got == data);
  EXPECT_EQ(pair_->c.sent, static_cast<off_t>(data.size()));
  EXPECT_GT(short_calls, 0) << "the socketpair's buffer must have filled at least once";
}

}  // namespace
}  // namespace vigil
