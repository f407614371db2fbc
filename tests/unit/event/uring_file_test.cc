// io_uring file sends (uring_file.cc): a file buffer in a ring connection's
// send chain goes out through the ring, READ into a registered buffer linked
// to a SEND ("read") or file -> pipe -> socket SPLICEs ("splice"), or with
// sendfile(2) ("sendfile", the fallback VIGIL_URING_FILE forces). Real
// sockets over loopback, real files. Each mode must deliver byte-exact,
// resume short sends, end with the error sendfile gives when the file
// shrank, and survive a close in mid-transfer without a completion reaching
// the slot's next owner (ASan checks the buffers are not used after it).
#include <gtest/gtest.h>

#if VIGIL_HAVE_URING
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "event/backends/uring.h"
#include "unit/event/backend_fixture.h"

namespace vigil::test {
namespace {

using FileMode = backends::UringBackend::FileMode;

std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 13 + seed) % 26);
  return s;
}

// A file holding `content`, unlinked at once; the descriptor is returned.
Fd temp_file(const std::string& content) {
  char name[] = "/tmp/vigil_uring_file_XXXXXX";
  Fd fd(::mkstemp(name));
  if (fd.get() == -1) {
    ADD_FAILURE() << "mkstemp: " << std::strerror(errno);
    return fd;
  }
  ::unlink(name);
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
    if (n <= 0) {
      ADD_FAILURE() << "write: " << std::strerror(errno);
      return Fd();
    }
    done += static_cast<std::size_t>(n);
  }
  return fd;
}

// Reads what the peer has (at most `max` bytes); true at FIN or reset.
bool drain(int fd, std::string* got, std::size_t max = SIZE_MAX) {
  char buf[65536];
  std::size_t taken = 0;
  while (taken < max) {
    const ssize_t r = ::recv(fd, buf, std::min(sizeof buf, max - taken), 0);
    if (r > 0) {
      got->append(buf, static_cast<std::size_t>(r));
      taken += static_cast<std::size_t>(r);
      continue;
    }
    return r == 0 || errno != EAGAIN;
  }
  return false;
}

// Reads with c->recv until kIoAgain (a ring connection's data is in the
// ring's buffers, not in the socket).
void on_ring_read(Event& ev) {
  auto* c = ev.owner<Connection>();
  auto* p = static_cast<Probe*>(c->data);
  ++p->reads;
  char buf[4096];
  for (;;) {
    const long n = c->recv(*c, buf, sizeof buf);
    if (n <= 0) break;
    p->data.append(buf, static_cast<std::size_t>(n));
  }
}

class UringFileTest : public BackendTest {
 public:
  void SetUp() override {
    // BackendTest's parameter names the backend; here it names the file
    // mode, read when the loop is created (each TEST is its own process).
    log_.set_level(LogLevel::kError);
    ::setenv("VIGIL_URING_FILE", mode().c_str(), 1);
    EventLoopConfig cfg;
    cfg.use = "io_uring";
    cfg.connections = 64;
    auto r = EventLoop::create(cfg, log_);
    ::unsetenv("VIGIL_URING_FILE");
    // A 6.x kernel makes the ring (the backend falls back flag by flag).
    ASSERT_TRUE(r) << "io_uring refused: " << r.status().to_string();
    loop_ = std::move(r.value());
  }

  std::string mode() const { return GetParam(); }
  backends::UringBackend& uring() { return static_cast<backends::UringBackend&>(backend()); }
  FileMode expected() const {
    if (mode() == "read") return FileMode::kReadSend;
    if (mode() == "splice") return FileMode::kSplice;
    return FileMode::kSendfile;
  }

  Connection* attach_ring(int fd, Probe* p) {
    Connection* c = attach(fd, p, on_ring_read, on_write);
    if (c == nullptr) return nullptr;
    backend().init_io(*c);
    c->write->ready = 1;
    EXPECT_TRUE(c->ring) << "not a ring connection: the test proves nothing";
    return c;
  }

  // One file send's cast: a temp file of `size` bytes of pattern `seed`, a
  // ring connection (SO_SNDBUF `sndbuf` when not 0) to a TCP peer, and a
  // buffer for the whole file in a one-link chain.
  struct FileCase {
    std::string content;
    Fd file, peer;
    Probe p;
    Connection* c = nullptr;
    Buf fb;
    Chain cl{&fb, nullptr};
  };
  void open_case(FileCase& fc, std::size_t size, unsigned seed, int sndbuf = 0) {
    fc.content = pattern(size, seed);
    fc.file = temp_file(fc.content);
    ASSERT_NE(fc.file.get(), -1);
    auto [fd, peer] = tcp_pair();
    ASSERT_NE(fd, -1);
    fc.peer = std::move(peer);
    if (sndbuf != 0) {
      ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf), 0);
    }
    fc.c = attach_ring(fd, &fc.p);
    ASSERT_NE(fc.c, nullptr);
    fc.fb.in_file = true;
    fc.fb.file_fd = fc.file.get();
    fc.fb.file_last = static_cast<off_t>(fc.content.size());
  }

  // Runs passes while the peer reads, until the connection ends (true) or
  // 3,000 passes went by (false).
  bool drain_until_end(int peer, std::string* got) {
    for (int i = 0; i < 3000; ++i) {
      if (!pass(1).is_ok()) return false;
      if (drain(peer, got)) return true;
    }
    return false;
  }

  // Drives c->send_chain as the HTTP writer does (send while the write event
  // is ready, otherwise wait for it) while the peer reads up to `per_pass`
  // bytes per pass. Returns the chain's end state: nullptr (all sent),
  // kChainError, or what was left when the passes ran out.
  Chain* send_all(Connection* c, Chain* chain, int peer, std::string* got,
                  std::size_t per_pass = SIZE_MAX, std::size_t expect = 0) {
    Chain* rest = chain;
    for (int i = 0; i < 20000; ++i) {
      if (rest != nullptr && c->write->ready) {
        rest = c->send_chain(*c, rest, 0);
        if (rest == kChainError) return rest;
        if (rest != nullptr && !c->write->ready) {
          EXPECT_TRUE(loop_->handle_write_event(*c->write).is_ok());
        }
      }
      if (rest == nullptr && got->size() >= expect) return nullptr;
      EXPECT_TRUE(pass(1).is_ok());
      (void)drain(peer, got, per_pass);
    }
    return rest;
  }
};

TEST_P(UringFileTest, LargeFileIsSentCompletelyAndByteExact) {
  ASSERT_EQ(uring().file_mode(), expected()) << "this kernel cannot run the mode";
  const std::string content = pattern(3 * 1024 * 1024 + 4321, 1);
  Fd file = temp_file(content);
  ASSERT_NE(file.get(), -1);
  auto [fd, peer] = tcp_pair();
  ASSERT_NE(fd, -1);
  Probe p;
  Connection* c = attach_ring(fd, &p);
  ASSERT_NE(c, nullptr);

  // Memory before and after the file: the order must hold.
  std::string head = "HEAD:", tail = ":TAIL";
  Buf hb, fb, tb;
  hb.reset(head.data(), head.size());
  hb.last = hb.end;
  tb.reset(tail.data(), tail.size());
  tb.last = tb.end;
  fb.in_file = true;
  fb.file_fd = file.get();
  fb.file_pos = 1000;  // a range that starts inside the file
  fb.file_last = static_cast<off_t>(content.size());
  Chain c3{&tb, nullptr}, c2{&fb, &c3}, c1{&hb, &c2};
  const std::string want = head + content.substr(1000) + tail;

  std::string got;
  Chain* rest = send_all(c, &c1, peer.get(), &got, SIZE_MAX, want.size());
  ASSERT_EQ(rest, nullptr) << "the chain was not sent";
  ASSERT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want) << "the bytes arrived changed or out of order";
  EXPECT_EQ(c->sent, static_cast<off_t>(want.size()));
  EXPECT_EQ(fb.file_pos, fb.file_last);
  if (expected() == FileMode::kSendfile) {
    EXPECT_EQ(loop_->stats().ring_file_sends, 0u) << "sendfile was forced";
  } else {
    // 256 KiB per file send: the range needs at least twelve.
    EXPECT_GE(loop_->stats().ring_file_sends, 12u);
  }
}

// A slow reader and a small socket buffer: SENDs and pipe -> socket SPLICEs
// come back short or wait for room, and the transfer resumes until done.
TEST_P(UringFileTest, ShortSendsAreResumed) {
  FileCase fc;
  ASSERT_NO_FATAL_FAILURE(open_case(fc, 1024 * 1024 + 17, 2, 4096));
  auto& [content, file, peer, p, c, fb, cl] = fc;
  std::string got;
  Chain* rest = send_all(c, &cl, peer.get(), &got, 16 * 1024, content.size());
  ASSERT_EQ(rest, nullptr) << got.size() << " of " << content.size() << " bytes arrived";
  EXPECT_TRUE(got == content);
  EXPECT_GT(p.writes, 0) << "the write event never had to wait: the test proves nothing";
}

// The file is shorter than the buffer says (truncated under us): what it
// has arrives, then the send fails as sendfile(2)'s 0 makes it fail.
TEST_P(UringFileTest, FileShorterThanTheBufferIsAnError) {
  FileCase fc;
  ASSERT_NO_FATAL_FAILURE(open_case(fc, 300 * 1024 + 5, 3));
  auto& [content, file, peer, p, c, fb, cl] = fc;
  fb.file_last = static_cast<off_t>(content.size() + 100000);
  std::string got;
  Chain* rest = send_all(c, &cl, peer.get(), &got);
  EXPECT_EQ(rest, kChainError);
  EXPECT_TRUE(c->error);
  for (int i = 0; i < 100 && got.size() < content.size(); ++i) {
    ASSERT_OK(pass(1));
    (void)drain(peer.get(), &got);
  }
  EXPECT_TRUE(got == content) << got.size() << " of " << content.size() << " bytes";
}

// Close with a file send in flight (the peer does not read, so the SEND or
// SPLICE waits for room), and the slot goes to a new connection at once:
// the old socket ends (the backend closes it after the cancelled
// requests complete), and nothing reaches the new owner.
TEST_P(UringFileTest, CloseWithFileSendInFlightReusesTheSlotSafely) {
  const int small = 64 * 1024;
  FileCase fc;
  ASSERT_NO_FATAL_FAILURE(open_case(fc, 8 * 1024 * 1024, 4, small));
  auto& [content, file, peer, p, c, fb, cl] = fc;
  ASSERT_EQ(::setsockopt(peer.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
  Chain* rest = &cl;
  // Send until the socket is full and a file send waits in the kernel.
  for (int i = 0; i < 200 && rest != nullptr; ++i) {
    if (c->write->ready) rest = c->send_chain(*c, rest, 0);
    ASSERT_NE(rest, kChainError);
    ASSERT_OK(pass(1));
  }
  ASSERT_NE(rest, nullptr) << "the peer took 8 MiB without reading";
  const std::uint32_t old_generation = c->generation;
  loop_->pool().close_connection(*c);
  file.reset();  // the handler closes its file with the request

  auto [fd2, peer2] = tcp_pair();
  ASSERT_NE(fd2, -1);
  Probe p2;
  p2.consume = true;
  Connection* c2 = attach_ring(fd2, &p2);
  ASSERT_EQ(c2, c) << "the pool did not reuse the slot";
  EXPECT_NE(c2->generation, old_generation);
  c2->write->ready = 0;
  ASSERT_OK(loop_->handle_read_event(*c2->read));
  ASSERT_OK(loop_->handle_write_event(*c2->write));

  std::string got;
  EXPECT_TRUE(drain_until_end(peer.get(), &got)) << "the old connection never ended";
  EXPECT_TRUE(got == content.substr(0, got.size())) << "the old peer got other bytes";
  EXPECT_EQ(p2.writes, 0) << "a completion of the old connection reached the new owner";
  EXPECT_FALSE(c2->write->ready);
  EXPECT_EQ(c2->sent, 0);
  write_some(peer2.get(), "mine");
  ASSERT_TRUE(run_until([&] { return p2.data == "mine"; }));
}

// Close before the loop submitted the file send: the handler has closed its
// file, and the descriptor's number already names another file. Nothing of
// that file may reach the old peer (its requests became NOPs; splice reads a
// dup of the original).
TEST_P(UringFileTest, CloseBeforeSubmissionNeverReadsAReusedDescriptor) {
  FileCase fc;
  ASSERT_NO_FATAL_FAILURE(open_case(fc, 512 * 1024, 5));
  auto& [content, file, peer, p, c, fb, cl] = fc;
  Chain* rest = c->send_chain(*c, &cl, 0);
  ASSERT_NE(rest, kChainError);
  // The request ends first (its file is closed) and the number is taken by
  // another file before the connection is closed.
  const int number = file.get();
  file.reset();
  const std::string secret(512 * 1024, '#');
  Fd other = temp_file(secret);
  ASSERT_NE(other.get(), -1);
  if (other.get() != number) {
    ASSERT_EQ(::dup2(other.get(), number), number);
    other = Fd(number);
  }
  loop_->pool().close_connection(*c);
  std::string got;
  EXPECT_TRUE(drain_until_end(peer.get(), &got)) << "the old connection never ended";
  EXPECT_EQ(got.find('#'), std::string::npos) << "bytes of the reused descriptor were sent";
  EXPECT_TRUE(got == content.substr(0, got.size()));
}

std::string mode_label(const ::testing::TestParamInfo<std::string>& param) {
  return param.param;
}

INSTANTIATE_TEST_SUITE_P(Modes, UringFileTest, ::testing::Values("read", "splice", "sendfile"),
                         mode_label);

}  // namespace
}  // namespace vigil::test

#endif  // VIGIL_HAVE_URING
