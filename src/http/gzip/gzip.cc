// gzip, gzip_static's test and gunzip (gzip.h). The header filters decide and
// rewrite the head; one body filter runs zlib over the body, deflating or
// inflating, into at most gzip_buffers (gunzip_buffers) output buffers that
// it passes on together and reuses once the writer has sent them. Input it
// cannot take yet (the output buffers are full and unsent) stays in the
// producer's buffers, which are empty only once zlib has read them: the
// producer's "do not reuse a buffer until it is empty" rule holds, and a
// file range (a static file, sendfile or not) is read into memory here, a
// piece at a time.
#include "http/gzip/gzip.h"

#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "codec/parse.h"
#include "codec/tokens.h"
#include "core/regex.h"
#include "core/conf/values.h"
#include "http/core/conf.h"
#include "http/core/filters.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "http/core/servers.h"
#include "http/core/worker.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

std::string lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

// `needle` (lower case) occurs in `hay`, case-insensitively.
bool icontains(std::string_view hay, std::string_view needle) {
  if (needle.empty()) return true;
  if (needle.size() > hay.size()) return false;
  for (std::size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    std::size_t k = 0;
    while (k < needle.size() && lower(hay[i + k]) == needle[k]) ++k;
    if (k == needle.size()) return true;
  }
  return false;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A qvalue (RFC 9110 §12.4.2) above zero; a malformed one counts as zero,
// as nginx declines it.
bool qvalue_positive(std::string_view q) {
  if (q.empty() || q.size() > 5) return false;
  if (q[0] != '0' && q[0] != '1') return false;
  if (q.size() == 1) return q[0] == '1';
  if (q[1] != '.') return false;
  bool nonzero = false;
  for (std::size_t i = 2; i < q.size(); ++i) {
    if (q[i] < '0' || q[i] > '9') return false;
    if (q[0] == '1' && q[i] != '0') return false;
    nonzero = nonzero || q[i] != '0';
  }
  return q[0] == '1' || nonzero;
}

// ---- the configuration ----------------------------------------------------------------

Status set_types(const DirectiveCall& call, GzipConf& conf) {
  conf.types = {"text/html"};
  conf.any_type = false;
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    if (call.arg(i) == "*") {
      conf.any_type = true;
      continue;
    }
    std::string t = lowered(call.arg(i));
    if (t != "text/html") conf.types.push_back(std::move(t));
  }
  return Status::ok();
}

Status set_proxied(const DirectiveCall& call, GzipConf& conf) {
  static constexpr std::pair<std::string_view, std::uint32_t> kNames[] = {
      {"off", kProxiedOff},          {"expired", kProxiedExpired},
      {"no-cache", kProxiedNoCache}, {"no-store", kProxiedNoStore},
      {"private", kProxiedPrivate},  {"no_last_modified", kProxiedNoLastModified},
      {"no_etag", kProxiedNoEtag},   {"auth", kProxiedAuth},
      {"any", kProxiedAny},
  };
  std::uint32_t mask = 0;
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    std::uint32_t bit = 0;
    for (const auto& [name, value] : kNames) {
      if (conf::iequals(name, call.arg(i))) bit = value;
    }
    if (bit == 0) return call.invalid_value(i);
    mask |= bit;
  }
  conf.proxied = mask;
  return Status::ok();
}

// "number size", both above zero (gzip_buffers, gunzip_buffers).
Status parse_bufs(const DirectiveCall& call, std::uint32_t& num, std::size_t& size) {
  auto n = parse_number(call.arg(0));
  if (!n || *n == 0 || *n > 4096) return call.invalid_value(0);
  auto s = parse_size(call.arg(1));
  if (!s || *s == 0 || *s > (std::size_t{1} << 30)) return call.invalid_value(1);
  num = static_cast<std::uint32_t>(*n);
  size = static_cast<std::size_t>(*s);
  return Status::ok();
}

Status set_disable(const DirectiveCall& call, GzipConf& conf) {
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    const std::string& a = call.arg(i);
    if (a == "msie6") {
      conf.disable_msie6 = true;
      continue;
    }
    // A regular expression, matched without regard to case, as nginx's.
    auto re = Regex::compile(a, /*caseless=*/true);
    if (!re) return call.error(re.status().message());
    conf.disable.push_back(std::move(re.value()));
  }
  return Status::ok();
}

Status merge_gzip(const ConfInit& ctx, const GzipConf& parent, GzipConf& child) {
  if (!ctx.is_set("gzip_types")) {
    child.types = parent.types;
    child.any_type = parent.any_type;
  }
  if (!ctx.is_set("gzip_proxied")) child.proxied = parent.proxied;
  if (!ctx.is_set("gzip_buffers")) {
    child.bufs_num = parent.bufs_num;
    child.bufs_size = parent.bufs_size;
  }
  if (!ctx.is_set("gzip_disable")) {
    child.disable = parent.disable;
    child.disable_msie6 = parent.disable_msie6;
  }
  if (!ctx.is_set("gunzip_buffers")) {
    child.gunzip_num = parent.gunzip_num;
    child.gunzip_size = parent.gunzip_size;
  }
  return Status::ok();
}

// ---- the request's state -----------------------------------------------------------

// Input buffers one request may have handed over and not yet had read.
constexpr std::uint32_t kMaxInput = 128;

struct GzipCtx {
  z_stream zs;
  bool inflate = false;  // gunzip
  bool zinit = false;    // zs is set up (deflateEnd/inflateEnd owed)
  bool busy = false;     // output passed on and not yet sent
  bool done = false;     // the stream is finished and its end passed on
  bool last_seen = false;    // the producer's last buffer was read
  bool flush_pending = false;  // a flush buffer was read: send what there is
  bool member_end = false;     // gunzip: a gzip member ended
  bool inflate_more = false;   // gunzip: inflate filled the output, it may hold more
  int level = 1;
  std::int64_t length = -1;  // the body's length before coding (window size)
  std::size_t block_size = 0;
  // Output: `out_cap` buffers of `out_size`, taken as needed and reused.
  std::uint32_t out_cap = 0;
  std::uint32_t nout = 0;  // in use this round
  std::size_t out_size = 0;
  char** out_mem = nullptr;
  Buf* out = nullptr;
  Chain* links = nullptr;
  Buf end_mark;
  // Input not yet read, oldest first (a ring of the producer's buffers).
  Buf* in[kMaxInput] = {};
  std::uint32_t in_head = 0;
  std::uint32_t in_count = 0;
  Buf* cur = nullptr;  // the memory buffer zlib reads from (its pos follows)
  // A file range's piece read into memory.
  char* rbuf = nullptr;
  std::uint32_t rbuf_size = 0;
  char* etag = nullptr;  // the weakened ETag, "W/" + the original
};

const HttpModule& module() { return gzip_module(); }

GzipCtx* ctx_of(const Request& r) { return static_cast<GzipCtx*>(r.ctx[module().index()]); }

// zlib's memory from the worker's buffer cache: a warm worker allocates
// nothing per request. The size is kept in front of the block for zfree.
constexpr std::size_t kZHeader = 16;

voidpf z_alloc(voidpf opaque, uInt items, uInt size) {
  auto* cache = static_cast<BufferCache*>(opaque);
  const std::size_t n = static_cast<std::size_t>(items) * size;
  if (size != 0 && n / size != items) return Z_NULL;
  char* p = cache->get(n + kZHeader);
  if (p == nullptr) return Z_NULL;
  const std::size_t total = n + kZHeader;
  std::memcpy(p, &total, sizeof total);
  return p + kZHeader;
}

void z_free(voidpf opaque, voidpf address) {
  if (address == Z_NULL) return;
  char* p = static_cast<char*>(address) - kZHeader;
  std::size_t total = 0;
  std::memcpy(&total, p, sizeof total);
  static_cast<BufferCache*>(opaque)->put(p, total);
}

// The request's context with room for `num` output buffers and an ETag of
// `etag_len` + 2 bytes; null when no memory could be had.
GzipCtx* start_ctx(Request& r, std::uint32_t num, std::size_t size, std::size_t etag_len,
                   bool inflate) {
  BufferCache& cache = r.hc->worker->buffers();
  std::size_t block = (sizeof(GzipCtx) + 15) & ~std::size_t{15};
  const std::size_t arrays = num * (sizeof(char*) + sizeof(Buf) + sizeof(Chain));
  std::size_t need = block + arrays + etag_len + 2;
  need = (need + 4095) & ~std::size_t{4095};
  release_gzip(r);  // a second head (an error page after an internal redirect)
  char* mem = cache.get(need);
  if (mem == nullptr) return nullptr;
  auto* x = new (mem) GzipCtx();
  x->block_size = need;
  x->inflate = inflate;
  x->out_cap = num;
  x->out_size = size;
  char* p = mem + block;
  x->out_mem = reinterpret_cast<char**>(p);
  p += num * sizeof(char*);
  x->out = reinterpret_cast<Buf*>(p);
  p += num * sizeof(Buf);
  x->links = reinterpret_cast<Chain*>(p);
  p += num * sizeof(Chain);
  x->etag = p;
  for (std::uint32_t i = 0; i < num; ++i) {
    x->out_mem[i] = nullptr;
    new (&x->out[i]) Buf();
    new (&x->links[i]) Chain();
  }
  x->zs.zalloc = z_alloc;
  x->zs.zfree = z_free;
  x->zs.opaque = &cache;
  r.ctx[module().index()] = x;
  return x;
}

// ---- the response head --------------------------------------------------------------

HeaderField* find_out_field(HeadersOut& h, std::string_view name) {
  for (std::uint32_t i = 0; i < h.nfields; ++i) {
    if (!h.fields[i].omit && iequals(h.fields[i].name, name)) return &h.fields[i];
  }
  return nullptr;
}

bool has_request_field(const Request& r, HeaderId id, std::string_view name) {
  for (std::uint32_t i = 0; i < r.nfields; ++i) {
    const HeaderField& f = r.fields[i];
    if (id != HeaderId::kOther ? f.id == id : iequals(f.name, name)) return true;
  }
  return false;
}

// The response's Content-Encoding: the server's own, or a proxied field.
std::string_view content_encoding(HeadersOut& h) {
  if (!h.content_encoding.empty()) return h.content_encoding;
  HeaderField* f = find_out_field(h, "content-encoding");
  return f != nullptr ? f->value : std::string_view{};
}

bool type_ok(const GzipConf& conf, std::string_view type) {
  if (conf.any_type) return true;
  const std::size_t semi = type.find(';');
  if (semi != std::string_view::npos) type = type.substr(0, semi);
  type = trim(type);
  if (type.empty()) return false;
  for (const std::string& t : conf.types) {
    if (iequals(t, type)) return true;
  }
  return false;
}

std::size_t etag_room(HeadersOut& h) {
  std::size_t n = h.etag.size();
  if (HeaderField* f = find_out_field(h, "etag"); f != nullptr && f->value.size() > n) {
    n = f->value.size();
  }
  return n;
}

// nginx's ngx_http_weak_etag: a strong ETag gets "W/", a weak one stays, and
// anything else is dropped.
std::string_view weaken(std::string_view etag, char* mem) {
  if (etag.size() > 2 && etag[0] == 'W' && etag[1] == '/') return etag;
  if (etag.empty() || etag[0] != '"') return {};
  mem[0] = 'W';
  mem[1] = '/';
  std::memcpy(mem + 2, etag.data(), etag.size());
  return {mem, etag.size() + 2};
}

// The coded body's head: no length (it is not known), no ranges (they would
// be of the coded bytes), a weak ETag (the bytes differ from the
// representation's).
void recode_head(Request& r, GzipCtx& x) {
  HeadersOut& h = r.headers_out;
  x.length = h.content_length;
  h.content_length = -1;
  h.accept_ranges = false;
  if (HeaderField* f = find_out_field(h, "accept-ranges")) f->omit = true;
  if (HeaderField* f = find_out_field(h, "content-length")) f->omit = true;
  if (!h.etag.empty()) {
    h.etag = weaken(h.etag, x.etag);
  } else if (HeaderField* f = find_out_field(h, "etag")) {
    const std::string_view w = weaken(f->value, x.etag);
    if (w.empty()) {
      f->omit = true;
    } else {
      f->value = w;
    }
  }
  r.body_changed = true;
}

// ---- the body -----------------------------------------------------------------------------

enum { kNeedInput = 0, kSend = 1, kFailed = -1 };

void log_z(Request& r, const char* what, int rc, const z_stream& zs) {
  VIGIL_LOG(*r.c->log, kError, 0, "*%llu %s() failed: %d (%s)",
            static_cast<unsigned long long>(r.c->number), what, rc,
            zs.msg != nullptr ? zs.msg : "");
}

bool z_start(Request& r, GzipCtx& x) {
  int rc;
  if (x.inflate) {
    rc = ::inflateInit2(&x.zs, MAX_WBITS + 16);
  } else {
    // As nginx: a body known to be short gets a smaller window and hash,
    // hence less memory (zlib's window is 262 bytes short of 2^wbits).
    int wbits = MAX_WBITS;
    int memlevel = MAX_MEM_LEVEL - 1;
    if (x.length > 0) {
      while (x.length < (std::int64_t{1} << (wbits - 1)) - 262) {
        --wbits;
        --memlevel;
      }
      if (memlevel < 1) memlevel = 1;
    }
    rc = ::deflateInit2(&x.zs, x.level, Z_DEFLATED, wbits + 16, memlevel, Z_DEFAULT_STRATEGY);
  }
  if (rc != Z_OK) {
    log_z(r, x.inflate ? "inflateInit2" : "deflateInit2", rc, x.zs);
    return false;
  }
  x.zinit = true;
  x.zs.avail_out = 0;
  x.zs.avail_in = 0;
  return true;
}

// Points zlib at the next output buffer; false when none could be had.
bool next_out(Request& r, GzipCtx& x) {
  if (x.nout > 0) x.out[x.nout - 1].last = x.out[x.nout - 1].end;
  char*& mem = x.out_mem[x.nout];
  if (mem == nullptr) {
    mem = r.hc->worker->buffers().get(x.out_size);
    if (mem == nullptr) {
      VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu no memory for a gzip buffer",
                static_cast<unsigned long long>(r.c->number));
      return false;
    }
  }
  x.out[x.nout].reset(mem, x.out_size);
  x.zs.next_out = reinterpret_cast<Bytef*>(mem);
  x.zs.avail_out = static_cast<uInt>(x.out_size);
  ++x.nout;
  return true;
}

// Points zlib at the next input bytes: a memory buffer's, or a piece of a
// file range read into rbuf. Buffers found empty are dropped, noting a last
// or flush mark. False on a read error.
bool take_input(Request& r, GzipCtx& x) {
  x.cur = nullptr;
  while (x.in_count > 0) {
    Buf* b = x.in[x.in_head];
    if (b->in_file && b->file_pos < b->file_last) {
      const std::size_t piece = r.loc->output_buffer < 4096 ? 4096 : r.loc->output_buffer;
      if (r.hc->worker->buffers().reserve(x.rbuf, x.rbuf_size, piece) == nullptr) return false;
      const off_t left = b->file_last - b->file_pos;
      const std::size_t n = left < static_cast<off_t>(x.rbuf_size) ? static_cast<std::size_t>(left)
                                                                    : x.rbuf_size;
      ssize_t got;
      do {
        got = ::pread(b->file_fd, x.rbuf, n, b->file_pos);
      } while (got == -1 && errno == EINTR);
      if (got <= 0) {
        if (got == 0) {
          VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu file was truncated while being read",
                    static_cast<unsigned long long>(r.c->number));
        } else {
          VIGIL_LOG(*r.c->log, kCrit, errno, "*%llu pread() failed",
                    static_cast<unsigned long long>(r.c->number));
        }
        return false;
      }
      b->file_pos += got;
      x.zs.next_in = reinterpret_cast<Bytef*>(x.rbuf);
      x.zs.avail_in = static_cast<uInt>(got);
      return true;
    }
    if (!b->in_file && b->pos < b->last) {
      const std::size_t n = static_cast<std::size_t>(b->last - b->pos);
      x.zs.next_in = reinterpret_cast<Bytef*>(b->pos);
      x.zs.avail_in = n > 0x40000000 ? 0x40000000 : static_cast<uInt>(n);
      x.cur = b;
      return true;
    }
    if (b->last_buf) x.last_seen = true;
    if (b->flush) x.flush_pending = true;
    x.in_head = (x.in_head + 1) % kMaxInput;
    --x.in_count;
  }
  return true;
}

// Runs zlib until the output buffers are full (kSend), the stream or a flush
// is complete (kSend), or the input is used up (kNeedInput: what was made
// waits for more).
int produce(Request& r, GzipCtx& x) {
  for (;;) {
    if (x.zs.avail_out == 0) {
      if (x.nout == x.out_cap) return kSend;
      if (!next_out(r, x)) return kFailed;
    }
    if (x.zs.avail_in == 0 && !take_input(r, x)) return kFailed;
    int flush = Z_NO_FLUSH;
    if (x.zs.avail_in == 0 && !x.inflate_more) {
      if (x.last_seen) {
        flush = Z_FINISH;
      } else if (x.flush_pending) {
        flush = Z_SYNC_FLUSH;
      } else {
        return kNeedInput;
      }
      if (x.inflate) {
        // The body ended (or a flush): what was inflated goes out.
        if (flush == Z_SYNC_FLUSH) {
          x.flush_pending = false;
          return kSend;
        }
        if (!x.member_end && x.zs.total_in > 0) {
          VIGIL_LOG(*r.c->log, kError, 0, "*%llu inflate() returned on response end",
                    static_cast<unsigned long long>(r.c->number));
          return kFailed;
        }
        x.done = true;
        return kSend;
      }
    }
    if (x.inflate) {
      if (x.member_end && x.zs.avail_in > 0) {
        // Another gzip member follows (a concatenation is one body).
        if (::inflateReset(&x.zs) != Z_OK) return kFailed;
        x.member_end = false;
      }
      const int rc = ::inflate(&x.zs, Z_NO_FLUSH);
      if (x.cur != nullptr) x.cur->pos = reinterpret_cast<char*>(x.zs.next_in);
      x.inflate_more = rc == Z_OK && x.zs.avail_out == 0;
      if (rc == Z_STREAM_END) {
        x.member_end = true;
      } else if (rc == Z_BUF_ERROR && x.zs.avail_in > 0 && x.zs.avail_out > 0) {
        log_z(r, "inflate", rc, x.zs);
        return kFailed;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        log_z(r, "inflate", rc, x.zs);
        return kFailed;
      }
      continue;
    }
    const int rc = ::deflate(&x.zs, flush);
    if (x.cur != nullptr) x.cur->pos = reinterpret_cast<char*>(x.zs.next_in);
    if (rc == Z_STREAM_END) {
      x.done = true;
      return kSend;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      log_z(r, "deflate", rc, x.zs);
      return kFailed;
    }
    if (flush == Z_SYNC_FLUSH && x.zs.avail_out != 0) {
      x.flush_pending = false;
      return kSend;
    }
  }
}

// The chain of this round's output; the last buffer ends the body when the
// stream is done.
Chain* output_chain(GzipCtx& x) {
  if (x.nout > 0) x.out[x.nout - 1].last = reinterpret_cast<char*>(x.zs.next_out);
  std::uint32_t k = 0;
  for (std::uint32_t i = 0; i < x.nout; ++i) {
    if (x.out[i].empty() && !(x.done && i + 1 == x.nout)) continue;
    x.links[k].buf = &x.out[i];
    x.links[k].next = nullptr;
    if (k > 0) x.links[k - 1].next = &x.links[k];
    ++k;
  }
  if (x.done) {
    if (k == 0) {
      x.end_mark = Buf{};
      x.end_mark.last_buf = true;
      x.links[0].buf = &x.end_mark;
      x.links[0].next = nullptr;
      k = 1;
    } else {
      x.links[k - 1].buf->last_buf = true;
    }
  }
  return k > 0 ? &x.links[0] : nullptr;
}

// The writer sent the round: the buffers are free again.
void sent(GzipCtx& x) {
  x.busy = false;
  x.nout = 0;
  x.zs.avail_out = 0;
}

}  // namespace

// ---- public ---------------------------------------------------------------------------------

bool accepts_gzip(std::string_view value) {
  ListReader list(value);
  std::string_view element;
  while (list.next(element)) {
    const std::size_t semi = element.find(';');
    if (!iequals(trim(element.substr(0, semi)), "gzip")) continue;
    if (semi == std::string_view::npos) return true;
    std::string_view params = element.substr(semi + 1);
    bool ok = true;
    while (!params.empty()) {
      const std::size_t next = params.find(';');
      const std::string_view p = trim(params.substr(0, next));
      params = next == std::string_view::npos ? std::string_view{} : params.substr(next + 1);
      if (p.size() >= 2 && (p[0] == 'q' || p[0] == 'Q') && trim(p.substr(1)).starts_with('=')) {
        const std::string_view q = trim(trim(p.substr(1)).substr(1));
        ok = qvalue_positive(q);
      }
    }
    return ok;
  }
  return false;
}

bool is_msie6(std::string_view ua) {
  if (ua.find("Opera") != std::string_view::npos) return false;
  const std::size_t msie = ua.find("MSIE ");
  if (msie == std::string_view::npos || msie + 7 >= ua.size() || ua[msie + 6] != '.') return false;
  const char v = ua[msie + 5];
  return v == '4' || v == '5' || (v == '6' && ua.find("SV1", msie + 8) == std::string_view::npos);
}

bool gzip_ok(const Request& r, const GzipConf& conf) {
  bool found = false;
  std::string_view ae;
  for (std::uint32_t i = 0; i < r.nfields; ++i) {
    if (r.fields[i].id == HeaderId::kAcceptEncoding) {
      ae = r.fields[i].value;
      found = true;
      break;
    }
  }
  if (!found || !accepts_gzip(ae)) return false;
  if (conf.disable_msie6 && is_msie6(r.user_agent)) return false;
  if (r.line.version < conf.http_version) return false;
  if (has_request_field(r, HeaderId::kOther, "via")) {
    // A request through a proxy: the response is compressed only when a
    // proxy could not cache it for a client that does not take gzip.
    const std::uint32_t p = conf.proxied;
    if (p & kProxiedOff) return false;
    if (!(p & kProxiedAny)) {
      auto& h = const_cast<HeadersOut&>(r.headers_out);
      const HeaderField* cc = find_out_field(h, "cache-control");
      const bool ok =
          ((p & kProxiedExpired) && (h.expires >= 0 || find_out_field(h, "expires") != nullptr)) ||
          ((p & kProxiedNoCache) && ((cc != nullptr && icontains(cc->value, "no-cache")) ||
                                     h.cache_max_age == HeadersOut::kNoCache)) ||
          ((p & kProxiedNoStore) && cc != nullptr && icontains(cc->value, "no-store")) ||
          ((p & kProxiedPrivate) && cc != nullptr && icontains(cc->value, "private")) ||
          ((p & kProxiedNoLastModified) && h.last_modified < 0 &&
           find_out_field(h, "last-modified") == nullptr) ||
          ((p & kProxiedNoEtag) && h.etag.empty() && find_out_field(h, "etag") == nullptr) ||
          ((p & kProxiedAuth) && has_request_field(r, HeaderId::kAuthorization, {}));
      if (!ok) return false;
    }
  }
  for (const Regex& re : conf.disable) {
    if (re.matches(r.user_agent)) return false;
  }
  return true;
}

const GzipConf& gzip_conf(const HttpLocConf& loc) { return loc_conf<GzipConf>(loc, gzip_module()); }

namespace {

// A head sent a second time (an error page after a status a later header
// filter answered with) is decided afresh: what an earlier one set up goes.
void forget_earlier_head(Request& r) {
  if (ctx_of(r) == nullptr) return;
  release_gzip(r);
  r.body_changed = false;
}

}  // namespace

int gunzip_header_filter(Request& r) {
  if (r.loc == nullptr) return 0;
  forget_earlier_head(r);
  const GzipConf& conf = gzip_conf(*r.loc);
  HeadersOut& h = r.headers_out;
  if (!conf.gunzip || !iequals(content_encoding(h), "gzip")) return 0;
  r.gzip_vary = true;
  if (gzip_ok(r, conf)) return 0;
  GzipCtx* x = start_ctx(r, conf.gunzip_num, conf.gunzip_size, etag_room(h), true);
  if (x == nullptr) return 500;
  h.content_encoding = {};
  for (std::uint32_t i = 0; i < h.nfields; ++i) {
    if (iequals(h.fields[i].name, "content-encoding")) h.fields[i].omit = true;
  }
  recode_head(r, *x);
  return 0;
}

int gzip_header_filter(Request& r) {
  if (r.loc == nullptr) return 0;
  // An inflating context is gunzip's, made for this head (its filter runs
  // first): the response is decoded, not coded again.
  if (const GzipCtx* x = ctx_of(r); x != nullptr && x->inflate) return 0;
  forget_earlier_head(r);
  const GzipConf& conf = gzip_conf(*r.loc);
  HeadersOut& h = r.headers_out;
  // As nginx: 200, 403 and 404, not already coded, long enough when the
  // length is known, of a listed type. A HEAD gets the head a GET would.
  if (!conf.enable || (h.status != 200 && h.status != 403 && h.status != 404) ||
      !content_encoding(h).empty() ||
      (h.content_length != -1 && h.content_length < static_cast<std::int64_t>(conf.min_length)) ||
      !type_ok(conf, h.content_type)) {
    return 0;
  }
  r.gzip_vary = true;
  if (!gzip_ok(r, conf)) return 0;
  GzipCtx* x = start_ctx(r, conf.bufs_num, conf.bufs_size, etag_room(h), false);
  if (x == nullptr) return 500;
  x->level = conf.level;
  h.content_encoding = "gzip";
  recode_head(r, *x);
  return 0;
}

int gzip_body_filter(Request& r, Chain* in, BodyFilterNext next) {
  GzipCtx* x = ctx_of(r);
  if (x == nullptr || r.header_only) return next(r, in);
  for (Chain* cl = in; cl != nullptr; cl = cl->next) {
    if (x->done) {
      // Bytes after the end of the stream (a proxied body's tail): dropped.
      cl->buf->pos = cl->buf->last;
      cl->buf->file_pos = cl->buf->file_last;
      continue;
    }
    if (x->in_count == kMaxInput) {
      VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu gzip: too many buffers passed at once",
                static_cast<unsigned long long>(r.c->number));
      return kBodyError;
    }
    x->in[(x->in_head + x->in_count) % kMaxInput] = cl->buf;
    ++x->in_count;
  }
  if (!x->zinit && !x->done && !z_start(r, *x)) return kBodyError;
  for (;;) {
    if (x->busy) {
      const int rc = next(r, nullptr);
      if (rc != kBodyOk) return rc;
      sent(*x);
    }
    if (x->done) return kBodyOk;
    const int made = produce(r, *x);
    if (made == kFailed) return kBodyError;
    if (made == kNeedInput) {
      // The producer's bytes are all read; what they made waits for more. A
      // producer resuming the writer (the proxy with the head alone) still
      // reaches it.
      return in == nullptr ? next(r, nullptr) : kBodyOk;
    }
    Chain* out = output_chain(*x);
    if (x->done && x->zinit) {
      // The stream's memory goes back now; the output waits in the buffers.
      if (x->inflate) {
        ::inflateEnd(&x->zs);
      } else {
        ::deflateEnd(&x->zs);
      }
      x->zinit = false;
    }
    if (out == nullptr) {
      sent(*x);
      continue;
    }
    x->busy = true;
    const int rc = next(r, out);
    if (rc != kBodyOk) return rc;
    sent(*x);
  }
}

void release_gzip(Request& r) {
  void*& slot = r.ctx[module().index()];
  auto* x = static_cast<GzipCtx*>(slot);
  if (x == nullptr) return;
  BufferCache& cache = r.hc->worker->buffers();
  if (x->zinit) {
    if (x->inflate) {
      ::inflateEnd(&x->zs);
    } else {
      ::deflateEnd(&x->zs);
    }
  }
  for (std::uint32_t i = 0; i < x->out_cap; ++i) cache.put(x->out_mem[i], x->out_size);
  if (x->rbuf != nullptr) cache.put(x->rbuf, x->rbuf_size);
  const std::size_t size = x->block_size;
  x->~GzipCtx();
  cache.put(reinterpret_cast<char*>(x), size);
  slot = nullptr;
}

bool gzip_static_wanted(Request& r) {
  const GzipConf& conf = gzip_conf(*r.loc);
  if (conf.gzip_static == GzipStatic::kOff) return false;
  if (conf.gzip_static == GzipStatic::kAlways) return true;
  // on: the .gz is looked for when it may be sent, or when its existence
  // decides Vary.
  return conf.vary || gzip_ok(r, conf);
}

bool gzip_static_found(Request& r) {
  const GzipConf& conf = gzip_conf(*r.loc);
  if (conf.gzip_static == GzipStatic::kAlways) return true;
  r.gzip_vary = true;
  return gzip_ok(r, conf);
}

const HttpModule& gzip_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_gzip");  // never destroyed: used until exit
    auto conf = m->add_loc_conf<GzipConf>({}, merge_gzip);
    constexpr ConfContextMask kAny = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
    Module& c = m->conf();
    c.add("gzip", kAny, Arity::on_off(), conf.flag(&GzipConf::enable, false));
    c.add("gzip_comp_level", kAny, Arity::exactly(1), conf.number(&GzipConf::level, 1, 1, 9));
    c.add("gzip_types", kAny, Arity::one_or_more(), conf.custom(set_types));
    c.add("gzip_min_length", kAny, Arity::exactly(1),
          conf.size(&GzipConf::min_length, std::size_t{20}));
    c.add("gzip_proxied", kAny, Arity::one_or_more(), conf.custom(set_proxied));
    c.add("gzip_vary", kAny, Arity::on_off(), conf.flag(&GzipConf::vary, false));
    c.add("gzip_buffers", kAny, Arity::exactly(2),
          conf.custom([](const DirectiveCall& call, GzipConf& g) {
            return parse_bufs(call, g.bufs_num, g.bufs_size);
          }));
    c.add("gzip_disable", kAny, Arity::one_or_more(), conf.custom(set_disable));
    c.add("gzip_http_version", kAny, Arity::exactly(1),
          conf.one_of(&GzipConf::http_version, 1001, {{"1.0", 1000}, {"1.1", 1001}}));
    c.add("gzip_static", kAny, Arity::exactly(1),
          conf.one_of(&GzipConf::gzip_static, GzipStatic::kOff,
                      {{"off", GzipStatic::kOff}, {"on", GzipStatic::kOn},
                       {"always", GzipStatic::kAlways}}));
    c.add("gunzip", kAny, Arity::on_off(), conf.flag(&GzipConf::gunzip, false));
    c.add("gunzip_buffers", kAny, Arity::exactly(2),
          conf.custom([](const DirectiveCall& call, GzipConf& g) {
            return parse_bufs(call, g.gunzip_num, g.gunzip_size);
          }));
    return m;
  }();
  return *module;
}

bool uses_gzip(const HttpServers& servers) {
  for (const HttpLocConf* loc : servers.locations) {
    if (gzip_conf(*loc).enable) return true;
  }
  return false;
}

bool uses_gunzip(const HttpServers& servers) {
  for (const HttpLocConf* loc : servers.locations) {
    if (gzip_conf(*loc).gunzip) return true;
  }
  return false;
}

}  // namespace vigil::http
