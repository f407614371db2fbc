// Static files (nginx's ngx_http_static_module and ngx_http_index_module,
// with the not_modified and range filters folded in).
//
// Containment: the path was normalised by normalize_path() (uri.h): decoded,
// dot segments resolved, a ".." above "/" refused, NUL refused. So the file
// name root + path names something lexically inside root whatever the
// request spelled. Symbolic links inside root are followed, as nginx does by
// default (disable_symlinks off): a link placed in the document root by its
// owner is trusted. Files are opened through the location's open_file_cache
// when it has one (open_file_cache.h), else opened, fstat()ed and closed per
// request.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/fault.h"
#include "codec/http_date.h"
#include "http/core/filters.h"
#include "http/core/phases.h"
#include "http/filters/range.h"
#include "http/gzip/gzip.h"
#include "http/static/autoindex.h"
#include "http/static/disable_symlinks.h"
#include "http/static/open_file_cache.h"
#include "http/static/open_file_cache_conf.h"
#include "http/core/request.h"
#include "http/static/map_path.h"
#include "codec/tokens.h"
#include "codec/uri.h"
#include "http/core/worker.h"
#include "vigil/core/log.h"

namespace vigil::http {

std::string_view content_type_for(const HttpLocConf& loc, std::string_view ext) {
  const TypesMap& types = loc.types ? *loc.types : TypesMap::builtin();
  std::string_view t = types.find(ext);
  return t.empty() ? std::string_view(loc.default_type) : t;
}

namespace {

// The errors nginx maps to 404 and 403 (ngx_http_static_handler); a
// failed fstat() is a 500.
int status_for_error(const OpenFileInfo& info) {
  if (std::strcmp(info.failed, "open") != 0) return 500;
  switch (info.err) {
    case ENOENT:
    case ENOTDIR:
    case ENAMETOOLONG:
      return 404;
    case ELOOP:  // a link disable_symlinks refused (nginx with openat: 403)
    case EMLINK:
    case EACCES:
    case EPERM:
      return 403;
    default:
      return 500;
  }
}

void log_open_error(Request& r, const char* name, const OpenFileInfo& info) {
  // nginx logs a missing file (log_not_found on) and a forbidden one at
  // "error", the rest at "crit".
  const int err = info.err;
  const auto number = static_cast<unsigned long long>(r.c->number);
  if (err == ENOENT || err == ENOTDIR || err == ENAMETOOLONG || err == ELOOP || err == EACCES) {
    // log_not_found off: a missing file is not logged (a forbidden one is).
    if ((err == ENOENT || err == ENOTDIR || err == ENAMETOOLONG) && !r.loc->log_not_found) return;
    VIGIL_LOG(*r.c->log, kError, err, "*%llu %s() \"%s\" failed", number, info.failed, name);
  } else {
    VIGIL_LOG(*r.c->log, kCrit, err, "*%llu %s() \"%s\" failed", number, info.failed, name);
  }
}

char* put_hex(char* p, unsigned long long v) {
  static constexpr char kHex[] = "0123456789abcdef";
  char tmp[16];
  int n = 0;
  do {
    tmp[n++] = kHex[v & 0xf];
    v >>= 4;
  } while (v != 0);
  while (n > 0) *p++ = tmp[--n];
  return p;
}

std::size_t format_etag(const OpenFileInfo& info, char* out) {
  // nginx's form: "<mtime hex>-<size hex>".
  char* p = out;
  *p++ = '"';
  p = put_hex(p, static_cast<unsigned long long>(info.mtime));
  *p++ = '-';
  p = put_hex(p, static_cast<unsigned long long>(info.size));
  *p++ = '"';
  return static_cast<std::size_t>(p - out);
}

}  // namespace

// Opens `name` (NUL-terminated) for the request: through the location's
// open_file_cache when it has one, else directly.
void open_file(Request& r, const HttpLocConf& loc, std::string_view name, OpenFileInfo& info,
               FileRef& ref) {
  ref = FileRef{};
  const OpenFileCacheLocConf& fc = open_file_cache_conf(loc);
  if (fc.cache != nullptr) {
    if (OpenFileCache* cache = r.hc->worker->file_cache(fc.cache->index)) {
      OpenFileParams p;
      p.valid = static_cast<Msec>(fc.valid) * 1000;
      p.min_uses = fc.min_uses;
      p.errors = fc.errors;
      p.loc = &loc;
      p.r = &r;
      cache->open(name, p, clock::current_msec(), info, ref);
      return;
    }
  }
  open_and_stat(name.data(), &loc, &r, info, ref.fd);
}

// Gives back a descriptor open_file() handed out.
void drop(Request& r, FileRef& ref) {
  if (ref.entry != nullptr) {
    OpenFileCache::release(*ref.entry, clock::current_msec());
  } else if (ref.fd != -1) {
    close_file(*r.c, ref.fd);
  }
  ref = FileRef{};
}

namespace {

// Serves the open file `ref` (what `info` says of it) with the conditional
// and range rules of RFC 9110 §13 and §14. Takes ownership of ref. Returns 0
// or a status. `encoding`: the file is a precompressed FILE.gz (.br, .zst),
// sent as FILE with this Content-Encoding.
int serve_file(Request& r, FileRef ref, const OpenFileInfo& info, std::string_view ext,
               std::string_view encoding = {}) {
  const HttpLocConf& loc = *r.loc;
  char etag_buf[48];
  const std::string_view etag(etag_buf, format_etag(info, etag_buf));
  const std::time_t mtime = info.mtime;
  const std::int64_t size = info.size;
  const int fd = ref.fd;

  HeadersOut& h = r.headers_out;
  HeadersOut fresh;
  // The error_page of a redirect keeps its Location (finalize_error).
  fresh.location = h.location;
  fresh.location_query = h.location_query;
  fresh.location_as_is = h.location_as_is;
  fresh.www_authenticate = h.www_authenticate;
  h = fresh;
  h.content_type = content_type_for(loc, ext);
  h.content_length = size;
  if (!encoding.empty()) h.content_encoding = encoding;
  if (r.status != 0) {
    // An error_page: the page, whole, with the error's status.
    h.status = r.status;
  } else {
    // The validators and ranges: the not-modified and range filters decide
    // what is sent (304, 412, 206, 416).
    h.status = 200;
    h.last_modified = mtime;
    h.etag = etag;
    h.accept_ranges = true;
  }
  r.header_only = r.line.method == Method::kHead;
  // Read in pieces by the writer, after the body filters: it cannot be
  // chunked for trailer fields, so it keeps its length.
  h.length_only = !loc.sendfile && size > static_cast<std::int64_t>(loc.output_buffer);
  if (const int rc = send_header(r); rc != 0) {
    drop(r, ref);
    return rc;
  }
  const std::int64_t first = r.body_offset;
  // A multipart answer is made of the whole file by the range filter. A body
  // a filter changes without keeping its length (gzip) has none in the head:
  // the whole file goes to the filter; one that keeps it (an 8-bit charset)
  // gets the range.
  const bool multipart = range_multipart(r);
  const std::int64_t length = multipart                ? size
                              : h.content_length >= 0 ? h.content_length
                              : r.body_changed         ? size
                                                       : 0;
  r.bbuf = Buf{};
  if (r.header_only || length == 0) {
    drop(r, ref);
    send_response(r);
    return 0;
  }
  // A body that fits after the header goes in the same buffer: one send, one
  // TCP segment, where header + sendfile would be two. Copying a few hundred
  // bytes costs less than sendfile's setup; larger files are never copied
  // whole (sendfile, or output_buffers-sized pieces).
  // A body a filter changes (gzip) goes through the filters whole.
  if (!r.chunked_out && !r.body_changed && !multipart &&
      static_cast<std::int64_t>(r.hbuf.end - r.hbuf.last) >= length) {
    for (;;) {
      ssize_t got = ::pread(fd, r.hbuf.last, static_cast<std::size_t>(length), first);
      if (got == length) break;
      if (got == -1 && errno == EINTR) continue;
      VIGIL_LOG(*r.c->log, kCrit, got == -1 ? errno : 0, "*%llu pread() of %lld bytes got %lld",
                static_cast<unsigned long long>(r.c->number), static_cast<long long>(length),
                static_cast<long long>(got));
      drop(r, ref);
      r.hbuf = Buf{};  // nothing was sent: the error can still be answered
      return 500;
    }
    r.hbuf.last += length;
    drop(r, ref);
    send_response(r);
    return 0;
  }
  r.fd = fd;
  r.file_entry = ref.entry;  // released with the request (release_file)
  if (loc.sendfile || r.body_changed || multipart) {
    // A file range; a filter that changes the body reads it into memory
    // itself (sendfile or not), a piece at a time. The parts of a multipart
    // answer are ranges of the file, sent with sendfile even when it is off.
    r.use_sendfile = loc.sendfile && !r.body_changed;
    r.bbuf.in_file = true;
    r.bbuf.file_fd = fd;
    r.bbuf.file_pos = first;
    r.bbuf.file_last = first + length;
  } else {
    // Read and written in output_buffers-sized pieces: never the whole file.
    r.file_pos = first;
    r.file_end = first + length;
    std::size_t bsize = loc.output_buffer;
    char* mem = r.hc->worker->buffers().get(bsize);
    if (mem == nullptr) return 500;  // fd is closed with the request
    r.obuf = mem;
    r.obuf_size = static_cast<std::uint32_t>(bsize);
  }
  send_response(r);
  return 0;
}

// gzip_static, brotli_static, zstd_static: serves the file name[0, len) +
// ".gz" (".br", ".zst") in place of the file when there is one and it
// should be sent (gzip.h: the client's preferred coding first); kNoGz when
// none, else what serve_file answered. `name` has room for `cap` bytes and
// is NUL-terminated at `len` again on return.
constexpr int kNoGz = -1;
int serve_gzip_static(Request& r, char* name, std::size_t len, std::size_t cap,
                      std::string_view ext) {
  Coding codings[3];
  const std::size_t n = static_codings(r, codings);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string_view suffix = coding_suffix(codings[i]);
    if (len + suffix.size() + 1 > cap) continue;
    OpenFileInfo info;
    FileRef ref;
    std::memcpy(name + len, suffix.data(), suffix.size());
    name[len + suffix.size()] = '\0';
    open_file(r, *r.loc, std::string_view(name, len + suffix.size()), info, ref);
    if (info.err != 0 && info.err != ENOENT && info.err != ENOTDIR && info.err != ENAMETOOLONG) {
      log_open_error(r, name, info);  // then the next, and the file itself, are tried, as nginx does
    }
    name[len] = '\0';
    if (info.err == 0 && info.is_file && static_coding_found(r, codings[i])) {
      return serve_file(r, ref, info, ext, coding_name(codings[i]));
    }
    if (info.err == 0) drop(r, ref);
  }
  return kNoGz;
}

std::string_view extension_of(std::string_view name) {
  const std::size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return {};
  return name.substr(dot + 1);
}

}  // namespace

int static_handler(Request& r, std::string_view path, std::string_view extension) {
  const HttpLocConf& loc = *r.loc;
  if (r.line.method != Method::kGet && r.line.method != Method::kHead) return 405;
  if (path.empty() || path[0] != '/') return 404;  // "*" (OPTIONS *) names no file

  HttpWorker& w = *r.hc->worker;
  const std::size_t large = w.servers().max_large_buffer;
  // Scratch layout: [0, large) the normalised path; [large, 2*large+512) a
  // path with an index name; the rest, the file name.
  char* uri2 = w.scratch() + large;
  char* name = uri2 + large + 512;
  const std::size_t name_cap = w.scratch_size() - 2 * large - 512;
  // Room for an index name after it.
  const std::size_t len = map_uri_to_path(r, loc, path, name, name_cap - 256);
  if (len == std::string::npos) return 414;

  if (path.back() == '/') {
    // The index module: the first index file that opens.
    OpenFileInfo info;
    FileRef ref;
    for (std::size_t i = 0; i < loc.index.size(); ++i) {
      std::string_view index = loc.index[i];
      if (i < loc.index_vars.size() && loc.index_vars[i] != nullptr) {
        // A name with variables: evaluated for this request.
        const VarTemplate& t = *loc.index_vars[i];
        char* mem = request_alloc(r, t.length(r) + 1);
        if (mem == nullptr) return 500;
        index = std::string_view(mem, static_cast<std::size_t>(t.write(r, mem) - mem));
        if (index.empty()) continue;
      }
      if (index[0] == '/') {
        // The absolute last one: an internal redirect to it, unchecked (the
        // location it reaches answers), with the request's arguments.
        if (!set_request_uri(r, index)) return 500;
        return internal_redirect(r);
      }
      if (len + index.size() + 1 > name_cap) break;
      std::memcpy(name + len, index.data(), index.size());
      name[len + index.size()] = '\0';
      open_file(r, loc, std::string_view(name, len + index.size()), info, ref);
      if (info.err != 0) {
        if (info.err == ENOENT || info.err == ENOTDIR) continue;
        log_open_error(r, name, info);
        return status_for_error(info);
      }
      if (!info.is_file) {
        drop(r, ref);
        continue;
      }
      // nginx redirects internally to path + index: another location may apply.
      std::memcpy(uri2, path.data(), path.size());
      std::memcpy(uri2 + path.size(), index.data(), index.size());
      const std::string_view new_uri(uri2, path.size() + index.size());
      const HttpLocConf& next = find_location(*r.srv, new_uri);
      if (&next != &loc) {
        drop(r, ref);
        if (!set_request_uri(r, new_uri)) return 500;
        return internal_redirect(r);
      }
      // $uri names the index file, as after nginx's internal redirect.
      if (!set_request_uri(r, new_uri)) {
        drop(r, ref);
        return 500;
      }
      const std::size_t index_len = len + index.size();
      if (const int rc = serve_gzip_static(r, name, index_len, name_cap, extension_of(index));
          rc != kNoGz) {
        drop(r, ref);
        return rc;
      }
      return serve_file(r, ref, info, extension_of(index));
    }
    name[len] = '\0';
    open_file(r, loc, std::string_view(name, len), info, ref);
    drop(r, ref);
    if (info.err != 0) {
      log_open_error(r, name, info);
      return status_for_error(info);
    }
    if (!info.is_dir) return 404;
    if (autoindex_enabled(loc)) return autoindex_handler(r, name, path);
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu directory index of \"%s\" is forbidden",
              static_cast<unsigned long long>(r.c->number), name);
    return 403;
  }

  OpenFileInfo info;
  FileRef ref;
  if (const int rc = serve_gzip_static(r, name, len, name_cap, extension); rc != kNoGz) {
    return rc;
  }
  open_file(r, loc, std::string_view(name, len), info, ref);
  if (info.err != 0) {
    log_open_error(r, name, info);
    return status_for_error(info);
  }
  if (info.is_dir) {
    drop(r, ref);
    // nginx: 301 to the path with a slash, the query kept; an error_page
    // naming a directory too (the 301 replaces the error's status).
    HeadersOut& h = r.headers_out;
    h = HeadersOut{};
    h.status = 301;
    std::memcpy(uri2, path.data(), path.size());
    uri2[path.size()] = '/';
    h.location = std::string_view(uri2, path.size() + 1);
    if (r.line.has_query) h.location_query = r.line.query;
    std::string_view body = special_body(301, loc.server_tokens);
    h.content_type = "text/html";
    h.content_length = static_cast<std::int64_t>(body.size());
    r.header_only = r.line.method == Method::kHead;
    if (const int rc = send_header(r); rc != 0) return rc;
    r.bbuf = Buf{};
    if (!r.header_only) {
      char* p = const_cast<char*>(body.data());  // static, only read
      r.bbuf.reset(p, body.size());
      r.bbuf.last = p + body.size();
    }
    send_response(r);
    return 0;
  }
  if (!info.is_file) {
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu \"%s\" is not a regular file",
              static_cast<unsigned long long>(r.c->number), name);
    drop(r, ref);
    return 404;
  }
  return serve_file(r, ref, info, extension);
}

namespace {

// The content phase's handler for a location without one of its own: the
// body is read and thrown away first, then r.uri is served from the root.
int static_content_handler(Request& r) {
  if (const int rc = discard_request_body(r); rc != kPhaseNext) return rc;
  return static_handler(r, r.uri, path_extension(r.uri));
}

}  // namespace

void add_static_phase(PhaseEngine& engine) {
  engine.add(HttpPhase::kContent, static_content_handler);
}

}  // namespace vigil::http
