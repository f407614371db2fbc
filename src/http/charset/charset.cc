#include "http/charset/charset.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "codec/tokens.h"
#include "core/conf/parser.h"
#include "event/file_read.h"
#include "http/charset/recode.h"
#include "http/core/conf.h"
#include "http/core/filters.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "http/core/servers.h"
#include "http/core/variables.h"
#include "http/core/worker.h"
#include "vigil/core/buffer.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

struct CharsetMaps {
  std::vector<std::unique_ptr<CharsetMap>> maps;
};

// ---- configuration ------------------------------------------------------------------------

enum class Source : std::uint8_t { kOff, kName, kVariable };

struct CharsetConf {
  Source charset = Source::kOff;
  std::string charset_name;
  std::shared_ptr<const VarTemplate> charset_var;
  Source source = Source::kOff;
  std::string source_name;
  std::shared_ptr<const VarTemplate> source_var;
  bool override_charset = false;
  std::vector<std::string> types{
      "text/html",          "text/xml", "text/plain", "text/vnd.wap.wml", "application/javascript",
      "application/rss+xml"};
  bool any_type = false;
  // The http level's charset_map tables (every level shares them).
  std::shared_ptr<CharsetMaps> maps;
};

Status set_name(const DirectiveCall& call, bool allow_off, Source& mode, std::string& name,
                std::shared_ptr<const VarTemplate>& var) {
  const std::string& a = call.arg(0);
  if (allow_off && a == "off") {
    mode = Source::kOff;
    return Status::ok();
  }
  if (a.find('$') != std::string::npos) {
    auto t = VarTemplate::compile(a);
    if (!t) return call.error(t.status().message());
    if (!t.value().is_literal()) {
      var = std::make_shared<const VarTemplate>(std::move(t.value()));
      mode = Source::kVariable;
      return Status::ok();
    }
  }
  if (a.empty()) return call.invalid_value(0);
  name = a;  // as written: the Content-Type says it so
  mode = Source::kName;
  return Status::ok();
}

Status set_charset(const DirectiveCall& call, CharsetConf& c) {
  return set_name(call, true, c.charset, c.charset_name, c.charset_var);
}

Status set_source(const DirectiveCall& call, CharsetConf& c) {
  return set_name(call, false, c.source, c.source_name, c.source_var);
}

Status set_types(const DirectiveCall& call, CharsetConf& c) {
  c.types.clear();
  c.any_type = false;
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    if (call.arg(i) == "*") {
      c.any_type = true;
      continue;
    }
    c.types.push_back(call.arg(i));  // compared without regard to case
  }
  return Status::ok();
}

// The lines of a charset_map block: "XX YY;", or "XX HHHHHH;" (the UTF-8
// bytes in hex) when the map is to utf-8.
class MapSink : public StatementSink {
 public:
  explicit MapSink(CharsetMap& map) : map_(map) {}
  Status on_statement(ConfParser& parser, const ConfStatement& st) override {
    const std::string where = parser.origin().where(st.words[0].line);
    if (st.end != ConfTerminator::kSemicolon) return Status::error("unexpected \"{\"" + where);
    if (st.words.size() != 2) return Status::error("invalid parameters number" + where);
    std::string_view bad;
    if (!map_.add(st.words[0].text, st.words[1].text, bad)) {
      return Status::error("invalid value \"" + std::string(bad) + "\"" + where);
    }
    return Status::ok();
  }

 private:
  CharsetMap& map_;
};

Status set_map(const DirectiveCall& call, CharsetConf& c) {
  const std::string& from = call.arg(0);
  const std::string& to = call.arg(1);
  if (is_utf8_name(from)) {
    return call.error("\"charset_map\" from \"" + call.arg(0) + "\" is not supported");
  }
  if (c.maps == nullptr) c.maps = std::make_shared<CharsetMaps>();
  for (const auto& m : c.maps->maps) {
    if ((iequals(m->from, from) && iequals(m->to, to)) ||
        (iequals(m->from, to) && iequals(m->to, from))) {
      return call.error("duplicate \"charset_map\" between \"" + call.arg(0) + "\" and \"" +
                        call.arg(1) + "\"");
    }
  }
  auto map = std::make_unique<CharsetMap>(from, to);
  MapSink sink(*map);
  if (Status s = call.parse_block(sink); !s) return s;
  c.maps->maps.push_back(std::move(map));
  return Status::ok();
}

Status merge_charset(const ConfInit& ctx, const CharsetConf& parent, CharsetConf& child) {
  if (!ctx.is_set("charset")) {
    child.charset = parent.charset;
    child.charset_name = parent.charset_name;
    child.charset_var = parent.charset_var;
  }
  if (!ctx.is_set("source_charset")) {
    child.source = parent.source;
    child.source_name = parent.source_name;
    child.source_var = parent.source_var;
  }
  if (!ctx.is_set("charset_types")) {
    child.types = parent.types;
    child.any_type = parent.any_type;
  }
  // charset_map is read at the http level only.
  if (child.maps == nullptr) child.maps = parent.maps;
  return Status::ok();
}

const CharsetConf& conf_of(const Request& r) {
  return loc_conf<CharsetConf>(*r.loc, charset_module());
}

// ---- the request's state ------------------------------------------------------------------

constexpr std::uint32_t kMaxInput = 128;  // the producer's buffers not yet read
constexpr std::uint32_t kOutBufs = 4;
constexpr std::size_t kOutSize = 16384;
constexpr std::size_t kMaxLabel = 512;  // "type; charset=name"

struct CharsetCtx {
  Recoder recoder;    // map null: the Content-Type only
  bool busy = false;  // output passed on and not yet sent
  bool done = false;  // the end of the body was passed on
  bool last_seen = false;
  bool flush_pending = false;
  // Input not yet read, oldest first.
  Buf* in[kMaxInput] = {};
  std::uint32_t in_head = 0;
  std::uint32_t in_count = 0;
  const std::uint8_t* in_ptr = nullptr;
  std::size_t in_len = 0;
  Buf* cur = nullptr;    // the memory buffer in_ptr reads (its pos follows)
  char* rbuf = nullptr;  // a file range's piece read into memory
  std::uint32_t rbuf_size = 0;
  // Output buffers, taken as needed and reused.
  char* out_mem[kOutBufs] = {};
  Buf out[kOutBufs];
  Chain links[kOutBufs];
  std::uint32_t nout = 0;
  Buf end_mark;
  char label[kMaxLabel];
};

CharsetCtx* ctx_of(const Request& r) {
  return static_cast<CharsetCtx*>(r.ctx[charset_module().index()]);
}

CharsetCtx* make_ctx(Request& r) {
  release_charset(r);  // a second head (an error page after an internal redirect)
  char* mem = r.hc->worker->buffers().get(sizeof(CharsetCtx));
  if (mem == nullptr) return nullptr;
  auto* x = new (mem) CharsetCtx();
  r.ctx[charset_module().index()] = x;
  return x;
}

// The value a `charset` / `source_charset` setting gives for r, in `mem`.
std::string_view name_for(const Request& r, Source mode, const std::string& name,
                          const std::shared_ptr<const VarTemplate>& var, char* mem,
                          std::size_t cap) {
  if (mode == Source::kName) return name;
  if (mode != Source::kVariable) return {};
  if (var->length(r) > cap) return {};
  char* end = var->write(r, mem);
  return {mem, static_cast<std::size_t>(end - mem)};
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Content-Type's type (up to ';') and its charset parameter's value, quotes
// taken off ("" when it has none).
void split_type(std::string_view ct, std::string_view& type, std::string_view& charset) {
  const std::size_t semi = ct.find(';');
  type = trim(ct.substr(0, semi));
  charset = {};
  if (semi == std::string_view::npos) return;
  std::string_view params = ct.substr(semi + 1);
  while (!params.empty()) {
    const std::size_t next = params.find(';');
    std::string_view p = trim(params.substr(0, next));
    params = next == std::string_view::npos ? std::string_view() : params.substr(next + 1);
    if (p.size() > 8 && iequals(p.substr(0, 8), "charset=")) {
      charset = p.substr(8);
      if (charset.size() >= 2 && charset.front() == '"' && charset.back() == '"') {
        charset = charset.substr(1, charset.size() - 2);
      }
      return;
    }
  }
}

bool type_listed(const CharsetConf& c, std::string_view type) {
  if (c.any_type) return true;
  for (const std::string& t : c.types) {
    if (iequals(t, type)) return true;
  }
  return false;
}

// The response's Content-Encoding: the server's own, or a proxied field.
bool coded(const HeadersOut& h) {
  if (!h.content_encoding.empty()) return true;
  for (std::uint32_t i = 0; i < h.nfields; ++i) {
    const HeaderField& f = h.fields[i];
    if (!f.omit && iequals(f.name, "content-encoding") && !f.value.empty()) return true;
  }
  return false;
}

// Content-Type becomes "type; charset=name" (in the context's memory). A
// redirect's is left alone (nginx: old browsers took it for the next page's).
bool label(Request& r, CharsetCtx& x, std::string_view type, std::string_view name) {
  HeadersOut& h = r.headers_out;
  if (h.status == 301 || h.status == 302) return true;
  constexpr std::string_view kParam = "; charset=";
  if (type.size() + kParam.size() + name.size() > sizeof x.label) return false;
  char* p = x.label;
  std::memcpy(p, type.data(), type.size());
  p += type.size();
  std::memcpy(p, kParam.data(), kParam.size());
  p += kParam.size();
  std::memcpy(p, name.data(), name.size());
  p += name.size();
  h.content_type = std::string_view(x.label, static_cast<std::size_t>(p - x.label));
  return true;
}

// ---- recoding -----------------------------------------------------------------------------

// Recodes from x.in_ptr into [out, end); returns the new output end.
char* recode_some(CharsetCtx& x, char* out, char* end) {
  const std::uint8_t* in = x.in_ptr;
  out = x.recoder.run(in, x.in_ptr + x.in_len, out, end);
  const auto used = static_cast<std::size_t>(in - x.in_ptr);
  if (x.cur != nullptr) x.cur->pos += used;
  x.in_ptr = in;
  x.in_len -= used;
  return out;
}

// Points in_ptr at the next input bytes (a memory buffer's, or a piece of a
// file range read into rbuf); empty buffers are dropped, noting a last or
// flush mark. False on a read error.
bool take_input(Request& r, CharsetCtx& x) {
  x.cur = nullptr;
  while (x.in_count > 0) {
    Buf* b = x.in[x.in_head];
    if (b->in_file && b->file_pos < b->file_last) {
      const std::size_t piece = r.loc->output_buffer < 4096 ? 4096 : r.loc->output_buffer;
      if (r.hc->worker->buffers().reserve(x.rbuf, x.rbuf_size, piece) == nullptr) return false;
      const off_t left = b->file_last - b->file_pos;
      const std::size_t n =
          left < static_cast<off_t>(x.rbuf_size) ? static_cast<std::size_t>(left) : x.rbuf_size;
      const std::size_t got = read_file_some(*r.c, b->file_fd, b->file_pos, x.rbuf, n);
      if (got == 0) return false;
      b->file_pos += static_cast<off_t>(got);
      x.in_ptr = reinterpret_cast<const std::uint8_t*>(x.rbuf);
      x.in_len = got;
      return true;
    }
    if (!b->in_file && b->pos < b->last) {
      x.in_ptr = reinterpret_cast<const std::uint8_t*>(b->pos);
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

// Recodes what the producer passed into the output buffers, until the
// input is read or the buffers are full. False on a failure (logged).
bool produce(Request& r, CharsetCtx& x) {
  for (;;) {
    Buf* o = x.nout > 0 ? &x.out[x.nout - 1] : nullptr;
    if (o == nullptr || static_cast<std::size_t>(o->end - o->last) < kRecodeMaxOut) {
      if (x.nout == kOutBufs) return true;
      char*& mem = x.out_mem[x.nout];
      if (mem == nullptr) mem = r.hc->worker->buffers().get(kOutSize);
      if (mem == nullptr) {
        VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu no memory for a charset buffer",
                  static_cast<unsigned long long>(r.c->number));
        return false;
      }
      o = &x.out[x.nout++];
      o->reset(mem, kOutSize);
    }
    if (x.in_len == 0) {
      if (!take_input(r, x)) return false;
      if (x.in_len == 0) {
        if (x.last_seen) o->last = x.recoder.finish(o->last, o->end);
        return true;
      }
    }
    o->last = recode_some(x, o->last, o->end);
  }
}

// This round's output; the last buffer ends the body when the input did.
Chain* output_chain(CharsetCtx& x) {
  std::uint32_t k = 0;
  for (std::uint32_t i = 0; i < x.nout; ++i) {
    if (x.out[i].empty()) continue;
    x.out[i].flush = x.flush_pending;
    x.links[k].buf = &x.out[i];
    x.links[k].next = nullptr;
    if (k > 0) x.links[k - 1].next = &x.links[k];
    ++k;
  }
  const bool end = x.last_seen && x.in_count == 0;
  if (end) {
    x.done = true;
    if (k == 0) {
      x.end_mark = Buf{};
      x.end_mark.last_buf = true;
      x.links[0].buf = &x.end_mark;
      x.links[0].next = nullptr;
      k = 1;
    } else {
      x.links[k - 1].buf->last_buf = true;
    }
  } else if (k == 0 && x.flush_pending) {
    x.end_mark = Buf{};
    x.end_mark.flush = true;
    x.links[0].buf = &x.end_mark;
    x.links[0].next = nullptr;
    k = 1;
  }
  x.flush_pending = false;
  return k > 0 ? &x.links[0] : nullptr;
}

}  // namespace

int charset_header_filter(Request& r) {
  if (r.parent != nullptr) return 0;
  HeadersOut& h = r.headers_out;
  if (h.content_type.empty()) return 0;
  const CharsetConf& c = conf_of(r);
  if (c.charset == Source::kOff) return 0;
  std::string_view type;
  std::string_view given;
  split_type(h.content_type, type, given);
  if (given.empty() ? !type_listed(c, type) : !c.override_charset) return 0;

  char dst_mem[128];
  const std::string_view dst =
      name_for(r, c.charset, c.charset_name, c.charset_var, dst_mem, sizeof dst_mem);
  if (dst.empty()) return 0;
  char src_mem[128];
  std::string_view src = given;
  if (src.empty()) {
    src = name_for(r, c.source, c.source_name, c.source_var, src_mem, sizeof src_mem);
  }

  const bool recode = !src.empty() && !iequals(src, dst);
  // A coded body is not recoded, and keeps its Content-Type.
  if (recode && coded(h)) return 0;
  CharsetCtx* x = make_ctx(r);
  if (x == nullptr) return 500;
  if (!recode) {
    (void)label(r, *x, type, dst);
    return 0;
  }
  const CharsetMap* map = nullptr;
  bool reverse = false;
  if (c.maps != nullptr) {
    for (const auto& m : c.maps->maps) {
      if (iequals(m->from, src) && iequals(m->to, dst)) {
        map = m.get();
      } else if (iequals(m->from, dst) && iequals(m->to, src)) {
        map = m.get();
        reverse = true;
      }
    }
  }
  if (map == nullptr) {
    VIGIL_LOG(*r.c->log, kError, 0,
              "*%llu no \"charset_map\" between the charsets \"%.*s\" and \"%.*s\"",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(src.size()),
              src.data(), static_cast<int>(dst.size()), dst.data());
    return 0;
  }
  if (!label(r, *x, type, dst)) return 0;
  x->recoder.map = map;
  x->recoder.reverse = reverse;
  x->recoder.kind = !map->utf8 ? Recode::kEightBit : reverse ? Recode::kFromUtf8 : Recode::kToUtf8;
  // The producer passes the body through the filters. An 8-bit table keeps
  // every byte in its place, so a range of the recoded body is that range of
  // the old one, recoded (the range filter answers it, as nginx's does);
  // UTF-8 on either side changes the length, and no range is sent.
  r.body_changed = true;
  if (map->utf8) {
    h.accept_ranges = false;
    h.content_length = -1;
  }
  return 0;
}

int charset_body_filter(Request& r, Chain* in, BodyFilterNext next) {
  CharsetCtx* x = ctx_of(r);
  if (x == nullptr || x->recoder.map == nullptr || r.header_only) return next(r, in);
  for (Chain* cl = in; cl != nullptr; cl = cl->next) {
    if (x->done) {
      // Bytes after the end (a proxied body's tail): dropped.
      cl->buf->pos = cl->buf->last;
      cl->buf->file_pos = cl->buf->file_last;
      continue;
    }
    if (x->in_count == kMaxInput) {
      VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu charset: too many buffers passed at once",
                static_cast<unsigned long long>(r.c->number));
      return kBodyError;
    }
    x->in[(x->in_head + x->in_count) % kMaxInput] = cl->buf;
    ++x->in_count;
  }
  for (;;) {
    if (x->busy) {
      const int rc = next(r, nullptr);
      if (rc != kBodyOk) return rc;
      x->busy = false;
      x->nout = 0;
    }
    if (x->done) return kBodyOk;
    if (!produce(r, *x)) return kBodyError;
    Chain* out = output_chain(*x);
    if (out == nullptr) return in == nullptr ? next(r, nullptr) : kBodyOk;
    x->busy = true;
    const int rc = next(r, out);
    if (rc != kBodyOk) return rc;
    x->busy = false;
    x->nout = 0;
  }
}

void release_charset(Request& r) {
  void*& slot = r.ctx[charset_module().index()];
  auto* x = static_cast<CharsetCtx*>(slot);
  if (x == nullptr) return;
  BufferCache& cache = r.hc->worker->buffers();
  for (char* mem : x->out_mem) {
    if (mem != nullptr) cache.put(mem, kOutSize);
  }
  if (x->rbuf != nullptr) cache.put(x->rbuf, x->rbuf_size);
  x->~CharsetCtx();
  cache.put(reinterpret_cast<char*>(x), sizeof(CharsetCtx));
  slot = nullptr;
}

const HttpModule& charset_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_charset");  // never destroyed: used until exit
    auto conf = m->add_loc_conf<CharsetConf>({}, merge_charset);
    constexpr ConfContextMask kAny = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
    Module& c = m->conf();
    c.add("charset", kAny, Arity::exactly(1), conf.custom(set_charset));
    c.add("source_charset", kAny, Arity::exactly(1), conf.custom(set_source));
    c.add("override_charset", kAny, Arity::on_off(),
          conf.flag(&CharsetConf::override_charset, false));
    c.add("charset_types", kAny, Arity::one_or_more(), conf.custom(set_types));
    c.add_block("charset_map", kHttpMainConf, Arity::exactly(2), 0, conf.custom(set_map)).multiple =
        true;
    return m;
  }();
  return *module;
}

bool charset_is_utf8(const Request& r, std::string_view type) {
  const CharsetConf& c = conf_of(r);
  if (c.charset == Source::kOff || !type_listed(c, type)) return false;
  char mem[128];
  return is_utf8_name(name_for(r, c.charset, c.charset_name, c.charset_var, mem, sizeof mem));
}

bool uses_charset(const HttpServers& servers) {
  for (const HttpLocConf* loc : servers.locations) {
    if (loc_conf<CharsetConf>(*loc, charset_module()).charset != Source::kOff) return true;
  }
  return false;
}

}  // namespace vigil::http
