// The grpc handler, its protocol table on the upstream core, and what is
// kept per backend connection (nginx's ngx_http_grpc_handler and
// ngx_http_grpc_get_connection_data).
#include "http/grpc/grpc.h"

#include <cstring>
#include <memory>
#include <new>

#include "codec/tokens.h"
#include "http/core/worker.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"
#include "vigil/event/pool.h"

namespace vigil::http::grpc {
namespace {

// The per-connection entries of this worker's loop, one per slot of its
// connection pool, made once; an entry belongs to the connection whose
// serial number it holds (a slot reused by another connection starts anew).
struct ConnTable {
  EventLoop* loop = nullptr;
  std::unique_ptr<GrpcConnState[]> entries;
  std::size_t n = 0;
};
thread_local ConnTable t_conns;

bool attach(Upstream& u) {
  auto& gs = static_cast<GrpcState&>(u);
  Connection& c = *u.u;
  GrpcConnState* cs = conn_state(c, !u.pc.cached);
  if (cs == nullptr) {
    upstream_core::log_error(u, static_cast<int>(LogLevel::kError), 0,
                             "no connection data found for keepalive http2 connection");
    u.upstream_reusable = false;
    return false;
  }
  gs.conn = cs;
  if (cs->last_stream_id >= 0x7ffffffd) {
    // No stream id left on this connection: a fresh one for this request.
    u.upstream_reusable = false;
    return false;
  }
  gs.id = cs->last_stream_id == 0 ? 1 : cs->last_stream_id + 2;
  cs->last_stream_id = gs.id;
  gs.send_window = cs->init_window;
  gs.recv_window = kMaxWindow;
  // The preface goes on a fresh connection only.
  u.head.pos = u.head.start + (u.pc.cached ? kPrefaceLen : 0);
  // The stream id into every frame of the header block.
  char* p = u.head.start + gs.headers_off;
  while (p + 9 <= u.head.last) {
    const std::uint32_t len = (static_cast<std::uint32_t>(static_cast<unsigned char>(p[0])) << 16) |
                              (static_cast<std::uint32_t>(static_cast<unsigned char>(p[1])) << 8) |
                              static_cast<unsigned char>(p[2]);
    p[5] = static_cast<char>((gs.id >> 24) & 0x7f);
    p[6] = static_cast<char>((gs.id >> 16) & 0xff);
    p[7] = static_cast<char>((gs.id >> 8) & 0xff);
    p[8] = static_cast<char>(gs.id & 0xff);
    p += 9 + len;
  }
  return true;
}

void reinit_request(Upstream& u) {
  auto& gs = static_cast<GrpcState&>(u);
  gs.reset_frames();
  gs.end_sent = false;
  gs.fields_used = 0;
  gs.ntrailers = 0;
}

// Sends the control frames still queued when the response is complete, so
// the connection goes back to the cache with nothing owed to the backend;
// what does not go at once costs the connection its reuse.
void flush_at_end(GrpcState& gs) {
  if (gs.fstage != FrameStage::kHeader || gs.fh_len != 0) gs.upstream_reusable = false;
  if (gs.ctl_len == 0 || gs.u == nullptr) return;
  if (gs.ctl_pending != nullptr) {
    gs.upstream_reusable = false;
    return;
  }
  Connection& c = *gs.u;
  const long n = c.send(c, gs.ctl, gs.ctl_len);
  if (n != static_cast<long>(gs.ctl_len)) gs.upstream_reusable = false;
  gs.ctl_len = 0;
}

// What a parse() call found, to the core's view of the response.
void after_parse(GrpcState& gs) {
  if (!gs.keep_conn) gs.upstream_reusable = false;
  if (gs.frames_done) gs.resp_done = true;
  if (gs.trailers_done && gs.r->headers_out.trailers != gs.trailers) {
    gs.r->headers_out.trailers = gs.trailers;
    gs.r->headers_out.ntrailers = gs.ntrailers;
    gs.resp_trailers = gs.trailers;  // $upstream_trailer_NAME
    gs.nresp_trailers = gs.ntrailers;
  }
}

upstream_core::HeadResult process_header(Upstream& u, Buf& b) {
  auto& gs = static_cast<GrpcState&>(u);
  char* w = b.pos;  // no DATA of ours before the head
  const FrameStep st = gs.parse(b.pos, b.last, w);
  after_parse(gs);
  if (st == FrameStep::kError) return upstream_core::HeadResult::kInvalid;
  if (st == FrameStep::kHead) {
    ResponseHead& h = gs.resp;
    h.version = 1001;
    h.keep_alive = true;
    h.status = gs.status;
    h.content_length = gs.content_length;
    if (gs.r->line.method == Method::kHead || h.status == 204 || h.status == 304) {
      h.body = BodyKind::kNone;
      gs.body_rest = 0;  // no body, whatever the length says (nginx)
    } else if (gs.end_stream) {
      h.body = BodyKind::kLength;
      h.content_length = 0;
    } else if (h.content_length >= 0) {
      h.body = BodyKind::kLength;
    } else {
      h.body = BodyKind::kChunked;
    }
    return upstream_core::HeadResult::kDone;
  }
  // All taken: the next read starts the buffer over.
  b.pos = b.last = b.start;
  return upstream_core::HeadResult::kAgain;
}

bool input_filter_init(Upstream& u) {
  auto& gs = static_cast<GrpcState&>(u);
  if (gs.end_stream) {
    gs.resp_done = true;
    flush_at_end(gs);
  }
  return true;
}

bool input_filter(Upstream& u, Buf& b, char* p, std::size_t n) {
  auto& gs = static_cast<GrpcState&>(u);
  char* w = p;
  char* in = p;
  const FrameStep st = gs.parse(in, p + n, w);
  b.last = w;
  if (st != FrameStep::kMore) {
    // Logged: the response ends here, short of its end, even when its
    // last frame came before the error in this read (nginx resets the
    // client's stream then too).
    gs.premature = true;
    gs.upstream_eof = true;
    gs.upstream_reusable = false;
    return true;
  }
  after_parse(gs);
  if (gs.resp_done) {
    flush_at_end(gs);
  } else if (gs.ctl_len > 0) {
    upstream_core::want_send(gs);
  }
  return true;
}

void finalize(Upstream& u) {
  auto& gs = static_cast<GrpcState&>(u);
  gs.free_inflater();
  if (gs.fields_mem != nullptr) gs.r->hc->worker->buffers().put(gs.fields_mem, gs.fields_cap);
  if (gs.r->headers_out.trailers == gs.trailers) {
    gs.r->headers_out.trailers = nullptr;
    gs.r->headers_out.ntrailers = 0;
  }
  gs.~GrpcState();
}

constexpr upstream_core::UpstreamProtocol kHttp2{
    .create_request = create_request,
    .reinit_request = reinit_request,
    .body_output = body_output,
    .process_header = process_header,
    .input_filter_init = input_filter_init,
    .input_filter = input_filter,
    .finalize = finalize,
    .attach = attach,
    .control_output = control_output,
    .own_connections = true,
    .scheme = "grpc",
    .tls_scheme = "grpcs",
};

int grpc_content(Request& r) {
  return start(r);
}

// grpc_pass with variables (nginx's ngx_http_grpc_eval): an optional
// grpc:// or grpcs://, then an upstream block's name, an address or a name
// to resolve. 0, or the status the client gets.
int eval_url(GrpcState& gs) {
  const GrpcConf& conf = gs.gconf();
  std::string_view url;
  if (!upstream_core::evaluate_url(gs, conf.url, url)) return 500;
  std::string_view rest = url;
  gs.https = false;
  if (upstream_core::has_scheme(url, "grpc://")) {
    rest = url.substr(7);
  } else if (upstream_core::has_scheme(url, "grpcs://")) {
    rest = url.substr(8);
    gs.https = true;
  }
  std::string_view host;
  std::string_view port_text;
  unsigned port = 0;
  if (const int status =
          upstream_core::route_to(gs, url, rest, 0, conf.groups, host, port_text, port);
      status != 0) {
    return status;
  }
  gs.authority = rest;  // the host, and the port when one is written
  return 0;
}

}  // namespace

void GrpcState::frame_error(const char* what) {
  upstream_core::log_error(*this, static_cast<int>(LogLevel::kError), 0, what);
  upstream_reusable = false;
}

void GrpcState::control_queued() {
  upstream_core::want_send(*this);
}

void GrpcState::window_opened() {
  if (body_blocked) upstream_core::want_send(*this);
}

const char* GrpcState::store_field(std::string_view name, std::string_view value, bool trailer) {
  if (fields_mem == nullptr) {
    const std::size_t size = conf->buffer_size;
    fields_mem = r->hc->worker->buffers().get(size);
    if (fields_mem == nullptr) return "no memory for the upstream's header";
    fields_cap = static_cast<std::uint32_t>(size);
  }
  if (fields_used + name.size() + value.size() > fields_cap) return "upstream sent too big header";
  if (trailer ? ntrailers == kMaxTrailers : nfields == upstream_core::kMaxResponseFields) {
    return trailer ? "upstream sent too many trailers" : "upstream sent too many header fields";
  }
  char* at = fields_mem + fields_used;
  std::memcpy(at, name.data(), name.size());
  std::memcpy(at + name.size(), value.data(), value.size());
  fields_used += static_cast<std::uint32_t>(name.size() + value.size());
  HeaderField f;
  f.name = std::string_view(at, name.size());
  f.value = std::string_view(at + name.size(), value.size());
  f.id = header_id(f.name);
  if (trailer) {
    trailers[ntrailers++] = f;
  } else {
    fields[nfields++] = f;
  }
  return nullptr;
}

void GrpcState::drop_fields() {
  nfields = 0;
  fields_used = 0;
}

const ContentHandler kContent{"grpc_pass", grpc_content, true, true};

GrpcConnState* conn_state(Connection& c, bool fresh) {
  EventLoop& loop = *c.loop;
  ConnectionPool& pool = loop.pool();
  if (t_conns.loop != &loop || t_conns.n != pool.size()) {
    if (!fresh) return nullptr;
    auto* entries = new (std::nothrow) GrpcConnState[pool.size()];
    if (entries == nullptr) return nullptr;
    t_conns.entries.reset(entries);
    t_conns.n = pool.size();
    t_conns.loop = &loop;
  }
  const std::size_t i = static_cast<std::size_t>(&c - pool.connections());
  if (i >= t_conns.n) return nullptr;
  GrpcConnState& e = t_conns.entries[i];
  if (fresh) {
    e = GrpcConnState{};
    e.number = c.number;
    return &e;
  }
  return e.number == c.number ? &e : nullptr;
}

int start(Request& r) {
  const GrpcConf& conf = grpc_conf(*r.loc);
  if (!conf.enabled || (conf.group == nullptr && !conf.variables)) return 500;
  if (r.upstream != nullptr) upstream_core::release(r);
  HttpWorker& w = *r.hc->worker;
  char* mem = w.buffers().get(sizeof(GrpcState));
  if (mem == nullptr) return 500;
  auto* gs = new (mem) GrpcState();
  r.upstream = gs;
  gs->r = &r;
  gs->conf = &conf;
  gs->protocol = &kHttp2;
  gs->state_mem = mem;
  gs->state_size = sizeof(GrpcState);
  gs->group = conf.group;
  gs->https = conf.https;
  gs->target = conf.target;
  gs->authority = conf.host;
  if (conf.variables) {
    if (const int status = eval_url(*gs); status != 0) return status;
  }
  return upstream_core::start(*gs);
}

}  // namespace vigil::http::grpc
