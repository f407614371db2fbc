// The body filter chain (http/core/filters.h): a module's filter inserted in
// a chain sees every buffer and what it passes on reaches the final writer;
// the chunked filter frames a body of unknown length; HTTP/1's head writer
// chooses the framing in one place (body_framing). Without a socket: the
// final writer here records what it is given.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <memory>
#include <string>

#include "http/core/conf.h"
#include "http/core/filters.h"
#include "http/core/request.h"
#include "http/core/servers.h"
#include "http/core/worker.h"
#include "vigil/core/clock.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http {
namespace {

// What the recording writer was given, in order, and what it returns.
std::string g_written;
int g_writer_calls = 0;
bool g_saw_last = false;
int g_writer_rc = kBodyOk;

int recording_writer(Request&, Chain* in) {
  ++g_writer_calls;
  for (Chain* cl = in; cl != nullptr; cl = cl->next) {
    Buf& b = *cl->buf;
    g_written.append(b.pos, b.last);
    g_saw_last = g_saw_last || b.last_buf;
    b.pos = b.last;  // "sent"
  }
  return g_writer_rc;
}

// The example module's filter: upper-cases the body in place (a real filter
// that changes bytes would keep its own buffers, as the chunked one does).
int upper_case_filter(Request& r, Chain* in, BodyFilterNext next) {
  for (Chain* cl = in; cl != nullptr; cl = cl->next) {
    for (char* p = cl->buf->pos; p != cl->buf->last; ++p) {
      *p = static_cast<char>(std::toupper(static_cast<unsigned char>(*p)));
    }
  }
  return next(r, in);
}

// Counts the body bytes that pass, in the request's context slot.
int counting_filter(Request& r, Chain* in, BodyFilterNext next) {
  auto* n = static_cast<std::size_t*>(r.ctx[0]);
  for (Chain* cl = in; cl != nullptr; cl = cl->next) *n += cl->buf->size();
  return next(r, in);
}

class BodyFilters : public ::testing::Test {
 protected:
  BodyFilters() {
    g_written.clear();
    g_writer_calls = 0;
    g_saw_last = false;
    g_writer_rc = kBodyOk;
    r_.loc = &loc_;
    r_.c = &c_;
    c_.log = &log_;
    r_.ctx[0] = &counted_;
  }
  // A real event loop for the fixtures that need one (a worker's buffer
  // cache, the loop's exiting flag), in loop_.
  void make_loop() {
    EventLoopConfig cfg;
    cfg.connections = 4;
    auto loop = EventLoop::create(cfg, Log::global());
    ASSERT_TRUE(loop) << loop.status().to_string();
    loop_ = std::move(loop.value());
  }
  // One memory buffer over `text` (copied into the test's storage).
  Chain* body(std::string_view text, bool last) {
    std::memcpy(mem_, text.data(), text.size());
    buf_.reset(mem_, sizeof mem_);
    buf_.last = mem_ + text.size();
    buf_.last_buf = last;
    link_.buf = &buf_;
    link_.next = nullptr;
    return &link_;
  }
  HttpLocConf loc_;
  Connection c_;
  Log log_;
  Request r_;
  std::size_t counted_ = 0;
  char mem_[64];
  Buf buf_;
  Chain link_;
  std::unique_ptr<EventLoop> loop_;
};

TEST_F(BodyFilters, AnInsertedFilterSeesTheBodyAndTheWriterGetsItsOutput) {
  BodyFilterChain chain(recording_writer);
  ASSERT_TRUE(chain.add(counting_filter));
  ASSERT_TRUE(chain.add(upper_case_filter));
  EXPECT_EQ(chain.size(), 2u);
  EXPECT_EQ(chain.run(r_, body("hello, ", false)), kBodyOk);
  EXPECT_EQ(chain.run(r_, body("world", true)), kBodyOk);
  EXPECT_EQ(g_written, "HELLO, WORLD");
  EXPECT_EQ(counted_, 12u);
  EXPECT_TRUE(g_saw_last);
  EXPECT_EQ(g_writer_calls, 2);
}

TEST_F(BodyFilters, TheWritersAnswerComesBackThroughEveryFilter) {
  BodyFilterChain chain(recording_writer);
  ASSERT_TRUE(chain.add(counting_filter));
  g_writer_rc = kBodyAgain;
  EXPECT_EQ(chain.run(r_, body("x", false)), kBodyAgain);
  g_writer_rc = kBodyError;
  EXPECT_EQ(chain.run(r_, nullptr), kBodyError);  // resumed: nothing new
  EXPECT_EQ(g_writer_calls, 2);
}

TEST_F(BodyFilters, AChainWithoutFiltersIsTheWriter) {
  BodyFilterChain chain(recording_writer);
  EXPECT_EQ(chain.run(r_, body("as is", true)), kBodyOk);
  EXPECT_EQ(g_written, "as is");
}

TEST_F(BodyFilters, AFullChainRefusesAnotherFilter) {
  BodyFilterChain chain(recording_writer);
  for (std::uint32_t i = 0; i < BodyFilterChain::kMaxFilters; ++i) {
    ASSERT_TRUE(chain.add(counting_filter));
  }
  EXPECT_FALSE(chain.add(counting_filter));
}

TEST_F(BodyFilters, ChunkedFilterFramesEachCallAsAChunkAndEndsWithTheLastChunk) {
  BodyFilterChain chain(recording_writer);
  ASSERT_TRUE(chain.add(chunked_body_filter));
  r_.chunked_out = true;
  EXPECT_EQ(chain.run(r_, body("0123456789abcdefX", false)), kBodyOk);
  EXPECT_EQ(chain.run(r_, body("hi", true)), kBodyOk);
  EXPECT_EQ(g_written, "11\r\n0123456789abcdefX\r\n2\r\nhi\r\n0\r\n\r\n");
}

TEST_F(BodyFilters, ChunkedFilterEndsAnEmptyLastBufferWithTheLastChunkOnly) {
  BodyFilterChain chain(recording_writer);
  ASSERT_TRUE(chain.add(chunked_body_filter));
  r_.chunked_out = true;
  EXPECT_EQ(chain.run(r_, body("", true)), kBodyOk);
  EXPECT_EQ(g_written, "0\r\n\r\n");
}

TEST_F(BodyFilters, ChunkedFilterPassesABodyItDoesNotFrame) {
  BodyFilterChain chain(recording_writer);
  ASSERT_TRUE(chain.add(chunked_body_filter));
  EXPECT_EQ(chain.run(r_, body("framed by length", true)), kBodyOk);
  EXPECT_EQ(g_written, "framed by length");
}

TEST_F(BodyFilters, ChunkedFilterRefusesANewChunkWhileTheLastIsInFlight) {
  BodyFilterChain chain(recording_writer);
  ASSERT_TRUE(chain.add(chunked_body_filter));
  r_.chunked_out = true;
  r_.chunk_frame.tail.reset(mem_, sizeof mem_);
  r_.chunk_frame.tail.last = mem_ + 2;  // not sent yet
  EXPECT_EQ(chain.run(r_, body("more", false)), kBodyError);
}

// Trailers (headers_out.trailers) go in the last chunk's trailer section,
// in memory from the worker's cache that the request keeps.
class ChunkedTrailers : public BodyFilters {
 protected:
  void SetUp() override {
    make_loop();
    if (HasFatalFailure()) return;
    worker_ = std::make_unique<HttpWorker>(*loop_, servers_, 0);
    hc_.worker = worker_.get();
    r_.hc = &hc_;
    r_.chunked_out = true;
    fields_[0] = HeaderField{"X-Sum", "abc"};
    fields_[1] = HeaderField{"X-Hidden", "no"};
    fields_[1].omit = true;
    fields_[2] = HeaderField{"X-Split", "a\r\nInjected: 1"};
    fields_[3] = HeaderField{"X-Status", "done"};
    r_.headers_out.trailers = fields_;
    r_.headers_out.ntrailers = 4;
    ASSERT_TRUE(chain_.add(chunked_body_filter));
  }
  void TearDown() override {
    ChunkFrame& f = r_.chunk_frame;
    if (f.trailer_mem != nullptr) worker_->buffers().put(f.trailer_mem, f.trailer_size);
  }
  HttpServers servers_;
  std::unique_ptr<HttpWorker> worker_;
  HttpConnection hc_;
  HeaderField fields_[4];
  BodyFilterChain chain_{recording_writer};
};

TEST_F(ChunkedTrailers, TheLastChunkCarriesTheSendableFields) {
  EXPECT_EQ(chain_.run(r_, body("hello", true)), kBodyOk);
  EXPECT_EQ(g_written, "5\r\nhello\r\n0\r\nX-Sum: abc\r\nX-Status: done\r\n\r\n");
  EXPECT_NE(r_.chunk_frame.trailer_mem, nullptr);  // kept until the request ends
}

TEST_F(ChunkedTrailers, AnEmptyLastBufferGetsTheTrailerSectionAlone) {
  EXPECT_EQ(chain_.run(r_, body("abc", false)), kBodyOk);
  EXPECT_EQ(chain_.run(r_, body("", true)), kBodyOk);
  EXPECT_EQ(g_written, "3\r\nabc\r\n0\r\nX-Sum: abc\r\nX-Status: done\r\n\r\n");
}

TEST_F(ChunkedTrailers, ABodyThatIsNotChunkedGoesWithoutThem) {
  r_.chunked_out = false;
  EXPECT_EQ(chain_.run(r_, body("by length", true)), kBodyOk);
  EXPECT_EQ(g_written, "by length");
  EXPECT_EQ(r_.chunk_frame.trailer_mem, nullptr);
}

// The framing HTTP/1 gives a body: Content-Length when the length is known,
// else chunked to an HTTP/1.1 client, else (HTTP/1.0, or
// chunked_transfer_encoding off) the end of the connection.
TEST_F(BodyFilters, FramingIsChosenByLengthVersionAndConf) {
  r_.line.version = 1001;
  EXPECT_EQ(body_framing(r_, 10), BodyFraming::kLength);
  EXPECT_EQ(body_framing(r_, 0), BodyFraming::kLength);
  EXPECT_EQ(body_framing(r_, -1), BodyFraming::kChunked);
  r_.line.version = 1000;
  EXPECT_EQ(body_framing(r_, -1), BodyFraming::kClose);
  r_.line.version = 1001;
  loc_.chunked_transfer_encoding = false;
  EXPECT_EQ(body_framing(r_, -1), BodyFraming::kClose);
}

// The head writer asks the connection's loop whether the worker is exiting.
class HeadWriter : public BodyFilters {
 protected:
  void SetUp() override {
    make_loop();
    if (HasFatalFailure()) return;
    c_.loop = loop_.get();
    hc_.start_msec = clock::current_msec();  // accepted just now
    r_.hc = &hc_;
  }
  HttpConnection hc_;
};

// keepalive_time: a connection older than it is closed after the response.
TEST_F(HeadWriter, AConnectionOlderThanKeepaliveTimeIsClosed) {
  r_.line.version = 1001;
  r_.check.keep_alive = true;
  loc_.keepalive_timeout = 75000;
  loc_.keepalive_time = 1000;
  r_.headers_out.status = 200;
  r_.headers_out.content_length = 0;
  ASSERT_TRUE(write_header(r_));
  EXPECT_TRUE(r_.keepalive);
  hc_.start_msec = clock::current_msec() - 1001;
  ASSERT_TRUE(write_header(r_));
  EXPECT_FALSE(r_.keepalive);
  const std::string head(r_.hbuf.pos, r_.hbuf.last);
  EXPECT_NE(head.find("\r\nConnection: close\r\n"), std::string::npos) << head;
}

// Trailer fields to come: a body of known length goes chunked to HTTP/1.1,
// not to HTTP/1.0, and not when it must keep its length.
TEST_F(HeadWriter, ExpectedTrailersMakeAKnownLengthChunked) {
  r_.check.keep_alive = true;
  loc_.keepalive_timeout = 75000;
  r_.headers_out.status = 200;
  r_.headers_out.content_length = 12;
  r_.headers_out.expect_trailers = true;
  r_.line.version = 1001;
  ASSERT_TRUE(write_header(r_));
  std::string head(r_.hbuf.pos, r_.hbuf.last);
  EXPECT_TRUE(r_.chunked_out);
  EXPECT_EQ(head.find("Content-Length"), std::string::npos) << head;
  r_.line.version = 1000;
  ASSERT_TRUE(write_header(r_));
  head.assign(r_.hbuf.pos, r_.hbuf.last);
  EXPECT_FALSE(r_.chunked_out);
  EXPECT_NE(head.find("Content-Length: 12"), std::string::npos) << head;
  r_.line.version = 1001;
  r_.headers_out.length_only = true;
  ASSERT_TRUE(write_header(r_));
  EXPECT_FALSE(r_.chunked_out);
}

TEST_F(HeadWriter, TheHeadWriterSaysChunkedForABodyOfUnknownLength) {
  r_.line.version = 1001;
  r_.check.keep_alive = true;
  loc_.keepalive_timeout = 75000;
  r_.headers_out.status = 200;
  r_.headers_out.content_length = -1;
  ASSERT_TRUE(write_header(r_));
  const std::string head(r_.hbuf.pos, r_.hbuf.last);
  EXPECT_NE(head.find("\r\nTransfer-Encoding: chunked\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nConnection: keep-alive\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("Content-Length"), std::string::npos) << head;
  EXPECT_TRUE(r_.chunked_out);
}

TEST_F(HeadWriter, TheHeadWriterClosesAnHttp10BodyOfUnknownLength) {
  r_.line.version = 1000;
  r_.check.keep_alive = true;  // "Connection: keep-alive" from the client
  loc_.keepalive_timeout = 75000;
  r_.headers_out.status = 200;
  r_.headers_out.content_length = -1;
  ASSERT_TRUE(write_header(r_));
  const std::string head(r_.hbuf.pos, r_.hbuf.last);
  EXPECT_EQ(head.find("Transfer-Encoding"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nConnection: close\r\n"), std::string::npos) << head;
  EXPECT_FALSE(r_.keepalive);
  EXPECT_FALSE(r_.chunked_out);
}

TEST_F(HeadWriter, TheHeadWriterKeepsContentLengthWhenTheLengthIsKnown) {
  r_.line.version = 1001;
  r_.check.keep_alive = true;
  loc_.keepalive_timeout = 75000;
  r_.headers_out.status = 200;
  r_.headers_out.content_length = 12;
  ASSERT_TRUE(write_header(r_));
  const std::string head(r_.hbuf.pos, r_.hbuf.last);
  EXPECT_NE(head.find("\r\nContent-Length: 12\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("Transfer-Encoding"), std::string::npos) << head;
  EXPECT_FALSE(r_.chunked_out);
}

// A head written once a graceful stop began promises no keep-alive (nginx's
// header filter, when ngx_exiting is set).
TEST_F(HeadWriter, AHeadWrittenWhileTheWorkerExitsSaysConnectionClose) {
  r_.line.version = 1001;
  r_.check.keep_alive = true;
  loc_.keepalive_timeout = 75000;
  loc_.keepalive_requests = 1000;
  r_.headers_out.status = 200;
  r_.headers_out.content_length = 2;
  loop_->set_exiting();
  ASSERT_TRUE(write_header(r_));
  const std::string head(r_.hbuf.pos, r_.hbuf.last);
  EXPECT_NE(head.find("\r\nConnection: close\r\n"), std::string::npos) << head;
  EXPECT_FALSE(r_.keepalive);
}

}  // namespace
}  // namespace vigil::http
