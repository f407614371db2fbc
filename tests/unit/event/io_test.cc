// Tests for src/event/io.cc: the socket I/O primitives on hand-built
// connections (no loop, no pool), over socketpairs and real TCP.

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "vigil/core/buffer.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"

namespace vigil {
namespace {

// A connection and its two events, wired by hand as the pool would.
struct TestConn {
  Event rev;
  Event wev;
  Connection c;

  explicit TestConn(int fd) {
    c.fd = fd;
    c.read = &rev;
    c.write = &wev;
    c.loop = nullptr;  // the primitives must not need one
    c.recv = unix_recv;
    c.send = unix_send;
    c.recv_chain = readv_chain;
    c.send_chain = writev_chain;
    rev.data = wev.data = &c;
    wev.write = 1;
    rev.ready = 1;
    wev.ready = 1;
  }
};

struct Fds {
  int a = -1;  // the side under test
  int b = -1;  // the peer
  ~Fds() {
    if (a >= 0) close(a);
    if (b >= 0) close(b);
  }
};

void unix_pair(Fds& f) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  f.a = sv[0];
  f.b = sv[1];
}

// A connected TCP pair over 127.0.0.1, both ends nonblocking.
void tcp_pair(Fds& f) {
  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(l, 0);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(l, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)), 0);
  ASSERT_EQ(listen(l, 1), 0);
  socklen_t len = sizeof(sin);
  ASSERT_EQ(getsockname(l, reinterpret_cast<sockaddr*>(&sin), &len), 0);
  f.b = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(f.b, 0);
  ASSERT_EQ(connect(f.b, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)), 0);
  f.a = accept4(l, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  ASSERT_GE(f.a, 0);
  close(l);
  ASSERT_EQ(fcntl(f.b, F_SETFL, fcntl(f.b, F_GETFL) | O_NONBLOCK), 0);
}

void write_all(int fd, const std::string& s) {
  ASSERT_EQ(write(fd, s.data(), s.size()), static_cast<ssize_t>(s.size()));
}

// Reads whatever is there now (nonblocking fd) and appends it.
void drain(int fd, std::string* out) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      out->append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return;  // EAGAIN or EOF
  }
}

bool wait_readable(int fd, int ms = 5000) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1;
}

std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  unsigned x = seed * 2654435761u + 1;
  for (auto& ch : s) {
    x = x * 1103515245u + 12345u;
    ch = static_cast<char>(x >> 16);
  }
  return s;
}

class TempLog {
 public:
  TempLog() {
    char tmpl[] = "/tmp/vigil_io_test.XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd >= 0) close(fd);
    path_ = tmpl;
    EXPECT_TRUE(log_.open(path_, LogLevel::kInfo).is_ok());
  }
  ~TempLog() { std::remove(path_.c_str()); }
  Log& log() { return log_; }
  std::string text() const {
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string path_;
  Log log_;
};

// ---- unix_recv ---------------------------------------------------------------

TEST(UnixRecv, NothingThereIsAgainAndClearsReady) {
  Fds f;
  unix_pair(f);
  TestConn t(f.a);
  char buf[16];
  EXPECT_EQ(unix_recv(t.c, buf, sizeof(buf)), kIoAgain);
  EXPECT_EQ(t.rev.ready, 0u);
  EXPECT_EQ(t.rev.eof, 0u);
  EXPECT_EQ(t.rev.error, 0u);
}

TEST(UnixRecv, ShortReadClearsReady) {
  Fds f;
  unix_pair(f);
  TestConn t(f.a);
  write_all(f.b, "hello");
  char buf[64];
  ASSERT_EQ(unix_recv(t.c, buf, sizeof(buf)), 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
  EXPECT_EQ(t.rev.ready, 0u);
  EXPECT_EQ(t.rev.eof, 0u);
}

TEST(UnixRecv, FullReadKeepsReady) {
  Fds f;
  unix_pair(f);
  TestConn t(f.a);
  write_all(f.b, "0123456789abc");
  char buf[10];
  ASSERT_EQ(unix_recv(t.c, buf, sizeof(buf)), 10);
  EXPECT_EQ(t.rev.ready, 1u);  // more may be waiting
  ASSERT_EQ(unix_recv(t.c, buf, sizeof(buf)), 3);
  EXPECT_EQ(t.rev.ready, 0u);
}

TEST(UnixRecv, PeerCloseIsEof) {
  Fds f;
  unix_pair(f);
  TestConn t(f.a);
  close(f.b);
  f.b = -1;
  char buf[16];
  EXPECT_EQ(unix_recv(t.c, buf, sizeof(buf)), 0);
  EXPECT_EQ(t.rev.eof, 1u);
  EXPECT_EQ(t.rev.ready, 0u);
  EXPECT_EQ(t.rev.error, 0u);
  EXPECT_EQ(t.c.error, 0u);
}

TEST(UnixRecv, PendingEofShortReadMeansEofWithoutAnotherSyscall) {
  Fds f;
  tcp_pair(f);
  TestConn t(f.a);
  write_all(f.b, "last words");
  ASSERT_EQ(shutdown(f.b, SHUT_WR), 0);
  ASSERT_TRUE(wait_readable(f.a));
  t.rev.pending_eof = 1;  // what the epoll backend sets on EPOLLRDHUP

  char buf[64];
  ASSERT_EQ(unix_recv(t.c, buf, sizeof(buf)), 10);
  EXPECT_EQ(std::string(buf, 10), "last words");
  EXPECT_EQ(t.rev.eof, 1u);
  EXPECT_EQ(t.rev.ready, 1u);  // the caller reads again and learns of the EOF

  // Prove the next call makes no syscall: with no valid fd, recv() would fail
  // with EBADF and the call would return kIoError.
  close(f.a);
  f.a = -1;
  t.c.fd = -1;
  EXPECT_EQ(unix_recv(t.c, buf, sizeof(buf)), 0);
  EXPECT_EQ(t.rev.error, 0u);
  EXPECT_EQ(t.c.error, 0u);
}

TEST(UnixRecv, ResetIsAnErrorLoggedAtInfo) {
  Fds f;
  tcp_pair(f);
  TempLog tl;
  TestConn t(f.a);
  t.c.log = &tl.log();
  t.c.number = 7;
  // Linger 0: close() sends RST instead of FIN.
  linger lg{1, 0};
  ASSERT_EQ(setsockopt(f.b, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
  close(f.b);
  f.b = -1;
  ASSERT_TRUE(wait_readable(f.a));

  char buf[16];
  EXPECT_EQ(unix_recv(t.c, buf, sizeof(buf)), kIoError);
  EXPECT_EQ(t.rev.error, 1u);
  EXPECT_EQ(t.c.error, 1u);
  EXPECT_EQ(t.rev.ready, 0u);
  const std::string text = tl.text();
  EXPECT_NE(text.find("[info] "), std::string::npos) << text;
  EXPECT_NE(text.find("*7 recv() failed (104: Connection reset by peer)"), std::string::npos)
      << text;
}

TEST(UnixRecv, BadDescriptorIsLoggedAsError) {
  TempLog tl;
  TestConn t(-1);
  t.c.log = &tl.log();
  char buf[4];
  EXPECT_EQ(unix_recv(t.c, buf, sizeof(buf)), kIoError);
  // EBADF is our bug, not the client's: it is worth more than info.
  EXPECT_NE(tl.text().find("[error] "), std::string::npos) << tl.text();
}

// ---- unix_send ---------------------------------------------------------------

TEST(UnixSend, FillsTheSocketThenAgain) {
  Fds f;
  unix_pair(f);
  TestConn t(f.a);
  const std::string chunk(65536, 'z');
  off_t total = 0;
  long n = 0;
  int calls = 0;
  while ((n = unix_send(t.c, chunk.data(), chunk.size())) > 0) {
    total += n;
    ASSERT_LT(++calls, 10000);
    if (static_cast<std::size_t>(n) < chunk.size()) {
      EXPECT_EQ(t.wev.ready, 0u);  // a short write: the buffer is full
      t.wev.ready = 1;
    }
  }
  EXPECT_EQ(n, kIoAgain);
  EXPECT_EQ(t.wev.ready, 0u);
  EXPECT_EQ(t.wev.error, 0u);
  EXPECT_EQ(t.c.sent, total);
  EXPECT_GT(total, 0);
}

TEST(UnixSend, ToAClosedPeerIsAnErrorNotSigpipe) {
  Fds f;
  unix_pair(f);
  TempLog tl;
  TestConn t(f.a);
  t.c.log = &tl.log();
  close(f.b);
  f.b = -1;
  // Without MSG_NOSIGNAL, SIGPIPE would end the test process here.
  EXPECT_EQ(unix_send(t.c, "x", 1), kIoError);
  EXPECT_EQ(t.wev.error, 1u);
  EXPECT_EQ(t.c.error, 1u);
  EXPECT_EQ(t.c.sent, 0);
  EXPECT_NE(tl.text().find("send() failed (32: Broken pipe)"), std::string::npos) << tl.text();
  EXPECT_NE(tl.text().find("[info] "), std::string::npos);
}

// ---- readv_chain -------------------------------------------------------------

struct Bufs {
  std::vector<std::vector<char>> mem;
  std::vector<Buf> bufs;
  std::vector<Chain> links;

  Bufs(std::size_t count, std::size_t size) : mem(count), bufs(count), links(count) {
    for (std::size_t i = 0; i < count; ++i) {
      mem[i].resize(size);
      bufs[i].reset(mem[i].data(), size);
      links[i].buf = &bufs[i];
      links[i].next = i + 1 < count ? &links[i + 1] : nullptr;
    }
  }
  Chain* head() { return &links[0]; }
  std::string contents() const {
    std::string s;
    for (const Buf& b : bufs) s.append(b.pos, b.last);
    return s;
  }
};

TEST(ReadvChain, ScattersAcrossBuffers) {
  Fds f;
  unix_pair(f);
  TestConn t(f.a);
  const std::string data = pattern(300, 1);
  write_all(f.b, data);

  Bufs b(3, 128);
  b.bufs[0].last += 8;  // 8 bytes already there: reading goes after them
  std::memset(b.mem[0].data(), 'P', 8);
  ASSERT_EQ(readv_chain(t.c, b.head(), 0), 300);
  EXPECT_EQ(b.bufs[0].last - b.bufs[0].start, 128);
  EXPECT_EQ(b.bufs[1].last - b.bufs[1].start, 128);
  EXPECT_EQ(b.bufs[2].last - b.bufs[2].start, 52);
  EXPECT_EQ(b.contents(), std::string(8, 'P') + data);
  EXPECT_EQ(t.rev.ready, 0u);  // 300 < 376 of free space
}

TEST(ReadvChain, LimitCapsTheRead) {
  Fds f;
  unix_pair(f);
  TestConn t(f.a);
  const std::string data = pattern(500, 2);
  write_all(f.b, data);

  Bufs b(4, 128);
  ASSERT_EQ(readv_chain(t.c, b.head(), 200), 200);
  EXPECT_EQ(t.rev.ready, 1u);  // got all it asked for: more may be there
  EXPECT_EQ(b.contents(), data.substr(0, 200));
  EXPECT_EQ(b.bufs[1].last - b.bufs[1].start, 72);
  EXPECT_EQ(b.bufs[2].last, b.bufs[2].start);

  ASSERT_EQ(readv_chain(t.c, b.head(), 0), 300);
  EXPECT_EQ(b.contents(), data);
  EXPECT_EQ(t.rev.ready, 0u);
}

TEST(ReadvChain, AgainEofAndPendingEof) {
  Fds f;
  unix_pair(f);
  TestConn t(f.a);
  Bufs b(2, 64);
  EXPECT_EQ(readv_chain(t.c, b.head(), 0), kIoAgain);
  EXPECT_EQ(t.rev.ready, 0u);

  write_all(f.b, "tail");
  ASSERT_EQ(shutdown(f.b, SHUT_WR), 0);
  t.rev.ready = 1;
  t.rev.pending_eof = 1;
  ASSERT_EQ(readv_chain(t.c, b.head(), 0), 4);
  EXPECT_EQ(t.rev.eof, 1u);
  EXPECT_EQ(t.rev.ready, 1u);
  t.c.fd = -1;  // no syscall for the next one
  EXPECT_EQ(readv_chain(t.c, b.head(), 0), 0);
  EXPECT_EQ(t.rev.error, 0u);

  // Without pending_eof, the FIN itself is read as 0.
  t.c.fd = f.a;
  t.rev.eof = 0;
  t.rev.pending_eof = 0;
  EXPECT_EQ(readv_chain(t.c, b.head(), 0), 0);
  EXPECT_EQ(t.rev.eof, 1u);
  EXPECT_EQ(t.rev.ready, 0u);
}

// ---- writev_chain ------------------------------------------------------------

TEST(WritevChain, ManyBuffersUntilTheSocketFillsThenFinish) {
  Fds f;
  unix_pair(f);
  int small = 16384;
  ASSERT_EQ(setsockopt(f.a, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
  TestConn t(f.a);

  // More buffers than IOV_MAX, with an empty one in the middle and a flag-only
  // last buffer, as a response chain has.
  constexpr std::size_t kCount = 1500;
  Bufs b(kCount, 1000);
  std::string expected;
  for (std::size_t i = 0; i < kCount; ++i) {
    const std::size_t size = i == 700 ? 0 : 100 + i % 900;
    const std::string part = pattern(size, static_cast<unsigned>(i));
    std::memcpy(b.bufs[i].last, part.data(), size);
    b.bufs[i].last += size;
    expected += part;
  }
  Buf last_buf;
  last_buf.last_buf = true;
  Chain tail{&last_buf, nullptr};
  b.links.back().next = &tail;

  Chain* rest = writev_chain(t.c, b.head(), 0);
  ASSERT_NE(rest, nullptr);
  ASSERT_NE(rest, kChainError);
  EXPECT_EQ(t.wev.ready, 0u);  // it stopped because the socket was full
  EXPECT_GT(t.c.sent, 0);
  EXPECT_LT(t.c.sent, static_cast<off_t>(expected.size()));
  // Everything before `rest` is fully sent; `rest` is where the data resumes.
  std::size_t consumed = 0;
  for (Chain* cl = b.head(); cl != rest; cl = cl->next) {
    EXPECT_TRUE(cl->buf->empty());
    consumed += static_cast<std::size_t>(cl->buf->last - cl->buf->start);
  }
  consumed += static_cast<std::size_t>(rest->buf->pos - rest->buf->start);
  EXPECT_EQ(static_cast<off_t>(consumed), t.c.sent);

  std::string got;
  int rounds = 0;
  while (rest != nullptr) {
    ASSERT_NE(rest, kChainError);
    ASSERT_LT(++rounds, 100000);
    ASSERT_TRUE(wait_readable(f.b));
    drain(f.b, &got);
    t.wev.ready = 1;  // as the backend would after EPOLLOUT
    rest = writev_chain(t.c, rest, 0);
  }
  drain(f.b, &got);
  EXPECT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected);
  EXPECT_EQ(t.c.sent, static_cast<off_t>(expected.size()));
  EXPECT_GT(rounds, 1);
}

TEST(WritevChain, MoreThanIovMaxBuffersGoOutInOneCall) {
  Fds f;
  unix_pair(f);
  TestConn t(f.a);
  // 3000 separate 10-byte buffers (not adjacent in memory, so no iovec
  // merging): three sendmsg() calls' worth, all within the socket buffer.
  constexpr std::size_t kCount = 3000;
  Bufs b(kCount, 10);
  std::string expected;
  for (std::size_t i = 0; i < kCount; ++i) {
    const std::string part = pattern(10, static_cast<unsigned>(i) + 7);
    std::memcpy(b.bufs[i].last, part.data(), 10);
    b.bufs[i].last += 10;
    expected += part;
  }
  EXPECT_EQ(writev_chain(t.c, b.head(), 0), nullptr);
  EXPECT_EQ(t.wev.ready, 1u);
  EXPECT_EQ(t.c.sent, 30000);
  std::string got;
  drain(f.b, &got);
  EXPECT_TRUE(got == expected);
}

TEST(WritevChain, LimitStopsMidBuffer) {
  Fds f;
  unix_pair(f);
  TestConn t(f.a);
  Bufs b(3, 600);
  for (auto& buf : b.bufs) buf.last = buf.end;

  Chain* rest = writev_chain(t.c, b.head(), 1000);
  ASSERT_EQ(rest, &b.links[1]);
  EXPECT_EQ(b.bufs[0].pos, b.bufs[0].last);
  EXPECT_EQ(b.bufs[1].pos - b.bufs[1].start, 400);
  EXPECT_EQ(t.c.sent, 1000);
  EXPECT_EQ(t.wev.ready, 1u);  // the limit stopped it, not the socket

  EXPECT_EQ(writev_chain(t.c, rest, 0), nullptr);
  EXPECT_EQ(t.c.sent, 1800);
}

TEST(WritevChain, EmptyChainIsSent) {
  Fds f;
  unix_pair(f);
  TestConn t(f.a);
  Buf empty;
  Chain cl{&empty, nullptr};
  t.c.fd = -1;  // nothing to send: no syscall
  EXPECT_EQ(writev_chain(t.c, &cl, 0), nullptr);
  EXPECT_EQ(writev_chain(t.c, nullptr, 0), nullptr);
}

TEST(WritevChain, ClosedPeerIsChainErrorNotSigpipe) {
  Fds f;
  unix_pair(f);
  TestConn t(f.a);
  close(f.b);
  f.b = -1;
  char data[] = "response";
  Buf b;
  b.reset(data, sizeof(data) - 1);
  b.last = b.end;
  Chain cl{&b, nullptr};
  EXPECT_EQ(writev_chain(t.c, &cl, 0), kChainError);
  EXPECT_EQ(t.wev.error, 1u);
  EXPECT_EQ(t.c.error, 1u);
  EXPECT_EQ(b.pos, b.start);
}

class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    char tmpl[] = "/tmp/vigil_sendfile.XXXXXX";
    fd_ = mkstemp(tmpl);
    path_ = tmpl;
    EXPECT_GE(fd_, 0);
    EXPECT_EQ(write(fd_, contents.data(), contents.size()), static_cast<ssize_t>(contents.size()));
  }
  ~TempFile() {
    close(fd_);
    unlink(path_.c_str());
  }
  int fd() const { return fd_; }

 private:
  int fd_;
  std::string path_;
};

TEST(WritevChain, SendfileOneMegabyteOverTcp) {
  const std::string file = pattern(1 << 20, 99);
  TempFile tf(file);
  Fds f;
  tcp_pair(f);
  TestConn t(f.a);

  // Header in memory, the file in two adjacent ranges (merged into one
  // sendfile), a trailer in memory: the shape of an HTTP response.
  char header[] = "HTTP/1.1 200 OK\r\n\r\n";
  char trailer[] = "-- end --";
  Buf h, f1, f2, tr;
  h.reset(header, sizeof(header) - 1);
  h.last = h.end;
  f1.in_file = f2.in_file = true;
  f1.file_fd = f2.file_fd = tf.fd();
  f1.file_pos = 0;
  f1.file_last = 300000;
  f2.file_pos = 300000;
  f2.file_last = 1 << 20;
  tr.reset(trailer, sizeof(trailer) - 1);
  tr.last = tr.end;
  Chain c4{&tr, nullptr}, c3{&f2, &c4}, c2{&f1, &c3}, c1{&h, &c2};
  const std::string expected =
      std::string(header, sizeof(header) - 1) + file + std::string(trailer, sizeof(trailer) - 1);

  std::string got;
  Chain* rest = &c1;
  int rounds = 0;
  while (rest != nullptr) {
    ASSERT_NE(rest, kChainError);
    ASSERT_LT(++rounds, 100000);
    t.wev.ready = 1;
    rest = writev_chain(t.c, rest, 0);
    if (rest != nullptr) {
      EXPECT_EQ(t.wev.ready, 0u);
      ASSERT_TRUE(wait_readable(f.b));
    }
    drain(f.b, &got);
  }
  while (got.size() < expected.size() && wait_readable(f.b, 2000)) drain(f.b, &got);

  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected);
  EXPECT_EQ(t.c.sent, static_cast<off_t>(expected.size()));
  EXPECT_EQ(f1.file_pos, f1.file_last);
  EXPECT_EQ(f2.file_pos, f2.file_last);
  // The caller's file offset is untouched: sendfile() used its own.
  EXPECT_EQ(lseek(tf.fd(), 0, SEEK_CUR), static_cast<off_t>(file.size()));
}

TEST(WritevChain, TruncatedFileIsAnError) {
  TempFile tf("short");
  Fds f;
  unix_pair(f);
  TestConn t(f.a);
  Buf fb;
  fb.in_file = true;
  fb.file_fd = tf.fd();
  fb.file_pos = 0;
  fb.file_last = 100;  // the file has 5 bytes
  Chain cl{&fb, nullptr};
  // The first call sends the 5 bytes (a short send), the next one finds nothing.
  Chain* rest = writev_chain(t.c, &cl, 0);
  ASSERT_EQ(rest, &cl);
  EXPECT_EQ(fb.file_pos, 5);
  t.wev.ready = 1;
  EXPECT_EQ(writev_chain(t.c, rest, 0), kChainError);
  EXPECT_EQ(t.c.error, 1u);
}

}  // namespace
}  // namespace vigil
