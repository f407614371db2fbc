// HTTP/1's final writer (nginx's ngx_http_write_filter and ngx_http_writer):
// the end of the body filter chain for every response on an HTTP/1
// connection. It sends the head with the first body bytes, holds what the
// socket does not take yet, and owns the limits of a write: the write budget
// per loop pass (sendfile_max_chunk), limit_rate / limit_rate_after,
// send_timeout between writes, sendfile or the read-and-write loop for a
// file range when sendfile is off, and TCP_CORK with sendfile.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "event/file_read.h"
#include "http/core/filters.h"
#include "http/core/post_action.h"
#include "http/core/request.h"
#include "http/filters/limit_rate.h"
#include "http/v2/h2.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http {
namespace {

// Most a writer sends before letting other connections run (nginx's
// sendfile_max_chunk, 2m by default): a fast client on a big file must not
// hold the worker.
constexpr off_t kWriteChunk = off_t{2} << 20;

// Refills the memory body from the file when sendfile is off; false on a
// read error or a file that shrank under us.
bool fill_from_file(Request& r) {
  const off_t left = r.file_end - r.file_pos;
  const std::size_t n =
      left < static_cast<off_t>(r.obuf_size) ? static_cast<std::size_t>(left) : r.obuf_size;
  const std::size_t got = read_file_some(*r.c, r.fd, r.file_pos, r.obuf, n);
  if (got == 0) return false;
  r.bbuf.reset(r.obuf, r.obuf_size);
  r.bbuf.last = r.obuf + got;
  r.file_pos += static_cast<off_t>(got);
  r.bbuf.last_buf = r.file_pos == r.file_end;
  return true;
}

// A file range still to be read into memory (sendfile off).
bool file_left(const Request& r) {
  return r.obuf != nullptr && r.fd != -1 && !r.header_only && r.file_pos < r.file_end;
}

// Sends r.pending as the socket, the budget and limit_rate allow.
int write_pending(Request& r) {
  Connection& c = *r.c;
  Event& wev = *c.write;
  EventLoop& loop = *c.loop;
  const off_t start = c.sent;

  for (;;) {
    // Sent links are dropped; their buffers are the producer's again.
    while (r.pending != nullptr && r.pending->buf->empty()) r.pending = r.pending->next;
    if (r.pending == nullptr) {
      if (!file_left(r)) break;  // all sent
      if (!fill_from_file(r)) return kBodyError;
      r.out[1].buf = &r.bbuf;
      r.out[1].next = nullptr;
      r.pending = &r.out[1];
    }
    off_t budget = kWriteChunk - (c.sent - start);
    if (budget <= 0) {
      // Let the others run; continue in the next loop pass.
      loop.posted_next().post(wev);
      return kBodyAgain;
    }
    const off_t allowed = rate_allowance(r);
    if (allowed == 0) return kBodyAgain;  // delayed: the timer resumes it
    if (allowed > 0 && allowed < budget) budget = allowed;
    Chain* rest = c.send_chain(c, r.pending, budget);
    if (rest == kChainError) return kBodyError;
    r.pending = rest;
    if (rest != nullptr && !wev.ready) {
      loop.add_timer(wev, r.loc->send_timeout);
      if (!loop.handle_write_event(wev)) return kBodyError;
      return kBodyAgain;
    }
  }
  loop.del_timer(wev);
  if (!loop.handle_write_event(wev)) return kBodyError;
  return kBodyOk;
}

// The static and generated producers' end: the response is sent, or the
// write handler finishes it.
void after_write(Request& r, int rc) {
  if (rc == kBodyOk) {
    finalize_request(r);
  } else if (rc == kBodyError) {
    terminate_request(r, 0);
  }
}

}  // namespace

off_t rate_allowance(Request& r) {
  const std::uint64_t rate = response_limit_rate(r);
  if (rate == 0) return -1;
  Connection& c = *r.c;
  const off_t allowed = limit_rate_allowance(rate, response_limit_rate_after(r), c.sent - r.sent_start,
                                             msec_diff(clock::current_msec(), r.start_msec));
  if (allowed > 0) return allowed;
  c.write->delayed = 1;
  c.loop->add_timer(*c.write, limit_rate_delay(rate, allowed));
  return 0;
}

int write_filter(Request& r, Chain* in) {
  if (r.hc->stream != nullptr) return h2::write_filter(r, in);
  if (in_post_action(r)) {
    // A post action's answer is not sent (nginx's is an HTTP/0.9 head-only
    // response): its head and body are dropped as if written.
    r.hbuf.pos = r.hbuf.last;
    for (Chain* cl = in; cl != nullptr; cl = cl->next) {
      cl->buf->pos = cl->buf->last;
      cl->buf->file_pos = cl->buf->file_last;
    }
    return kBodyOk;
  }
  Connection& c = *r.c;
  if (r.pending == nullptr && !r.hbuf.empty()) {
    // The first call: the head leaves with the first body bytes (one writev).
    r.out[0].buf = &r.hbuf;
    r.out[0].next = nullptr;
    r.pending = &r.out[0];
    // tcp_nopush: head and file in full segments (nginx sets TCP_CORK in its
    // sendfile chain and clears it when the connection goes idle).
    if (r.use_sendfile && r.loc->tcp_nopush && c.tcp_nopush == 0) {
      int one = 1;
      if (::setsockopt(c.fd, IPPROTO_TCP, TCP_CORK, &one, sizeof one) == -1) {
        VIGIL_LOG(*c.log, kInfo, errno, "setsockopt(TCP_CORK) failed");
      } else {
        c.tcp_nopush = 1;
      }
    }
  }
  if (in != nullptr) {
    // After what waits: the links are the producer's, kept until sent.
    Chain** tail = &r.pending;
    while (*tail != nullptr) tail = &(*tail)->next;
    *tail = in;
  }
  if (c.write->delayed) return kBodyAgain;  // limit_rate: the timer resumes it
  return write_pending(r);
}

void send_response(Request& r) {
  r.phase = Phase::kWriting;
  // An error answered while the head was still being read comes here
  // before the request's handlers took the connection's events.
  r.c->write->handler = request_handler;
  r.write_event_handler = write_handler;
  if (r.header_only) r.bbuf = Buf{};
  if (file_left(r) && r.bbuf.empty() && r.hc->stream == nullptr) {
    // sendfile off: the first piece goes out with the head in one writev
    // (HTTP/2's data source reads the whole file into its frames).
    if (!fill_from_file(r)) {
      terminate_request(r, 500);
      return;
    }
  }
  // The whole body in one call: one buffer (memory, or a file range), the last.
  r.bbuf.last_buf = !file_left(r);
  r.out[1].buf = &r.bbuf;
  r.out[1].next = nullptr;
  after_write(r, output_filter(r, &r.out[1]));
}

void write_handler(Request& r) {
  Connection& c = *r.c;
  Event& wev = *c.write;
  if (wev.delayed) {
    // limit_rate: only the timer resumes a delayed response.
    if (!wev.timedout) {
      if (!c.loop->handle_write_event(wev)) terminate_request(r, 0);
      return;
    }
    wev.timedout = 0;
    wev.delayed = 0;
  }
  if (wev.timedout) {
    VIGIL_LOG(*c.log, kInfo, ETIMEDOUT, "*%llu client timed out sending the response",
              static_cast<unsigned long long>(c.number));
    c.timedout = 1;
    terminate_request(r, 0);
    return;
  }
  after_write(r, output_filter(r, nullptr));
}

}  // namespace vigil::http
