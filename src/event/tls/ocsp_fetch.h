#pragma once
// One OCSP request over HTTP on a worker's loop (nginx's ngx_ssl_ocsp_ctx_t
// with ngx_ssl_ocsp_request / _connect / _write_handler / _read_handler):
// the responder's name resolved by the loop's resolver (or its addresses
// known at load time), each address tried in turn until one answers, the
// request written, the answer read until the responder closes, with
// `timeout` on each step. Nothing blocks the worker.
//
//   OcspFetch::Params p;  p.responder = &r;  p.request = ...;  p.log = &log;
//   OcspFetch* f = OcspFetch::start(loop, std::move(p), done, data);
//   ... done(data, ok, body) runs later, once, from an event of the loop
//   (never inside start), then the fetch frees itself; or f->cancel().
//
// `ok` false: no usable answer (a failure of every address, already logged,
// or an HTTP status other than 200, which nginx does not log either).
//
// Ownership: the fetch belongs to the loop's list of fetches; the
// responder must outlive it. At a worker's exit ocsp_exit_loop cancels the
// fetches still running (their done is not called).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "event/resolver.h"
#include "event/tls/ocsp.h"
#include "vigil/core/clock.h"
#include "vigil/event/event.h"
#include "vigil/event/peer.h"

namespace vigil {

class EventLoop;
class Log;

class OcspFetch {
 public:
  struct Params {
    const OcspResponder* responder = nullptr;
    std::shared_ptr<const ResolverConf> resolver;  // null: none defined
    Msec resolver_timeout = 30000;
    Msec timeout = 60000;
    std::string request;    // ocsp_build_request
    std::string cert_name;  // for the log ("" when none)
    Log* log = nullptr;
    // The owner's pointer to this fetch, set to null when the fetch ends
    // (done, cancel, or a worker's exit), may be null.
    OcspFetch** slot = nullptr;
  };
  using Done = void (*)(void* data, bool ok, std::string_view body);

  // Null when there is no memory (logged).
  static OcspFetch* start(EventLoop& loop, Params params, Done done, void* data);
  // Stops it: done is not called, the fetch is freed.
  void cancel();

  ~OcspFetch();
  OcspFetch(const OcspFetch&) = delete;
  OcspFetch& operator=(const OcspFetch&) = delete;

  // The loop's list of fetches.
  OcspFetch* prev_ = nullptr;
  OcspFetch* next_ = nullptr;

 private:
  OcspFetch(EventLoop& loop, Params params, Done done, void* data);
  static void on_start(Event& ev);
  static void on_resolved(ResolveRequest& q);
  static void on_write(Event& ev);
  static void on_read(Event& ev);
  void begin();
  void connect();
  void next();
  void fail();
  void finish(bool ok, std::string_view body);
  void close_peer();
  // " while requesting certificate status, responder: ..., peer: ..., certificate: ..."
  std::string context() const;

  EventLoop& loop_;
  Params p_;
  Done done_;
  void* data_;
  Event start_;
  ResolveRequest query_;
  Resolver* resolver_ = nullptr;  // set while query_ waits
  std::vector<OcspAddress> resolved_;
  const std::vector<OcspAddress>* addrs_ = nullptr;
  std::size_t naddr_ = 0;
  PeerConnection pc_;
  std::size_t sent_ = 0;
  std::string answer_;
};

// Cancels the loop's fetches still running (a worker's exit hook); it runs
// before the resolvers are freed.
void ocsp_exit_loop(EventLoop& loop);

}  // namespace vigil
