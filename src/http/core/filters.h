#pragma once
// The response pipeline (nginx's header and body filter chains).
//
// The head: a content handler fills r.headers_out and calls send_header(),
// which runs every header filter in order (the not-modified, range and
// add_header filters; http/core/modules.cc lists them) and then the
// protocol's head writer. A filter may change the head (304, 206), or refuse
// the response with a status (412, 416) that the handler returns to the
// phase engine.
//
// The body: the producer (a content handler) passes the body's buffers to
// output_filter(), as chains of memory ranges or file ranges (vigil/core/
// buffer.h); a buffer with last_buf ends the body. Each body filter passes
// what it makes of the chain to the next one; the last step is the
// protocol's final writer (HTTP/1: write_filter, http/v1/writer.cc), which
// sends the head with the first body bytes and owns the framing, sendfile,
// limit_rate and the write budget.
//
// Who owns what: the links and buffers a producer passes stay its own; it
// must not change or reuse a buffer until the buffer is empty (its bytes
// are sent; the writer advances pos / file_pos). A filter that makes
// buffers of its own (a chunk's size line) keeps them in memory it owns for
// the request (its Request::ctx slot, or a fixed array in the request), never
// a heap allocation per call.

#include <cstdint>

namespace vigil {
struct Chain;
}

namespace vigil::http {

struct Request;

// 0: the head is written (r.header_only may have become true: a 304);
// otherwise the status to answer instead (the handler returns it).
int send_header(Request& r);

// A header filter: 0 to go on, or a status that ends the response.
using HeaderFilter = int (*)(Request& r);

// The header filters of a configuration, in the order they run; filled when
// the configuration is loaded (register_filters), read-only afterwards.
class HeaderFilterChain {
 public:
  static constexpr std::uint32_t kMaxFilters = 8;
  // Adds `f` after the filters added before it; false when the chain is full.
  bool add(HeaderFilter f);
  // 0, or the first status a filter answered.
  int run(Request& r) const;
  std::uint32_t size() const { return n_; }
  bool contains(HeaderFilter f) const;

 private:
  HeaderFilter filters_[kMaxFilters] = {};
  std::uint32_t n_ = 0;
};

// The filters, in the order they run (modules.cc).
int not_modified_header_filter(Request& r);  // filters/not_modified.cc
int range_header_filter(Request& r);         // filters/range.cc
int add_header_filter(Request& r);           // filters/add_header.cc
int expires_header_filter(Request& r);       // filters/expires.cc

// ---- the body side -------------------------------------------------------------------

// What a body filter and the final writer return.
inline constexpr int kBodyOk = 0;      // all passed on, and sent
inline constexpr int kBodyAgain = 1;   // bytes wait in the writer: the client's write event
                                       // (its handler is the producer's) comes back
inline constexpr int kBodyError = -1;  // the response cannot go on: the producer ends it

class BodyFilterChain;

// The rest of the chain after a filter: next(r, chain) runs the following
// filter, or the final writer after the last one.
class BodyFilterNext {
 public:
  int operator()(Request& r, Chain* in) const;

 private:
  friend class BodyFilterChain;
  BodyFilterNext(const BodyFilterChain& chain, std::uint32_t index)
      : chain_(&chain), index_(index) {}
  const BodyFilterChain* chain_;
  std::uint32_t index_;
};

// A body filter: gets the new buffers `in` (nullptr: nothing new, the writer
// is being resumed) and returns what `next` returned, or kBodyError.
using BodyFilter = int (*)(Request& r, Chain* in, BodyFilterNext next);
// The protocol's final writer, the end of the chain.
using BodyWriter = int (*)(Request& r, Chain* in);

// The filters of one protocol, in order, then its final writer. Filled when
// a configuration is loaded (register_filters, modules.cc), read-only
// afterwards.
class BodyFilterChain {
 public:
  static constexpr std::uint32_t kMaxFilters = 8;
  explicit BodyFilterChain(BodyWriter writer) : writer_(writer) {}
  // Adds `f` after the filters added before it (it sees their output); false
  // when the chain is full.
  bool add(BodyFilter f);
  // Runs `in` through every filter, then the writer.
  int run(Request& r, Chain* in) const { return BodyFilterNext(*this, 0)(r, in); }
  std::uint32_t size() const { return n_; }
  bool contains(BodyFilter f) const;

 private:
  friend class BodyFilterNext;
  BodyFilter filters_[kMaxFilters] = {};
  std::uint32_t n_ = 0;
  BodyWriter writer_;
};

// Every producer's entry (nginx's ngx_http_output_filter): the
// configuration's body filters, then HTTP/1's final writer.
int output_filter(Request& r, Chain* in);

// HTTP/1's final writer, the end of the body filter chain (http/v1/
// writer.cc): queues `in` after the head and what still waits, and sends
// within the write budget and limit_rate (sendfile, or reading the file when
// it is off). kBodyOk: all sent; kBodyAgain: the write event (posted,
// delayed or armed with send_timeout) resumes; kBodyError.
int write_filter(Request& r, Chain* in);

// The filters of one loaded configuration (HttpServers::filters; every
// server of it points at them). A module's filter is in the chains only when
// the configuration uses the module (add_header, and gzip once it exists, are
// inserted by their directives), so an unused filter costs nothing per
// request.
struct FilterChains {
  HeaderFilterChain header;
  BodyFilterChain body{write_filter};
};

class HttpServers;
class HttpModule;
// Fills the chains for a configuration, in the order the filters run
// (modules.cc); false when a chain is full.
bool register_filters(FilterChains& chains, const HttpServers& servers);
// The module that builds a configuration's chains (register_filters) once
// every other HTTP module has merged its confs: the last of http_modules().
const HttpModule& filters_module();

// The built-in body filters.
int chunked_body_filter(Request& r, Chain* in, BodyFilterNext next);  // filters/chunked.cc

}  // namespace vigil::http
