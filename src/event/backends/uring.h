#pragma once
// Internal: the io_uring backend (compiled only with liburing, VIGIL_HAVE_URING).
//
// Two kinds of connection live on one ring:
//
// 1. Ring connections (c.ring, set by init_io for accepted connections):
//    their I/O itself goes through the ring (uring_io.cc). A multishot recv
//    fills buffers from a provided buffer ring, so an idle connection holds
//    no receive buffer; completed buffers wait on the connection's list until
//    its recv() copies them out, and the read event is delivered whenever a
//    completion arrives (the handler reads until kIoAgain, as with epoll).
//    send() copies into a per-connection send chunk, which stays alive until
//    its completion; one send request is in flight at a time, a short send is
//    resubmitted, and the write event is ready while the chunk has room. A
//    file buffer waits until the chunk is empty and then goes out through
//    the ring (uring_file.cc: a READ into a registered buffer linked to a
//    SEND, or file -> pipe -> socket SPLICEs), or with sendfile(2) (with
//    POLLOUT armed through the ring on EAGAIN) when that is off. Requests
//    are tagged with the pool slot and Connection::generation, so a
//    completion for a closed connection never reaches the slot's next owner.
//    Close cancels the receive; sends still in flight drain first (the
//    backend closes the fd afterwards, or after kLinger).
//
// 2. Readiness registrations (everything else: listening sockets, outgoing
//    peers, connections whose handlers call recv(2) themselves):
//  - kEvClear: a multishot poll (io_uring_prep_poll_multishot). The kernel
//    posts a completion on every wake-up of the socket that matches the mask,
//    so it behaves edge-triggered; it may report the same readiness more
//    than once, which greedy handlers do not mind.
//  - level (no kEvClear, e.g. listening sockets): a single-shot poll re-armed
//    each time it completes.
//    The request's user_data is the Event pointer | a 15-bit
//    registration generation in bits 48..62 (held in the event's `index`):
//    a completion from an earlier registration is stale and never re-armed.
//    del cancels the request even with kEvClose: an armed poll holds a
//    reference to the file, so close() alone would not send the FIN.
//    (A connection's own generation is Connection::generation: a completion
//    for a slot reused since is dropped because its registration is gone.)
//
// Ring user_data has bit 63 set: kind (bits 56..58), the Connection::generation
// (bits 24..55) and the pool slot (bits 0..23); a send's user_data carries its
// chunk's index instead of the slot, a file send's its FileSend's index.

#include <liburing.h>

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "event/backends/notify.h"
#include "vigil/event/backend.h"
#include "vigil/event/connection.h"

namespace vigil::backends {

// The tags of ring connections' requests (user_data).
namespace uring_tag {
inline constexpr std::uint64_t kRingBit = std::uint64_t{1} << 63;
inline constexpr int kKindShift = 56;
inline constexpr std::uint64_t kRecv = 1;     // the multishot receive
inline constexpr std::uint64_t kSend = 2;     // a send from a chunk (its index, not the slot)
inline constexpr std::uint64_t kPollIn = 3;   // POLLIN: the receive fell back to recv(2)
inline constexpr std::uint64_t kPollOut = 4;  // POLLOUT: sendfile(2) met EAGAIN
inline constexpr std::uint64_t kFileIn = 5;   // a file send's READ or file->pipe SPLICE (its index)
inline constexpr std::uint64_t kFileOut = 6;  // a file send's SEND or pipe->socket SPLICE
inline constexpr int kGenShift = 24;
inline constexpr std::uint64_t kIndexMask = (std::uint64_t{1} << kGenShift) - 1;
inline std::uint64_t make(std::uint64_t kind, std::uint32_t generation, std::uint32_t index) {
  return kRingBit | (kind << kKindShift) | (std::uint64_t{generation} << kGenShift) | index;
}
inline std::uint64_t kind(std::uint64_t ud) {
  return (ud >> kKindShift) & 7u;
}
inline std::uint32_t generation(std::uint64_t ud) {
  return static_cast<std::uint32_t>(ud >> kGenShift);
}
inline std::uint32_t index(std::uint64_t ud) {
  return static_cast<std::uint32_t>(ud & kIndexMask);
}
}  // namespace uring_tag

class UringBackend final : public Backend {
 public:
  UringBackend() = default;
  ~UringBackend() override { done(); }
  UringBackend(const UringBackend&) = delete;
  UringBackend& operator=(const UringBackend&) = delete;

  std::string_view name() const override { return "io_uring"; }
  // kCapExclusive: the polled accept's POLL_ADD takes EPOLLEXCLUSIVE (uring.cc);
  // a multishot accept waits exclusively anyway and rotates by itself
  // (uring_accept.cc), so accept.cc's del/add every 16 accepts is not wanted.
  unsigned capabilities() const override {
    return kCapClear | kCapEpoll | (multishot_accept_ ? 0u : kCapExclusive);
  }

  // Can this kernel set up a ring at all (io_uring_setup: ENOSYS on old
  // kernels, EPERM when io_uring_disabled or seccomp refuse it)?
  static Status probe();

  Status init(EventLoop& loop, const BackendConfig& cfg) override;
  void done() override;

  Status add(Event& ev, unsigned flags) override;
  Status del(Event& ev, unsigned flags) override;
  Status add_conn(Connection& c) override;
  Status del_conn(Connection& c, unsigned flags) override;
  Status notify() override;
  int wake_fd() const override { return notify_.fd(); }
  Status process_events(Msec timer, unsigned flags) override;

  void init_io(Connection& c) override;
  bool release(Connection& c) override;
  int shutdown_write(Connection& c) override;
  int accept(Connection& lc, sockaddr* addr, socklen_t* len) override;
  std::size_t accepted_waiting(const Connection& lc) const override;

  // The IORING_SETUP_* flags the kernel accepted (for tests and diagnostics).
  unsigned setup_flags() const { return setup_flags_; }

  // The ring connection's primitives (installed by init_io).
  long ring_recv(Connection& c, char* buf, std::size_t size);
  long ring_send(Connection& c, const char* buf, std::size_t size);
  long ring_recv_chain(Connection& c, Chain* chain, off_t limit);
  Chain* ring_send_chain(Connection& c, Chain* in, off_t limit);

  // Provided buffers for the multishot receive (power of two) and their size.
  static constexpr unsigned kBufferCount = 1024;
  static constexpr unsigned kBufferSize = 4096;
  // A connection whose handler does not read stops receiving past this much.
  static constexpr std::uint32_t kMaxPending = 64 * 1024;
  static constexpr std::size_t kChunkSize = 16 * 1024;
  // user_data of completions nobody looks at (cancel requests, and accept
  // completions del() has already taken out of the ring).
  static constexpr std::uint64_t kIgnoredUserData = 0;
  // Event::index bit of a listening socket's multishot accept registration.
  static constexpr std::uint32_t kAcceptIndexBit = 1u << 17;

  // How a ring connection's file buffers reach the socket (uring_file.cc).
  enum class FileMode : std::uint8_t { kSendfile, kReadSend, kSplice };
  FileMode file_mode() const { return file_mode_; }
  // One file send moves at most this much (a registered buffer, a pipe).
  static constexpr std::uint32_t kFileBufferSize = 256 * 1024;
  // File sends in flight per loop; beyond this a file goes out with sendfile(2).
  static constexpr std::uint32_t kMaxFileSends = 64;

 private:
  struct Completion {
    std::uint64_t user_data;
    std::int32_t res;
    std::uint32_t flags;
  };

  // One send chunk: the bytes a connection's send() accepted, alive until
  // the kernel has sent them.
  struct Chunk {
    std::uint32_t index = 0;  // in chunks_
    std::uint32_t slot = 0;
    std::uint32_t generation = 0;
    int fd = -1;
    std::uint32_t head = 0;  // first byte not yet sent
    std::uint32_t tail = 0;  // end of the data
    bool in_flight = false;
    bool orphan = false;            // the connection is closed; the fd is ours
    bool shutdown_pending = false;  // shutdown(SHUT_WR) once drained
    bool cancelled = false;
    int error = 0;
    Msec deadline = 0;      // orphans: cancelled after this
    Chunk* next = nullptr;  // free list, or the linger list
    Chunk* prev = nullptr;
    char data[kChunkSize];
  };

  // A file range on its way to a ring connection's socket (uring_file.cc):
  // READ (READ_FIXED) into a buffer linked to a SEND of it, or SPLICE file ->
  // pipe linked to SPLICE pipe -> socket. Alive until its last completion.
  struct FileSend {
    std::uint32_t index = 0;  // in files_
    std::uint32_t slot = 0;
    std::uint32_t generation = 0;
    int fd = -1;         // the socket
    int file_fd = -1;    // the Buf's descriptor (compared at consumption)
    int splice_fd = -1;  // splice: our dup of it (the SPLICE resolves it late)
    off_t pos = 0;       // the range's file offset
    std::uint32_t len = 0;
    std::uint32_t got = 0;         // bytes the READ / first SPLICE produced
    std::uint32_t sent = 0;        // bytes the socket took
    std::uint32_t in_pipe = 0;     // splice: bytes waiting in the pipe
    std::uint8_t outstanding = 0;  // completions still to come
    bool read_done = false;
    bool orphan = false;  // the connection is closed; the socket is ours to close
    bool truncated = false;
    int error = 0;
    unsigned sq_tail = 0;  // liburing's sqe_tail after the requests were queued
    io_uring_sqe* sqes[2] = {nullptr, nullptr};
    char* buf = nullptr;  // read+send: the buffer (registered when buf_index >= 0)
    int buf_index = -1;
    int pipe_r = -1;  // splice
    int pipe_w = -1;
    FileSend* next = nullptr;  // free list, or the orphans
  };

  // Receive state of one pool slot.
  struct Slot {
    std::int32_t head = -1;  // received buffers, oldest first (buffer ids)
    std::int32_t tail = -1;
    std::uint32_t head_off = 0;
    std::uint32_t pending = 0;  // bytes waiting in the list
    int error = 0;
    bool eof = false;
    bool recv_live = false;     // a multishot recv or a POLLIN poll is in the kernel
    bool recv_cancel = false;   // ... and was asked to stop
    bool pollout_live = false;  // POLLOUT poll for a sendfile that met EAGAIN
    std::uint64_t recv_ud = 0;
    std::uint64_t pollout_ud = 0;
    Chunk* out = nullptr;
    FileSend* file = nullptr;  // a file send, until ring_send_chain consumes it
  };
  struct BufMeta {
    std::uint32_t len = 0;
    std::int32_t next = -1;
  };

  // Connections a listening socket's multishot accept took, waiting for the
  // accept handler (uring_accept.cc). One per listening event.
  struct AcceptQueue {
    Event* ev = nullptr;
    std::vector<int> fds;
    std::size_t head = 0;
    bool live = false;            // the multishot accept is in the kernel
    std::uint64_t delivered = 0;  // the pass that last delivered the event
    unsigned handed = 0;          // connections handed out since the request was armed
  };

  // The kernel's batch of deferred completions per wait (DEFER_TASKRUN).
  static constexpr unsigned kDeferredBatch = 20;

  bool enable();               // R_DISABLED: enable the ring; the calling thread is its issuer
  unsigned reap(unsigned at);  // copies completions into batch_[at..]; returns how many
  io_uring_sqe* next_sqe(Status* st);
  // io_uring_submit, or with run_completions io_uring_submit_and_get_events; counted.
  int submit(bool run_completions = false);
  Status arm(Event& ev, int fd);  // queues the poll described by ev.index
  Status cancel(std::uint64_t user_data);
  void complete(const Completion& cqe, unsigned flags);
  void complete_ring(const Completion& cqe, unsigned flags);
  void cancel_everything();

  // uring_accept.cc
  AcceptQueue* accept_queue(const Event& ev, bool create);
  void on_accept(Event& ev, bool current, const Completion& cqe, unsigned flags);
  // A dead request's connections left in the listen queue: taken.
  void take_stranded(Event& ev, AcceptQueue& q);
  // Appends a connection the kernel or take_stranded accepted; without
  // memory it is logged and closed (false).
  bool queue_accepted(AcceptQueue& q, int fd);
  void close_accepted();  // done(): connections taken but never handed out
  bool accepts_pending() const;
  void requeue_accepts();               // moves a busy accept to the back of the socket's queue
  void take_posted_accepts(Event& ev);  // del: accepts already in the completion ring
  void deliver_pending_accepts(
      unsigned flags);  // done(): cancel every request and reap the completions

  // uring_io.cc
  Status init_ring_io(const BackendConfig& cfg);
  void done_ring_io();
  Slot* slot_of(const Connection& c);
  bool leave_ring_if_replaced(Connection& c);
  Connection* owner_of(std::uint64_t user_data);
  Status arm_recv(Connection& c, Slot& s);
  bool rearm(Connection& c, Slot& s);  // arm_recv, logging a failure as the connection's error
  void recycle(std::uint32_t bid);
  void drop_received(Slot& s);
  Chunk* get_chunk(Connection& c);
  void put_chunk(Chunk* k);
  Status submit_send(Chunk& k);
  void on_recv(Connection* c, const Completion& cqe, unsigned flags);
  void on_send(const Completion& cqe, unsigned flags);
  void on_poll(Connection* c, bool write, const Completion& cqe, unsigned flags);
  void make_ready_write(Connection& c, unsigned flags);
  void finish_orphan(Chunk& k);

  // uring_file.cc
  void init_file_io();
  void done_file_io();
  // The splice pipe of a file send (pipe2, sized F_SETPIPE_SZ); false when none.
  bool open_pipe(FileSend& f);
  FileSend* get_file_send(Connection& c);
  void put_file_send(FileSend* f);
  bool queue_file_send(FileSend& f);
  bool queue_file_out(FileSend& f);
  // Sends (part of) the file buffer b through the ring: >0 bytes a finished
  // send consumed from b, kIoAgain (waiting), kIoError, or 0: not through
  // the ring (no resources), sendfile(2) instead.
  long ring_send_file(Connection& c, Slot& s, Buf& b, off_t budget);
  void on_file(const Completion& cqe, unsigned flags);
  bool release_file(Slot& s);  // true: an orphan now owns the socket
  bool file_busy(const Slot& s) const { return s.file != nullptr && s.file->outstanding > 0; }
  void drain_lingering();
  void expire_lingering();
  Msec linger_wait(Msec timer) const;

  EventLoop* loop_ = nullptr;
  io_uring ring_{};
  bool ring_open_ = false;
  bool ring_fd_registered_ = false;
  bool disabled_ = false;       // R_DISABLED and not enabled yet
  bool defer_taskrun_ = false;  // completions are posted only when we wait
  unsigned setup_flags_ = 0;    // what io_uring_setup accepted
  bool skip_success_ = false;   // IORING_FEAT_CQE_SKIP: no completion for a successful cancel
  bool exclusive_ok_ = true;    // the kernel's poll takes EPOLLEXCLUSIVE (kEvExclusive)
  std::unique_ptr<io_uring_cqe*[]> cqes_;
  std::unique_ptr<Completion[]> batch_;
  unsigned batch_size_ = 0;
  std::uint16_t generation_ = 0;
  bool multishot_accept_ = false;  // listening sockets use IORING_OP_ACCEPT multishot
  std::vector<AcceptQueue> accepts_;
  // accept4 calls per ended accept request, at most.
  static constexpr int kStrandedMax = 512;
  std::uint64_t pass_ = 0;  // process_events calls
  NotifyFd notify_;

  // Ring I/O (absent when the kernel has no provided buffer rings: then
  // init_io installs the socket primitives).
  bool ring_io_ = false;
  std::size_t nslots_ = 0;
  std::unique_ptr<Slot[]> slots_;
  io_uring_buf_ring* buf_ring_ = nullptr;
  std::size_t buf_ring_bytes_ = 0;
  char* buffers_ = nullptr;
  std::size_t buffers_bytes_ = 0;
  unsigned nbuffers_ = 0;
  unsigned free_buffers_ = 0;
  std::unique_ptr<BufMeta[]> meta_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  Chunk* free_chunks_ = nullptr;
  Chunk linger_;  // head of the orphans still sending, oldest first
  std::size_t lingering_ = 0;

  // File sends (uring_file.cc).
  FileMode file_mode_ = FileMode::kSendfile;
  std::vector<std::unique_ptr<FileSend>> files_;
  FileSend* free_files_ = nullptr;
  bool file_buffers_registered_ = false;
  char* file_buffers_ = nullptr;  // kMaxFileSends x kFileBufferSize, mapped on first use
};

}  // namespace vigil::backends
