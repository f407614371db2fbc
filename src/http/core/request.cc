// A request once its head is read (nginx's ngx_http_process_request,
// ngx_http_finalize_request): choose the server and location, run the
// phases, and end the request. The body is read or thrown away through
// request_body.h, by the handler that answers.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "codec/tokens.h"
#include "codec/uri.h"
#include "event/tls/tls.h"
#include "http/access/access.h"
#include "http/access/auth_basic.h"
#include "http/access/limit_conn.h"
#include "http/access/limit_req.h"
#include "http/core/post_action.h"
#include "http/core/counters.h"
#include "http/core/phases.h"
#include "http/core/request.h"
#include "http/v2/h2.h"
#include "http/core/subrequest.h"
#include "http/core/worker.h"
#include "http/proxy/proxy.h"
#include "http/rewrite/rewrite.h"
#include "http/static/try_files.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http {

// The read side while the response is made and written. Pipelined input
// waits for its turn (a level-triggered backend would wake us for every
// byte, so client_gone takes the read event out); a client that has closed
// or reset the connection ends the request at once with 499, as nginx's
// ngx_http_test_reading does, instead of holding it until a send fails or
// times out (a slow or rate-limited response to a client that left).
void block_reading(Request& r) {
  Connection& c = *r.c;
  if (c.close) {  // told to close (shutdown timeout): the response is abandoned
    terminate_request(r, 0);
    return;
  }
  int err = 0;
  if (!client_gone(r, err)) return;
  VIGIL_LOG(*c.log, kInfo, err, "*%llu client prematurely closed connection",
            static_cast<unsigned long long>(c.number));
  terminate_request(r, 499);
}

namespace {

// Keeps the normalised path as $uri: a view of the raw path when they are
// the same (the common case), else a copy (the scratch is reused).
bool keep_uri(Request& r, std::string_view path) {
  if (path == r.line.path) {
    r.uri = r.line.path;
    return true;
  }
  const std::size_t size = r.hc->srv->large_buffers_size;
  if (path.size() > size) return false;
  char* mem = r.hc->worker->buffers().get(size);
  if (mem == nullptr) return false;
  std::memcpy(mem, path.data(), path.size());
  r.uri_mem = mem;
  r.uri_mem_size = static_cast<std::uint32_t>(size);
  r.uri = std::string_view(mem, path.size());
  return true;
}

}  // namespace

namespace {

// The request's URI buffer: the URI from its start, arguments (when they
// are the buffer's) at its end.
char* uri_buffer(Request& r) {
  if (r.uri_mem == nullptr) {
    const std::size_t size = r.hc->srv->large_buffers_size;
    char* mem = r.hc->worker->buffers().get(size);
    if (mem == nullptr) return nullptr;
    r.uri_mem = mem;
    r.uri_mem_size = static_cast<std::uint32_t>(size);
  }
  return r.uri_mem;
}

bool args_in_buffer(const Request& r) {
  return r.uri_mem != nullptr && r.line.query.data() >= r.uri_mem &&
         r.line.query.data() < r.uri_mem + r.uri_mem_size;
}

}  // namespace

bool set_request_uri(Request& r, std::string_view uri) {
  char* mem = uri_buffer(r);
  if (mem == nullptr) return false;
  const std::size_t args = args_in_buffer(r) ? r.line.query.size() : 0;
  if (uri.size() + args > r.uri_mem_size) return false;
  std::memcpy(mem, uri.data(), uri.size());
  r.uri = std::string_view(mem, uri.size());
  return true;
}

bool set_request_uri_and_args(Request& r, std::string_view target) {
  const std::size_t q = target.find('?');
  const std::string_view uri = target.substr(0, q);
  char* mem = uri_buffer(r);
  if (mem == nullptr || target.size() > r.uri_mem_size) return false;
  if (q == std::string_view::npos) {
    r.line.query = {};
    r.line.has_query = false;
  } else {
    const std::string_view args = target.substr(q + 1);
    char* at = mem + r.uri_mem_size - args.size();
    std::memcpy(at, args.data(), args.size());
    r.line.query = std::string_view(at, args.size());
    r.line.has_query = true;
  }
  std::memcpy(mem, uri.data(), uri.size());
  r.uri = std::string_view(mem, uri.size());
  return true;
}

namespace {

// nginx's auto_redirect: a 301 to the name of r.loc (the location named
// r.uri + "/"), with the request's arguments. The request ends with the
// status, so the location's error_page for 301 applies, else the built-in
// page, which keeps the Location.
int auto_redirect(Request& r) {
  // Copied: the arguments may lie in the URI buffer an error_page reuses.
  const std::string_view name = r.loc->name;
  const std::string_view args = r.line.has_query ? r.line.query : std::string_view();
  char* mem = location_memory(r, name.size() + args.size());
  if (mem == nullptr) return 500;
  std::memcpy(mem, name.data(), name.size());
  if (!args.empty()) std::memcpy(mem + name.size(), args.data(), args.size());
  HeadersOut& h = r.headers_out;
  h.location = std::string_view(mem, name.size());
  h.location_query = std::string_view(mem + name.size(), args.size());
  h.location_as_is = false;
  return 301;
}

}  // namespace

char* location_memory(Request& r, std::size_t size) {
  return r.hc->worker->buffers().reserve(r.location_mem, r.location_mem_size, size);
}

void use_error_log(Connection& c, const HttpLocConf& loc) {
  c.log = loc.error_log != nullptr ? loc.error_log : &c.loop->log();
}

int find_config_handler(Request& r) {
  const LocationMatch m = match_location(r, r.uri);
  r.loc = m.loc;
  r.if_content = nullptr;
  const HttpLocConf& loc = *r.loc;
  use_error_log(*r.c, loc);
  if (m.error) return 500;
  // An `internal` location answers only requests redirected to it.
  if (loc.internal && !r.internal) return 404;
  // As nginx's find-config phase: a declared body over client_max_body_size
  // is refused before any module of the location runs.
  if (r.check.content_length >= 0 && loc.client_max_body_size > 0 &&
      static_cast<std::uint64_t>(r.check.content_length) > loc.client_max_body_size) {
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu client intended to send too large body: %lld bytes",
              static_cast<unsigned long long>(r.c->number),
              static_cast<long long>(r.check.content_length));
    return 413;
  }
  if (m.redirect) return auto_redirect(r);
  return kPhaseNext;
}

int location_content_handler(Request& r) {
  const ContentHandler* h = r.loc->content != nullptr ? r.loc->content : r.if_content;
  if (h == nullptr) return kPhaseDeclined;  // the content phase's handlers
  return h->run(r);
}

namespace {

// A request over TLS whose Host chooses another server block than the one
// SNI chose, when either of the two checks client certificates: the
// certificate was checked (or not) by the SNI server's rules, so the other
// server must not serve it (nginx's 421, RFC 9110 §15.5.20). nginx looks at
// the Host server's ssl_verify_client only; the SNI server's counts too here,
// since its verification is the one that ran.
bool misdirected(const HttpConnection& hc, const Request& r) {
  if (r.check.host.empty() || r.srv == hc.srv || hc.srv == nullptr) return false;
  const std::string_view sni = tls_server_name(*r.c);
  if (sni.empty()) return false;
  if (r.check.host.size() == sni.size() && iequals(r.check.host, sni)) return false;
  return hc.srv->ssl.verify != TlsVerify::kOff || r.srv->ssl.verify != TlsVerify::kOff;
}

}  // namespace

namespace {

// The head was read but its fields are refused (an invalid or duplicate
// Host, a bad Content-Length, Content-Length with chunked): as nginx, the
// error_page the server (the address's default, or the one SNI chose) has
// for the status applies, with the request's URI. Its body is never read:
// nothing of the refused framing is kept, and the connection closes after
// the answer.
void refuse_head(Request& r) {
  r.check.content_length = -1;
  r.check.chunked = false;
  r.check.keep_alive = false;
  r.check.expect_continue = false;
  r.loc = r.srv->loc;
  if (r.line.form == TargetForm::kOrigin || r.line.form == TargetForm::kAbsolute) {
    HttpWorker& w = *r.hc->worker;
    const NormalizedPath np =
        normalize_path(r.line.path, w.scratch(), w.scratch_size(), r.srv->merge_slashes);
    if (np.ok() && !keep_uri(r, np.path)) r.uri = {};
  }
  finalize_error(r, r.check.status);
}

// A second line of a field that must appear once (nginx's unique request
// fields; Host, Content-Length and Transfer-Encoding are the parser's
// checks): which two, or null. Two values of a precondition or of the
// credentials leave no one meaning to act on (RFC 9110 §5.3: a field that
// is not a list must not be repeated).
const HeaderField* duplicate_field(const Request& r, const HeaderField*& first) {
  std::uint32_t seen = 0;
  const HeaderField* firsts[8] = {};
  for (std::uint32_t i = 0; i < r.nfields; ++i) {
    const HeaderField& f = r.fields[i];
    constexpr HeaderId kOnce[] = {HeaderId::kIfModifiedSince, HeaderId::kIfUnmodifiedSince,
                                  HeaderId::kIfMatch,         HeaderId::kIfNoneMatch,
                                  HeaderId::kIfRange,         HeaderId::kExpect,
                                  HeaderId::kAuthorization};
    int k = -1;
    for (int j = 0; j < 7; ++j) {
      if (f.id == kOnce[j]) k = j;
    }
    if (k < 0 && f.id == HeaderId::kOther && iequals(f.name, "content-range")) k = 7;
    if (k < 0) continue;
    if ((seen & (1u << k)) != 0) {
      first = firsts[k];
      return &f;
    }
    seen |= 1u << k;
    firsts[k] = &f;
  }
  return nullptr;
}

}  // namespace

void process_request(Request& r) {
  HttpConnection& hc = *r.hc;
  Connection& c = *r.c;
  EventLoop& loop = *c.loop;

  HttpCounters* counters = http_counters();
  counters->reading.add(-1);
  counters->writing.add();
  r.stat_reading = false;
  r.stat_writing = true;
  loop.del_timer(*c.read);
  r.read_event_handler = block_reading;
  r.write_event_handler = write_handler;

  r.check = r.checker->finish();
  if (!r.check.ok()) {
    VIGIL_LOG(*c.log, kInfo, 0, "*%llu client sent invalid header: %s",
              static_cast<unsigned long long>(c.number), r.check.error);
    refuse_head(r);
    return;
  }
  if (hc.stream != nullptr) {
    // A malformed HTTP/2 request its stream found (RFC 9113 §8.1.1),
    // answered as a refused head is.
    if (const int bad = h2::malformed_status(r); bad != 0) {
      r.check.status = bad;
      refuse_head(r);
      return;
    }
  }
  const HeaderField* first = nullptr;
  if (const HeaderField* dup = duplicate_field(r, first); dup != nullptr) {
    VIGIL_LOG(*c.log, kInfo, 0,
              "*%llu client sent duplicate header line: \"%.*s: %.*s\", previous value: \"%.*s: "
              "%.*s\"",
              static_cast<unsigned long long>(c.number), static_cast<int>(dup->name.size()),
              dup->name.data(), static_cast<int>(dup->value.size()), dup->value.data(),
              static_cast<int>(first->name.size()), first->name.data(),
              static_cast<int>(first->value.size()), first->value.data());
    r.check.status = 400;
    refuse_head(r);
    return;
  }
  r.srv = &hc.addr->find_server(r.check.host, &r);
  use_error_log(c, *r.srv->loc);

  // nginx's internal 497/496/495, answered as 400 with their own pages.
  if (hc.plain_http) {
    VIGIL_LOG(*c.log, kInfo, 0, "*%llu client sent plain HTTP request to HTTPS port",
              static_cast<unsigned long long>(c.number));
    finalize_error(r, kStatusPlainHttp);
    return;
  }
  if (c.ssl != nullptr && misdirected(hc, r)) {
    VIGIL_LOG(*c.log, kInfo, 0,
              "*%llu client attempted to request the server name different from the one that "
              "was negotiated",
              static_cast<unsigned long long>(c.number));
    finalize_error(r, 421);
    return;
  }
  if (c.ssl != nullptr) {
    if (const int st = tls_client_verify_status(c); st != 0) {
      finalize_error(r, st);
      return;
    }
  }

  // An unknown method is not implemented here (RFC 9110 §9.1); CONNECT and
  // "OPTIONS *" name no file and are answered by the method check below.
  if (r.line.method == Method::kOther) {
    finalize_error(r, 501);
    return;
  }

  HttpWorker& w = *hc.worker;
  NormalizedPath np;
  if (r.line.form == TargetForm::kOrigin || r.line.form == TargetForm::kAbsolute) {
    np = normalize_path(r.line.path, w.scratch(), w.scratch_size(), r.srv->merge_slashes);
    if (!np.ok()) {
      VIGIL_LOG(*c.log, kInfo, 0, "*%llu client sent invalid path: %s",
                static_cast<unsigned long long>(c.number), np.error);
      r.loc = r.srv->loc;
      finalize_error(r, np.status);
      return;
    }
  } else {
    np.path = "*";
  }
  // TRACE would echo the request's fields (cookies, credentials) back to a
  // script that asks for it: refused everywhere, and the connection closed,
  // as nginx does when it reads the head ("client sent TRACE method").
  // RFC 9110 leaves TRACE optional. (A PUT without Content-Length or chunked
  // coding has an empty body, RFC 9112 §6.3: the proxy forwards it, the
  // static handler answers 405.)
  if (r.line.method == Method::kTrace) {
    VIGIL_LOG(*c.log, kInfo, 0, "*%llu client sent TRACE method",
              static_cast<unsigned long long>(c.number));
    r.check.keep_alive = false;
    r.loc = &find_location(*r.srv, np.path);  // its 405 says what the location allows
    finalize_error(r, 405);
    return;
  }
  r.loc = r.srv->loc;  // until find-config chooses the location
  if (!keep_uri(r, np.path)) {
    finalize_error(r, 500);
    return;
  }
  r.phase = Phase::kWriting;
  r.phase_step = 0;
  run_phases(r);
}

namespace {

// if=condition: empty or "0" leaves the line out.
bool log_condition_holds(const Request& r, const VarTemplate& condition) {
  char small[64];
  const std::size_t n = condition.length(r);
  if (n == 0) return false;
  if (n > sizeof small) return true;  // longer than "0": written
  const std::size_t len = static_cast<std::size_t>(condition.write(r, small) - small);
  return len != 0 && !(len == 1 && small[0] == '0');
}

// The combined format's values for r; `user` holds $remote_user's.
void combined_fields(Request& r, AccessLogLine& line, char (&user)[kRemoteUserMax]) {
  Connection& c = *r.c;
  line.remote_addr = c.addr_text;
  bool has_user = false;
  line.remote_user = remote_user(r, user, has_user);
  line.request = r.line.line;
  line.status = r.status;
  line.body_bytes = static_cast<std::int64_t>(c.sent - r.sent_start - r.header_size);
  line.referer = r.referer;
  line.user_agent = r.user_agent;
}

// An access_log whose path has variables: the line goes straight to the
// file the path names for this request, opened for it or kept open by
// open_log_file_cache. As nginx's, nothing is written when the location's
// root directory does not exist.
void write_variable_log(Request& r, const AccessLogConf& conf) {
  HttpConnection& hc = *r.hc;
  Connection& c = *r.c;
  const HttpLocConf& loc = r.loc != nullptr ? *r.loc : *hc.srv->loc;
  if (!loc.alias && loc.root_vars == nullptr) {
    struct stat st;
    int err = 0;
    if (::stat(loc.root_path.c_str(), &st) == -1) {
      err = errno;
    } else if (!S_ISDIR(st.st_mode)) {
      err = ENOTDIR;
    }
    if (err != 0) {
      VIGIL_LOG(*c.log, kError, err, "*%llu testing \"%s\" existence failed",
                static_cast<unsigned long long>(c.number), loc.root_path.c_str());
      return;
    }
  }
  const VarTemplate& path_t = *conf.path_var;
  const std::size_t path_len = path_t.length(r);
  const bool dash = conf.format == nullptr || conf.format->escape == VarEscape::kDefault;
  AccessLogLine combined;
  char user[kRemoteUserMax];
  if (conf.format == nullptr) combined_fields(r, combined, user);
  const std::size_t line_len = conf.format != nullptr
                                   ? conf.format->format.length(r, conf.format->escape, dash) + 1
                                   : combined_line_size(combined);
  char* mem = request_alloc(r, path_len + 1 + line_len);
  if (mem == nullptr) return;
  char* path_end = path_t.write(r, mem);
  *path_end = '\0';
  bool owned = true;
  int fd = -1;
  if (loc.log_file_cache != nullptr) {
    LogFileCache* cache = hc.worker->log_file_cache(*loc.log_file_cache);
    if (cache != nullptr) fd = cache->open(mem, clock::current_msec(), owned);
  } else {
    fd = open_log_file(mem);
  }
  if (fd == -1) {
    VIGIL_LOG(*c.log, kCrit, errno, "*%llu open() \"%s\" failed",
              static_cast<unsigned long long>(c.number), mem);
    return;
  }
  char* line = path_end + 1;
  char* end;
  if (conf.format != nullptr) {
    end = conf.format->format.write(r, line, conf.format->escape, dash);
    *end++ = '\n';
  } else {
    end = write_combined_line(combined, line);
  }
  write_log_fd(fd, line, static_cast<std::size_t>(end - line), mem, *c.log);
  if (owned) (void)::close(fd);  // a log file, written with O_APPEND: nothing pending
}

void write_access_log(Request& r, const AccessLogConf& conf) {
  HttpConnection& hc = *r.hc;
  Connection& c = *r.c;
  if (conf.condition && !log_condition_holds(r, *conf.condition)) return;
  if (conf.path_var != nullptr) {
    write_variable_log(r, conf);
    return;
  }
  AccessLog* log = hc.worker->access_log(conf.index);
  if (log == nullptr) return;
  if (conf.format) {
    const LogFormat& f = *conf.format;
    const bool dash = f.escape == VarEscape::kDefault;  // nginx: "-" only there
    const std::size_t need = f.format.length(r, f.escape, dash) + 1;
    char* line = log->begin(need, c.loop->log());
    char* end = f.format.write(r, line, f.escape, dash);
    *end++ = '\n';
    if (log->end(end, c.loop->log()) && log->flush_after() > 0) {
      hc.worker->arm_flush(log->flush_after());
    }
    return;
  }
  AccessLogLine line;
  char user[kRemoteUserMax];
  combined_fields(r, line, user);
  if (write_combined(*log, line, c.loop->log()) && log->flush_after() > 0) {
    hc.worker->arm_flush(log->flush_after());
  }
}

}  // namespace

void finalize_request(Request& r) {
  HttpConnection& hc = *r.hc;
  Connection& c = *r.c;
  if (r.phase == Phase::kDone) return;
  r.phase = Phase::kDone;
  if (r.parent != nullptr) {
    // A subrequest: no log line (nginx's log_subrequest off), the
    // connection is its parent's; the parent hears of the end.
    subrequest_ended(r);
    return;
  }
  // post_action: the request goes on, its answer unsent; this runs again
  // when the post action ends (nginx runs it after a failed response too).
  if (start_post_action(r)) return;

  const HttpLocConf& loc = r.loc != nullptr ? *r.loc : *hc.srv->loc;
  for (const auto& conf : loc.access_logs) write_access_log(r, *conf);

  const bool keepalive = r.keepalive && !c.error && !c.timedout && !c.close;
  const bool lingering = r.lingering;
  release_request(r);

  if (hc.stream != nullptr) {
    // An HTTP/2 stream: the stream ends (reset when its response did not),
    // the connection goes on.
    h2::request_done(hc, c.error || c.timedout);
    return;
  }

  if (c.error || c.timedout) {
    close_connection(hc);
    return;
  }
  if (keepalive) {
    set_keepalive(hc, loc);
    return;
  }
  const Buf& b = hc.buffer;
  const bool unread = (b.start != nullptr && b.pos < b.last) || c.read->ready;
  if (loc.lingering_close == Lingering::kAlways ||
      (loc.lingering_close == Lingering::kOn && (lingering || unread))) {
    set_lingering_close(hc, loc);
    return;
  }
  close_connection(hc);
}

void terminate_request(Request& r, int status) {
  if (r.parent != nullptr) {
    // A subrequest that cannot complete its response: its parent decides
    // (the client connection is not the subrequest's to close).
    if (status != 0 && !r.sub_header_sent) r.status = status;
    r.sub_failed = true;
    finalize_request(r);
    return;
  }
  if (status != 0 && (r.status == 0 || r.c->sent == r.sent_start)) r.status = status;
  r.c->error = 1;
  finalize_request(r);
}

namespace {

// The page's target for r: its text, or its variables evaluated into the
// request's memory. Empty when no memory.
std::string_view error_page_target(Request& r, const ErrorPage& page) {
  if (page.target == nullptr) return page.uri;
  const std::size_t n = page.target->length(r);
  char* mem = request_alloc(r, n + 1);
  if (mem == nullptr) return {};
  return std::string_view(mem, static_cast<std::size_t>(page.target->write(r, mem) - mem));
}

// error_page (nginx's ngx_http_send_error_page): a URL is a redirect; a path
// is an internal redirect and a named location the request's location, both
// run through the phases from there, with the status the page says. False
// when the built-in page is to be sent instead.
bool error_page_redirect(Request& r, const ErrorPage& page, int status, bool closes) {
  ++r.redirects;
  if (closes) r.check.keep_alive = false;
  const bool named = page.uri.front() == '@';
  const std::string_view target = error_page_target(r, page);
  if (target.empty()) {
    r.status = 0;
    send_special(r, 500);
    return true;
  }
  if (!named && target.front() != '/') {
    // A URL: a redirect to it, 302 unless "=" names another redirect
    // status (nginx's ngx_http_send_error_page).
    HeadersOut& h = r.headers_out;
    h.restart_for(0);
    char* mem = location_memory(r, target.size());
    if (mem == nullptr) {
      send_special(r, 500);
      return true;
    }
    std::memcpy(mem, target.data(), target.size());
    h.location = std::string_view(mem, target.size());
    h.location_as_is = true;
    r.status = 0;
    send_special(r, is_redirect(page.overwrite) ? page.overwrite : 302);
    return true;
  }
  // A redirect's Location stays for a page that sets none (nginx's does).
  r.headers_out.restart_for(status);
  r.body_offset = 0;
  // "=code" answers with that code, "=" with the page's own status, none
  // with the error's (nginx's err_status).
  r.status = page.overwrite < 0 ? status : page.overwrite;
  r.error_page = true;
  r.internal = true;
  if (named) {
    const int rc = named_location_redirect(r, target);
    if (rc != kPhaseJump) {
      r.status = 0;
      send_special(r, rc);
      return true;
    }
    run_phases(r);
    return true;
  }
  // The page's URI and arguments become the request's, as nginx's
  // internal redirect to it ($uri, $args).
  if (!set_request_uri_and_args(r, target)) {
    r.status = 0;
    send_special(r, 500);
    return true;
  }
  // Through the phases, as nginx's: the page's location checks its access
  // rules and may proxy (a response of the upstream still attached, after
  // proxy_intercept_errors, is let go when the next one starts).
  r.uri_redirected = true;
  r.uri_changed = false;
  r.phase_step = r.srv->phases->start(HttpPhase::kServerRewrite);
  run_phases(r);
  return true;
}

}  // namespace

void finalize_error(Request& r, int status) {
  if (r.phase == Phase::kDone) return;
  if (r.hbuf.start != nullptr || r.sub_header_sent) {
    // A header is already on its way: nothing else can be said.
    terminate_request(r, status);
    return;
  }
  r.phase = Phase::kWriting;
  // A status that closes the connection gets its page too once the request
  // reached its location (r.uri set: not a head that failed to parse), as
  // nginx's; the connection still closes after it.
  const bool closes = status_closes(status);
  if (r.error_page) {
    // The page's own location answered with a status of its own (a
    // redirect, a missing file): that one is sent with the built-in page,
    // as nginx's err_status becomes it (no error_page of an error_page).
    r.status = 0;
  } else if (r.loc != nullptr && r.redirects < kMaxRedirects && (!closes || !r.uri.empty()) &&
             (r.line.method == Method::kGet || r.line.method == Method::kHead)) {
    if (const ErrorPage* page = r.loc->find_error_page(status); page != nullptr) {
      if (error_page_redirect(r, *page, status, closes)) return;
    }
  }
  send_special(r, status);
}

}  // namespace vigil::http
