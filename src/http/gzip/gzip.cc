// gzip, brotli, zstd, their static files' test and gunzip (gzip.h). The
// header filters decide and rewrite the head; one body filter runs the coder
// over the body (zlib deflating or inflating, brotli's or zstd's encoder),
// into at most *_buffers (gunzip_buffers) output buffers that
// it passes on together and reuses once the writer has sent them. Input it
// cannot take yet (the output buffers are full and unsent) stays in the
// producer's buffers, which are empty only once zlib has read them: the
// producer's "do not reuse a buffer until it is empty" rule holds, and a
// file range (a static file, sendfile or not) is read into memory here, a
// piece at a time. A gzip body the first call holds whole and that fits in
// gzip_buffers goes through libdeflate in one call instead (whole_body).
#include "http/gzip/gzip.h"

#include <brotli/encode.h>
#include <libdeflate.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_createCCtx_advanced: the worker's memory
#include <zstd.h>

#include <cstring>
#include <memory>
#include <new>

#include "codec/parse.h"
#include "codec/tokens.h"
#include "event/file_read.h"
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

// A qvalue (RFC 9110 §12.4.2) in thousandths; a malformed one counts as
// zero, as nginx declines it.
int qvalue(std::string_view q) {
  if (q.empty() || q.size() > 5) return 0;
  if (q[0] != '0' && q[0] != '1') return 0;
  if (q.size() == 1) return q[0] == '1' ? 1000 : 0;
  if (q[1] != '.') return 0;
  int value = 0;
  int scale = 100;
  for (std::size_t i = 2; i < q.size(); ++i, scale /= 10) {
    if (q[i] < '0' || q[i] > '9') return 0;
    if (q[0] == '1' && q[i] != '0') return 0;
    value += (q[i] - '0') * scale;
  }
  return q[0] == '1' ? 1000 : value;
}

// ---- the configuration ----------------------------------------------------------------

// gzip_types, brotli_types, zstd_types.
Status parse_types(const DirectiveCall& call, std::vector<std::string>& types, bool& any_type) {
  types = {"text/html"};
  any_type = false;
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    if (call.arg(i) == "*") {
      any_type = true;
      continue;
    }
    std::string t = lowered(call.arg(i));
    if (t != "text/html") types.push_back(std::move(t));
  }
  return Status::ok();
}

Status set_types(const DirectiveCall& call, GzipConf& conf) {
  return parse_types(call, conf.types, conf.any_type);
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

// brotli_* and zstd_*: what a level does not set is its parent's.
Status merge_coding(const ConfInit& ctx, std::string_view prefix, const CodingConf& parent,
                    CodingConf& child) {
  const std::string p(prefix);
  if (!ctx.is_set(p + "_types")) {
    child.types = parent.types;
    child.any_type = parent.any_type;
  }
  if (!ctx.is_set(p + "_buffers")) {
    child.bufs_num = parent.bufs_num;
    child.bufs_size = parent.bufs_size;
  }
  if (!ctx.is_set(p + "_window")) child.window = parent.window;
  return Status::ok();
}

// ---- the request's state -----------------------------------------------------------

// Input buffers one request may have handed over and not yet had read.
constexpr std::uint32_t kMaxInput = 128;

struct GzipCtx {
  z_stream zs;
  BrotliEncoderState* br = nullptr;
  ZSTD_CCtx* zc = nullptr;
  Coding coding = Coding::kGzip;
  bool inflate = false;  // gunzip
  bool zinit = false;    // the coder is set up (its end owed)
  bool busy = false;     // output passed on and not yet sent
  bool done = false;     // the stream is finished and its end passed on
  bool last_seen = false;    // the producer's last buffer was read
  bool flush_pending = false;  // a flush buffer was read: send what there is
  bool member_end = false;     // gunzip: a gzip member ended
  bool inflate_more = false;   // gunzip: inflate filled the output, it may hold more
  int level = 1;
  std::size_t window = 0;    // brotli_window
  std::int64_t length = -1;  // the body's length before coding (window size)
  // The coder's input not yet read and room left in the current output
  // buffer (each coder's own fields are set from these at each call).
  const unsigned char* in_ptr = nullptr;
  std::size_t in_len = 0;
  unsigned char* out_ptr = nullptr;
  std::size_t out_len = 0;
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

// The same for brotli and zstd.
void* cache_alloc(void* opaque, std::size_t size) {
  auto* cache = static_cast<BufferCache*>(opaque);
  if (size > (std::size_t{1} << 31)) return nullptr;
  char* p = cache->get(size + kZHeader);
  if (p == nullptr) return nullptr;
  const std::size_t total = size + kZHeader;
  std::memcpy(p, &total, sizeof total);
  return p + kZHeader;
}

void cache_free(void* opaque, void* address) { z_free(opaque, address); }

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

bool type_ok(const std::vector<std::string>& types, bool any_type, std::string_view type) {
  if (any_type) return true;
  const std::size_t semi = type.find(';');
  if (semi != std::string_view::npos) type = type.substr(0, semi);
  type = trim(type);
  if (type.empty()) return false;
  for (const std::string& t : types) {
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

// The coder's memory goes back (it is finished, or the request ends).
void coder_end(GzipCtx& x) {
  if (!x.zinit) return;
  switch (x.coding) {
    case Coding::kBrotli:
      BrotliEncoderDestroyInstance(x.br);
      x.br = nullptr;
      break;
    case Coding::kZstd:
      ZSTD_freeCCtx(x.zc);
      x.zc = nullptr;
      break;
    default:
      if (x.inflate) {
        ::inflateEnd(&x.zs);
      } else {
        ::deflateEnd(&x.zs);
      }
      break;
  }
  x.zinit = false;
}

// The largest window (log2) a body of x.length bytes needs, at most `max`
// and at least `min`; `max` when the length is not known.
int window_bits(const GzipCtx& x, int max, int min) {
  int bits = max;
  if (x.length > 0) {
    while (bits > min && x.length <= (std::int64_t{1} << (bits - 1))) --bits;
  }
  return bits;
}

bool brotli_start(Request& r, GzipCtx& x) {
  x.br = BrotliEncoderCreateInstance(cache_alloc, cache_free, &r.hc->worker->buffers());
  if (x.br == nullptr) {
    VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu BrotliEncoderCreateInstance() failed",
              static_cast<unsigned long long>(r.c->number));
    return false;
  }
  int lgwin = BROTLI_MIN_WINDOW_BITS;
  while (lgwin < BROTLI_MAX_WINDOW_BITS && (std::size_t{1} << lgwin) < x.window) ++lgwin;
  lgwin = window_bits(x, lgwin, BROTLI_MIN_WINDOW_BITS);
  bool ok = BrotliEncoderSetParameter(x.br, BROTLI_PARAM_QUALITY, static_cast<std::uint32_t>(x.level)) &&
            BrotliEncoderSetParameter(x.br, BROTLI_PARAM_LGWIN, static_cast<std::uint32_t>(lgwin));
  if (ok && x.length > 0 && x.length < (std::int64_t{1} << 30)) {
    ok = BrotliEncoderSetParameter(x.br, BROTLI_PARAM_SIZE_HINT, static_cast<std::uint32_t>(x.length));
  }
  x.zinit = true;
  if (!ok) {
    VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu BrotliEncoderSetParameter() failed",
              static_cast<unsigned long long>(r.c->number));
  }
  return ok;
}

bool zstd_start(Request& r, GzipCtx& x) {
  const ZSTD_customMem mem = {cache_alloc, cache_free, &r.hc->worker->buffers()};
  x.zc = ZSTD_createCCtx_advanced(mem);
  if (x.zc == nullptr) {
    VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu ZSTD_createCCtx_advanced() failed",
              static_cast<unsigned long long>(r.c->number));
    return false;
  }
  x.zinit = true;
  std::size_t rc = ZSTD_CCtx_setParameter(x.zc, ZSTD_c_compressionLevel, x.level);
  // A known length goes in the frame and lets zstd size its tables to it.
  if (!ZSTD_isError(rc) && x.length > 0) {
    rc = ZSTD_CCtx_setPledgedSrcSize(x.zc, static_cast<unsigned long long>(x.length));
  }
  if (ZSTD_isError(rc)) {
    VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu zstd setup failed: %s",
              static_cast<unsigned long long>(r.c->number), ZSTD_getErrorName(rc));
    return false;
  }
  return true;
}

bool z_start(Request& r, GzipCtx& x) {
  x.in_len = 0;
  x.out_len = 0;
  if (x.coding == Coding::kBrotli) return brotli_start(r, x);
  if (x.coding == Coding::kZstd) return zstd_start(r, x);
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

// Points the coder at the next output buffer; false when none could be had.
bool next_out(Request& r, GzipCtx& x) {
  if (x.nout > 0) x.out[x.nout - 1].last = x.out[x.nout - 1].end;
  char*& mem = x.out_mem[x.nout];
  if (mem == nullptr) {
    mem = r.hc->worker->buffers().get(x.out_size);
    if (mem == nullptr) {
      VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu no memory for a %s buffer",
                static_cast<unsigned long long>(r.c->number),
                x.inflate ? "gunzip" : coding_name(x.coding).data());
      return false;
    }
  }
  x.out[x.nout].reset(mem, x.out_size);
  x.out_ptr = reinterpret_cast<unsigned char*>(mem);
  x.out_len = x.out_size;
  ++x.nout;
  return true;
}

// Points the coder at the next input bytes: a memory buffer's, or a piece of
// a file range read into rbuf. Buffers found empty are dropped, noting a last
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
      const std::size_t got = read_file_some(*r.c, b->file_fd, b->file_pos, x.rbuf, n);
      if (got == 0) return false;
      b->file_pos += static_cast<off_t>(got);
      x.in_ptr = reinterpret_cast<unsigned char*>(x.rbuf);
      x.in_len = got;
      return true;
    }
    if (!b->in_file && b->pos < b->last) {
      x.in_ptr = reinterpret_cast<unsigned char*>(b->pos);
      x.in_len = static_cast<std::size_t>(b->last - b->pos);
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

// One call of the coder. kStepEnd: the stream is complete (kFinish);
// kStepFlushed: everything read is in the output (kFlush).
enum class Op : std::uint8_t { kProcess, kFlush, kFinish };
enum class Step : std::uint8_t { kMore, kFlushed, kEnd, kFailed };

Step zlib_step(Request& r, GzipCtx& x, Op op) {
  z_stream& zs = x.zs;
  zs.next_in = const_cast<Bytef*>(x.in_ptr);
  zs.avail_in = x.in_len > 0x40000000 ? 0x40000000u : static_cast<uInt>(x.in_len);
  const uInt given = zs.avail_in;
  zs.next_out = x.out_ptr;
  zs.avail_out = x.out_len > 0x40000000 ? 0x40000000u : static_cast<uInt>(x.out_len);
  const uInt room = zs.avail_out;
  int rc;
  if (x.inflate) {
    rc = ::inflate(&zs, Z_NO_FLUSH);
  } else {
    rc = ::deflate(&zs, op == Op::kFinish ? Z_FINISH : op == Op::kFlush ? Z_SYNC_FLUSH : Z_NO_FLUSH);
  }
  x.in_ptr += given - zs.avail_in;
  x.in_len -= given - zs.avail_in;
  x.out_ptr += room - zs.avail_out;
  x.out_len -= room - zs.avail_out;
  if (x.inflate) {
    x.inflate_more = rc == Z_OK && x.out_len == 0;
    if (rc == Z_STREAM_END) {
      x.member_end = true;
      return Step::kMore;
    }
    if ((rc == Z_BUF_ERROR && x.in_len > 0 && x.out_len > 0) || (rc != Z_OK && rc != Z_BUF_ERROR)) {
      log_z(r, "inflate", rc, zs);
      return Step::kFailed;
    }
    return Step::kMore;
  }
  if (rc == Z_STREAM_END) return Step::kEnd;
  if (rc != Z_OK && rc != Z_BUF_ERROR) {
    log_z(r, "deflate", rc, zs);
    return Step::kFailed;
  }
  return op == Op::kFlush && x.out_len != 0 ? Step::kFlushed : Step::kMore;
}

Step brotli_step(Request& r, GzipCtx& x, Op op) {
  const BrotliEncoderOperation bop = op == Op::kFinish  ? BROTLI_OPERATION_FINISH
                                     : op == Op::kFlush ? BROTLI_OPERATION_FLUSH
                                                        : BROTLI_OPERATION_PROCESS;
  if (!BrotliEncoderCompressStream(x.br, bop, &x.in_len, &x.in_ptr, &x.out_len, &x.out_ptr,
                                   nullptr)) {
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu BrotliEncoderCompressStream() failed",
              static_cast<unsigned long long>(r.c->number));
    return Step::kFailed;
  }
  if (op == Op::kFinish && BrotliEncoderIsFinished(x.br)) return Step::kEnd;
  if (op == Op::kFlush && x.in_len == 0 && !BrotliEncoderHasMoreOutput(x.br)) return Step::kFlushed;
  return Step::kMore;
}

Step zstd_step(Request& r, GzipCtx& x, Op op) {
  ZSTD_inBuffer in = {x.in_ptr, x.in_len, 0};
  ZSTD_outBuffer out = {x.out_ptr, x.out_len, 0};
  const std::size_t left = ZSTD_compressStream2(
      x.zc, &out, &in,
      op == Op::kFinish ? ZSTD_e_end : op == Op::kFlush ? ZSTD_e_flush : ZSTD_e_continue);
  if (ZSTD_isError(left)) {
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu ZSTD_compressStream2() failed: %s",
              static_cast<unsigned long long>(r.c->number), ZSTD_getErrorName(left));
    return Step::kFailed;
  }
  x.in_ptr += in.pos;
  x.in_len -= in.pos;
  x.out_ptr += out.pos;
  x.out_len -= out.pos;
  if (left == 0 && op == Op::kFinish) return Step::kEnd;
  if (left == 0 && op == Op::kFlush) return Step::kFlushed;
  return Step::kMore;
}

Step step(Request& r, GzipCtx& x, Op op) {
  Step st;
  switch (x.coding) {
    case Coding::kBrotli:
      st = brotli_step(r, x, op);
      break;
    case Coding::kZstd:
      st = zstd_step(r, x, op);
      break;
    default:
      st = zlib_step(r, x, op);
      break;
  }
  if (x.cur != nullptr) {
    x.cur->pos = reinterpret_cast<char*>(const_cast<unsigned char*>(x.in_ptr));
  }
  return st;
}

// ---- gzip of a whole body ---------------------------------------------------------------------

// The shortest body libdeflate compresses whole at each gzip_comp_level (0:
// never, zlib streams it). From measurements of both on HTML (docs/
// benchmarks-http.md): libdeflate takes a third to two thirds of zlib's time
// from 8 KiB up at levels 1..7 (level 1 from 2 KiB) and its output is
// smaller; below that its per-call table setup costs more than zlib's
// window-sized one, and at 8 and 9 it is slower up to about 100 KiB.
constexpr std::int64_t kWholeMin[10] = {0, 2048, 8192, 8192, 8192, 8192, 8192, 8192, 0, 0};

}  // namespace

// The worker's libdeflate compressors (one per level, made on first use and
// kept) and the buffers a whole body is read into and compressed into: it
// is done in one synchronous step, so one pair serves every request. They
// grow to the largest body that used them, at most gzip_buffers' bytes
// (number * size) of input.
struct GzipWorker {
  libdeflate_compressor* comp[10] = {};
  char* in = nullptr;
  std::size_t in_size = 0;
  char* out = nullptr;
  std::size_t out_size = 0;

  GzipWorker() = default;
  GzipWorker(const GzipWorker&) = delete;
  GzipWorker& operator=(const GzipWorker&) = delete;
  ~GzipWorker() {
    for (libdeflate_compressor* c : comp) {
      if (c != nullptr) libdeflate_free_compressor(c);
    }
    delete[] in;
    delete[] out;
  }
};

void GzipWorkerFree::operator()(GzipWorker* g) const { delete g; }

namespace {

// `mem` holds at least `need` bytes, kept from an earlier body or made now;
// false when no memory could be had.
bool grow(char*& mem, std::size_t& size, std::size_t need) {
  if (size >= need) return true;
  const std::size_t cap = (need + 4095) & ~std::size_t{4095};
  char* p = new (std::nothrow) char[cap];
  if (p == nullptr) return false;
  delete[] mem;
  mem = p;
  size = cap;
  return true;
}

enum class Whole : std::uint8_t { kDone, kDeclined, kFailed };

// gzip of a body the filter's first call holds whole (every byte of the
// length the head had, and the body's last buffer): a static file, a body
// made in memory. Compressed with libdeflate in one call into the worker's
// buffer, then copied into the request's gzip_buffers and marked done.
// kDeclined leaves the input untouched for zlib: not gzip, a level or a
// length libdeflate does not win at, a body not all here, more than
// gzip_buffers (number * size) of it or of its output, no memory for the
// compressor or the worker's buffers. kFailed: the file could not be read.
Whole whole_body(Request& r, GzipCtx& x) {
  if (x.coding != Coding::kGzip || x.inflate || x.level < 1 || x.level > 9) {
    return Whole::kDeclined;
  }
  const std::int64_t min = kWholeMin[x.level];
  const std::uint64_t cap = std::uint64_t{x.out_cap} * x.out_size;
  if (min == 0 || x.length < min || static_cast<std::uint64_t>(x.length) > cap) {
    return Whole::kDeclined;
  }
  std::uint64_t have = 0;
  bool last = false;
  Buf* only = nullptr;  // the one buffer with bytes, when there is one
  std::uint32_t with_bytes = 0;
  for (std::uint32_t i = 0; i < x.in_count; ++i) {
    Buf* b = x.in[(x.in_head + i) % kMaxInput];
    if (b->in_file && b->file_last < b->file_pos) return Whole::kDeclined;
    if (!b->in_file && b->last < b->pos) return Whole::kDeclined;
    if (!b->empty()) {
      only = b;
      ++with_bytes;
    }
    have += b->size();
    last = last || b->last_buf;
  }
  if (!last || have != static_cast<std::uint64_t>(x.length)) return Whole::kDeclined;
  const std::size_t length = static_cast<std::size_t>(x.length);

  std::unique_ptr<GzipWorker, GzipWorkerFree>& gw = r.hc->worker->gzip();
  if (gw == nullptr) gw.reset(new (std::nothrow) GzipWorker());
  GzipWorker* g = gw.get();
  if (g == nullptr) return Whole::kDeclined;
  libdeflate_compressor*& c = g->comp[x.level];
  if (c == nullptr) c = libdeflate_alloc_compressor(x.level);
  const std::size_t bound = c != nullptr ? libdeflate_gzip_compress_bound(c, length) : 0;
  if (c == nullptr || !grow(g->out, g->out_size, bound)) {
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu no memory for libdeflate: zlib compresses the body",
              static_cast<unsigned long long>(r.c->number));
    return Whole::kDeclined;
  }

  // The input: the one memory buffer as it is, else every buffer copied or
  // read, in order, into the worker's buffer.
  const char* src = nullptr;
  if (with_bytes == 1 && !only->in_file) {
    src = only->pos;
  } else if (length > 0) {
    if (!grow(g->in, g->in_size, length)) {
      VIGIL_LOG(*r.c->log, kError, 0, "*%llu no memory for libdeflate: zlib compresses the body",
                static_cast<unsigned long long>(r.c->number));
      return Whole::kDeclined;
    }
    char* dst = g->in;
    for (std::uint32_t i = 0; i < x.in_count; ++i) {
      const Buf* b = x.in[(x.in_head + i) % kMaxInput];
      if (!b->in_file) {
        const std::size_t n = b->size();
        if (n > 0) std::memcpy(dst, b->pos, n);
        dst += n;
        continue;
      }
      // Exactly the range's bytes: a file grown since it was opened adds
      // nothing, one shrunk is an error (as on the streaming path).
      const std::size_t n = b->size();
      if (!read_file_exact(*r.c, b->file_fd, b->file_pos, dst, n)) return Whole::kFailed;
      dst += n;
    }
    src = g->in;
  }

  const std::size_t made = libdeflate_gzip_compress(c, src, length, g->out, g->out_size);
  if (made == 0 || made > cap) return Whole::kDeclined;  // incompressible, larger than cap

  // Into the request's output buffers, as zlib's output would be.
  const char* from = g->out;
  std::size_t left = made;
  while (left > 0) {
    if (x.out_len == 0 && !next_out(r, x)) return Whole::kFailed;
    const std::size_t n = left < x.out_len ? left : x.out_len;
    std::memcpy(x.out_ptr, from, n);
    x.out_ptr += n;
    x.out_len -= n;
    from += n;
    left -= n;
  }
  for (std::uint32_t i = 0; i < x.in_count; ++i) {
    Buf* b = x.in[(x.in_head + i) % kMaxInput];
    b->pos = b->last;
    b->file_pos = b->file_last;
  }
  x.in_count = 0;
  x.last_seen = true;
  x.done = true;
  return Whole::kDone;
}

// Runs the coder until the output buffers are full (kSend), the stream or a
// flush is complete (kSend), or the input is used up (kNeedInput: what was
// made waits for more).
int produce(Request& r, GzipCtx& x) {
  for (;;) {
    if (x.out_len == 0) {
      if (x.nout == x.out_cap) return kSend;
      if (!next_out(r, x)) return kFailed;
    }
    if (x.in_len == 0 && !take_input(r, x)) return kFailed;
    Op op = Op::kProcess;
    if (x.in_len == 0 && !x.inflate_more) {
      if (x.last_seen) {
        op = Op::kFinish;
      } else if (x.flush_pending) {
        op = Op::kFlush;
      } else {
        return kNeedInput;
      }
      if (x.inflate) {
        // The body ended (or a flush): what was inflated goes out.
        if (op == Op::kFlush) {
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
    if (x.inflate && x.member_end && x.in_len > 0) {
      // Another gzip member follows (a concatenation is one body).
      if (::inflateReset(&x.zs) != Z_OK) return kFailed;
      x.member_end = false;
    }
    switch (step(r, x, op)) {
      case Step::kFailed:
        return kFailed;
      case Step::kEnd:
        x.done = true;
        return kSend;
      case Step::kFlushed:
        x.flush_pending = false;
        return kSend;
      case Step::kMore:
        break;
    }
  }
}

// The chain of this round's output; the last buffer ends the body when the
// stream is done.
Chain* output_chain(GzipCtx& x) {
  if (x.nout > 0) x.out[x.nout - 1].last = reinterpret_cast<char*>(x.out_ptr);
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
  x.out_len = 0;
}

}  // namespace

// ---- public ---------------------------------------------------------------------------------

int coding_q(std::string_view value, std::string_view coding) {
  ListReader list(value);
  std::string_view element;
  while (list.next(element)) {
    const std::size_t semi = element.find(';');
    if (!iequals(trim(element.substr(0, semi)), coding)) continue;
    if (semi == std::string_view::npos) return 1000;
    std::string_view params = element.substr(semi + 1);
    int q = 1000;
    while (!params.empty()) {
      const std::size_t next = params.find(';');
      const std::string_view p = trim(params.substr(0, next));
      params = next == std::string_view::npos ? std::string_view{} : params.substr(next + 1);
      if (p.size() >= 2 && (p[0] == 'q' || p[0] == 'Q') && trim(p.substr(1)).starts_with('=')) {
        q = qvalue(trim(trim(p.substr(1)).substr(1)));
      }
    }
    return q;
  }
  return -1;
}

bool accepts_gzip(std::string_view value) { return coding_q(value, "gzip") > 0; }

Coding choose_coding(std::string_view value, unsigned offered) {
  // In the order that wins a tie.
  static constexpr Coding kOrder[] = {Coding::kBrotli, Coding::kZstd, Coding::kGzip};
  Coding best = Coding::kNone;
  int best_q = 0;
  for (Coding c : kOrder) {
    if ((offered & coding_bit(c)) == 0) continue;
    const int q = coding_q(value, coding_name(c));
    if (q > best_q) {
      best = c;
      best_q = q;
    }
  }
  return best;
}

std::string_view coding_name(Coding c) {
  switch (c) {
    case Coding::kGzip:
      return "gzip";
    case Coding::kBrotli:
      return "br";
    case Coding::kZstd:
      return "zstd";
    default:
      return {};
  }
}

std::string_view coding_suffix(Coding c) {
  switch (c) {
    case Coding::kGzip:
      return ".gz";
    case Coding::kBrotli:
      return ".br";
    case Coding::kZstd:
      return ".zst";
    default:
      return {};
  }
}

bool is_msie6(std::string_view ua) {
  if (ua.find("Opera") != std::string_view::npos) return false;
  const std::size_t msie = ua.find("MSIE ");
  if (msie == std::string_view::npos || msie + 7 >= ua.size() || ua[msie + 6] != '.') return false;
  const char v = ua[msie + 5];
  return v == '4' || v == '5' || (v == '6' && ua.find("SV1", msie + 8) == std::string_view::npos);
}

namespace {

// The request's Accept-Encoding; false when it has none.
bool accept_encoding(const Request& r, std::string_view& ae) {
  for (std::uint32_t i = 0; i < r.nfields; ++i) {
    if (r.fields[i].id == HeaderId::kAcceptEncoding) {
      ae = r.fields[i].value;
      return true;
    }
  }
  return false;
}

}  // namespace

bool gzip_ok(const Request& r, const GzipConf& conf) {
  std::string_view ae;
  if (!accept_encoding(r, ae) || !accepts_gzip(ae)) return false;
  return coding_allowed(r, conf);
}

bool coding_allowed(const Request& r, const GzipConf& conf) {
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
  const CodingConf& br = brotli_conf(*r.loc);
  const CodingConf& zs = zstd_conf(*r.loc);
  HeadersOut& h = r.headers_out;
  // As nginx: 200, 403 and 404, not already coded, long enough when the
  // length is known, of a listed type. A HEAD gets the head a GET would.
  if ((!conf.enable && !br.enable && !zs.enable) ||
      (h.status != 200 && h.status != 403 && h.status != 404) || !content_encoding(h).empty()) {
    return 0;
  }
  auto fits = [&](const std::vector<std::string>& types, bool any_type, std::size_t min_length) {
    return (h.content_length == -1 || h.content_length >= static_cast<std::int64_t>(min_length)) &&
           type_ok(types, any_type, h.content_type);
  };
  unsigned offered = 0;
  if (conf.enable && fits(conf.types, conf.any_type, conf.min_length)) {
    offered |= coding_bit(Coding::kGzip);
  }
  if (br.enable && fits(br.types, br.any_type, br.min_length)) offered |= coding_bit(Coding::kBrotli);
  if (zs.enable && fits(zs.types, zs.any_type, zs.min_length)) offered |= coding_bit(Coding::kZstd);
  if (offered == 0) return 0;
  r.gzip_vary = true;
  std::string_view ae;
  if (!accept_encoding(r, ae) || !coding_allowed(r, conf)) return 0;
  const Coding coding = choose_coding(ae, offered);
  if (coding == Coding::kNone) return 0;
  const CodingConf* cc = coding == Coding::kBrotli ? &br : coding == Coding::kZstd ? &zs : nullptr;
  GzipCtx* x = cc != nullptr ? start_ctx(r, cc->bufs_num, cc->bufs_size, etag_room(h), false)
                             : start_ctx(r, conf.bufs_num, conf.bufs_size, etag_room(h), false);
  if (x == nullptr) return 500;
  x->coding = coding;
  x->level = cc != nullptr ? cc->level : conf.level;
  x->window = br.window;
  h.content_encoding = coding_name(coding);
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
  if (!x->zinit && !x->done) {
    // The first call: a whole body goes through libdeflate at once, anything
    // else through the streaming coder.
    const Whole whole = whole_body(r, *x);
    if (whole == Whole::kFailed) return kBodyError;
    if (whole == Whole::kDone) {
      x->busy = true;
      const int rc = next(r, output_chain(*x));
      if (rc != kBodyOk) return rc;
      sent(*x);
      return kBodyOk;
    }
    if (!z_start(r, *x)) return kBodyError;
  }
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
    // The stream's memory goes back now; the output waits in the buffers.
    if (x->done) coder_end(*x);
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
  coder_end(*x);
  for (std::uint32_t i = 0; i < x->out_cap; ++i) cache.put(x->out_mem[i], x->out_size);
  if (x->rbuf != nullptr) cache.put(x->rbuf, x->rbuf_size);
  const std::size_t size = x->block_size;
  x->~GzipCtx();
  cache.put(reinterpret_cast<char*>(x), size);
  slot = nullptr;
}

namespace {

GzipStatic static_mode(const HttpLocConf& loc, Coding c) {
  switch (c) {
    case Coding::kBrotli:
      return brotli_conf(loc).static_mode;
    case Coding::kZstd:
      return zstd_conf(loc).static_mode;
    default:
      return gzip_conf(loc).gzip_static;
  }
}

}  // namespace

std::size_t static_codings(Request& r, Coding (&out)[3]) {
  static constexpr Coding kAll[] = {Coding::kBrotli, Coding::kZstd, Coding::kGzip};
  const HttpLocConf& loc = *r.loc;
  unsigned on = 0;
  for (Coding c : kAll) {
    if (static_mode(loc, c) != GzipStatic::kOff) on |= coding_bit(c);
  }
  if (on == 0) return 0;
  std::size_t n = 0;
  auto listed = [&](Coding c) {
    for (std::size_t i = 0; i < n; ++i) {
      if (out[i] == c) return true;
    }
    return false;
  };
  const GzipConf& conf = gzip_conf(loc);
  std::string_view ae;
  if (accept_encoding(r, ae) && coding_allowed(r, conf)) {
    // The client's codings, its preferred first.
    for (unsigned left = on; n < 3;) {
      const Coding c = choose_coding(ae, left);
      if (c == Coding::kNone) break;
      out[n++] = c;
      left &= ~coding_bit(c);
    }
  }
  // gzip_static on with gzip_vary: the .gz's existence decides Vary.
  if (conf.gzip_static == GzipStatic::kOn && conf.vary && !listed(Coding::kGzip)) {
    out[n++] = Coding::kGzip;
  }
  for (Coding c : kAll) {
    if (static_mode(loc, c) == GzipStatic::kAlways && !listed(c)) out[n++] = c;
  }
  return n;
}

bool static_coding_found(Request& r, Coding coding) {
  if (static_mode(*r.loc, coding) == GzipStatic::kAlways) return true;
  r.gzip_vary = true;
  std::string_view ae;
  return accept_encoding(r, ae) && coding_q(ae, coding_name(coding)) > 0 &&
         coding_allowed(r, gzip_conf(*r.loc));
}

bool vary_accept_encoding(const HttpLocConf& loc) {
  const CodingConf& br = brotli_conf(loc);
  const CodingConf& zs = zstd_conf(loc);
  return gzip_conf(loc).vary || br.enable || zs.enable || br.static_mode == GzipStatic::kOn ||
         zs.static_mode == GzipStatic::kOn;
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

namespace {

// brotli_* or zstd_* (`name`), `level` its default level in [min, max].
HttpModule* coding_module(const char* module_name, std::string_view name, int level, int min,
                          int max, bool window) {
  auto* m = new HttpModule(module_name);  // never destroyed: used until exit
  const std::string prefix(name);
  auto conf = m->add_loc_conf<CodingConf>(
      {}, [prefix](const ConfInit& ctx, const CodingConf& parent, CodingConf& child) {
        return merge_coding(ctx, prefix, parent, child);
      });
  constexpr ConfContextMask kAny = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
  Module& c = m->conf();
  c.add(prefix, kAny, Arity::on_off(), conf.flag(&CodingConf::enable, false));
  c.add(prefix + "_comp_level", kAny, Arity::exactly(1),
        conf.number(&CodingConf::level, level, min, max));
  c.add(prefix + "_types", kAny, Arity::one_or_more(),
        conf.custom([](const DirectiveCall& call, CodingConf& cc) {
          return parse_types(call, cc.types, cc.any_type);
        }));
  c.add(prefix + "_min_length", kAny, Arity::exactly(1),
        conf.size(&CodingConf::min_length, std::size_t{20}));
  c.add(prefix + "_buffers", kAny, Arity::exactly(2),
        conf.custom([](const DirectiveCall& call, CodingConf& cc) {
          return parse_bufs(call, cc.bufs_num, cc.bufs_size);
        }));
  c.add(prefix + "_static", kAny, Arity::exactly(1),
        conf.one_of(&CodingConf::static_mode, GzipStatic::kOff,
                    {{"off", GzipStatic::kOff}, {"on", GzipStatic::kOn},
                     {"always", GzipStatic::kAlways}}));
  if (window) {
    // 1k..16m, a power of two (brotli's window is 2^10..2^24 bytes).
    c.add(prefix + "_window", kAny, Arity::exactly(1),
          conf.custom([](const DirectiveCall& call, CodingConf& cc) {
            auto size = parse_size(call.arg(0));
            if (!size || *size < 1024 || *size > (std::size_t{1} << 24) ||
                (*size & (*size - 1)) != 0) {
              return call.invalid_value(0, ", it must be a power of two from 1k to 16m");
            }
            cc.window = static_cast<std::size_t>(*size);
            return Status::ok();
          }));
  }
  return m;
}

}  // namespace

const HttpModule& brotli_module() {
  static const HttpModule* module = coding_module("http_brotli", "brotli", 6, 0, 11, true);
  return *module;
}

const HttpModule& zstd_module() {
  static const HttpModule* module =
      coding_module("http_zstd", "zstd", 1, 1, ZSTD_maxCLevel(), false);
  return *module;
}

const CodingConf& brotli_conf(const HttpLocConf& loc) {
  return loc_conf<CodingConf>(loc, brotli_module());
}

const CodingConf& zstd_conf(const HttpLocConf& loc) {
  return loc_conf<CodingConf>(loc, zstd_module());
}

bool uses_gzip(const HttpServers& servers) {
  for (const HttpLocConf* loc : servers.locations) {
    if (gzip_conf(*loc).enable || brotli_conf(*loc).enable || zstd_conf(*loc).enable) return true;
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
