// Feeds arbitrary bytes to gunzip's inflate path (http/gzip/gzip.cc) as a
// response body with Content-Encoding: gzip, in pieces whose sizes the input
// chooses, through output buffers as small as gunzip_buffers allows, to a
// writer that sometimes answers "again". Whatever the bytes, the filter must
// read every buffer it is given before it says kBodyOk, end the body with
// the last buffer when it succeeds, and never write past its buffers
// (AddressSanitizer's part); its memory goes back to the worker each time.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>

#include "fuzz_check.h"
#include "http/core/conf.h"
#include "http/core/filters.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "http/core/servers.h"
#include "http/core/worker.h"
#include "http/gzip/gzip.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

using vigil::fuzz::check;
namespace http = vigil::http;

namespace {

std::size_t g_out = 0;
bool g_last = false;
int g_again = 0;
vigil::Chain* g_held = nullptr;

// Holds what it is given until resumed (as HTTP/1's writer), answering
// "again" while g_again lasts.
int writer(http::Request&, vigil::Chain* in) {
  if (in != nullptr) g_held = in;
  if (g_again > 0) {
    --g_again;
    return http::kBodyAgain;
  }
  for (vigil::Chain* cl = g_held; cl != nullptr; cl = cl->next) {
    g_out += cl->buf->size();
    g_last = g_last || cl->buf->last_buf;
    cl->buf->pos = cl->buf->last;
  }
  g_held = nullptr;
  return http::kBodyOk;
}

struct World {
  World() {
    vigil::EventLoopConfig cfg;
    cfg.connections = 4;
    auto l = vigil::EventLoop::create(cfg, vigil::Log::global());
    check(static_cast<bool>(l), "an event loop");
    loop = std::move(l.value());
    worker = std::make_unique<http::HttpWorker>(*loop, servers, 0);
    hc.worker = worker.get();
    c.log = &log;
    loc.module_confs.assign(http::kMaxHttpModules, nullptr);
    loc.module_confs[http::gzip_module().index()] = &conf;
    conf.gunzip = true;
    conf.gunzip_num = 2;
    conf.gunzip_size = 256;
    chain.add(http::gzip_body_filter);
  }
  http::HttpServers servers;
  std::unique_ptr<vigil::EventLoop> loop;
  std::unique_ptr<http::HttpWorker> worker;
  http::HttpConnection hc;
  vigil::Connection c;
  vigil::Log log;
  http::HttpLocConf loc;
  http::GzipConf conf;
  http::BodyFilterChain chain{writer};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static World* w = new World();  // kept for the process: the loop and the worker's cache
  if (size < 1) return 0;
  const std::size_t piece = 1 + data[0] % 64;
  std::string body(reinterpret_cast<const char*>(data + 1), size - 1);

  auto* r = new (std::nothrow) http::Request();
  if (r == nullptr) return 0;
  r->hc = &w->hc;
  r->c = &w->c;
  r->loc = &w->loc;
  r->line.version = 1001;
  r->headers_out.content_encoding = "gzip";
  check(http::gunzip_header_filter(*r) == 0, "a client without gzip gets gunzip");
  check(r->body_changed && r->headers_out.content_encoding.empty(), "the head is decoded");
  g_out = 0;
  g_last = false;
  g_held = nullptr;
  std::size_t at = 0;
  bool failed = false;
  do {
    const std::size_t n = std::min(piece, body.size() - at);
    vigil::Buf b;
    b.reset(body.data() + at, n);
    b.last = b.pos + n;
    b.last_buf = at + n == body.size();
    vigil::Chain link{&b, nullptr};
    g_again = static_cast<int>(n % 3);
    int rc = w->chain.run(*r, &link);
    for (int i = 0; i < 8 && rc == http::kBodyAgain; ++i) rc = w->chain.run(*r, nullptr);
    if (rc == http::kBodyError) {
      failed = true;
      break;
    }
    check(rc == http::kBodyOk, "the writer was resumed until done");
    check(b.empty(), "every buffer is read before kBodyOk");
    at += n;
  } while (at < body.size());
  if (!failed) check(g_last, "a body that inflated ends with the last buffer");
  http::release_gzip(*r);
  check(r->ctx[http::gzip_module().index()] == nullptr, "the context is given back");
  delete r;
  return 0;
}
