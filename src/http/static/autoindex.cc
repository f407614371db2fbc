// autoindex (nginx's ngx_http_autoindex_module): the listing of a directory
// whose URI ends in '/' and that has no index file, in nginx's formats
// (html, xml, json, jsonp), byte for byte.
//
// The directory is read whole (names and stat() facts in two buffers that
// grow with malloc, so a failure is a 500, not an exception), sorted with
// directories first, then formatted twice: once to count the bytes, once
// into a worker buffer of that size, sent with its Content-Length (nginx
// sends the listing chunked; the bytes are the same). Names starting with
// '.' are left out; a symbolic link is described by what it points to, or
// by itself when that is gone.
#include "http/static/autoindex.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "http/charset/charset.h"
#include "http/core/filters.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "http/core/worker.h"
#include "vigil/core/clock.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

enum class AutoindexFormat : std::uint8_t { kHtml, kXml, kJson, kJsonp };

struct AutoindexConf {
  bool on = false;
  AutoindexFormat format = AutoindexFormat::kHtml;
  bool exact_size = true;
  bool localtime = false;
};

// Names longer than this are cut in the HTML listing (nginx's column).
constexpr std::size_t kNameColumn = 50;

struct Entry {
  std::size_t name;  // offset in the names buffer
  std::size_t len;
  bool dir;
  bool file;
  std::time_t mtime;
  std::int64_t size;
};

// A growable malloc'd array: allocation failure is a result.
template <class T>
class Grow {
 public:
  Grow() = default;
  Grow(const Grow&) = delete;
  Grow& operator=(const Grow&) = delete;
  ~Grow() { std::free(p_); }
  bool append(const T* v, std::size_t n) {
    if (n_ + n > cap_) {
      std::size_t cap = std::max<std::size_t>(cap_ * 2, 64);
      while (cap < n_ + n) cap *= 2;
      void* q = std::realloc(p_, cap * sizeof(T));
      if (q == nullptr) return false;
      p_ = static_cast<T*>(q);
      cap_ = cap;
    }
    std::memcpy(p_ + n_, v, n * sizeof(T));
    n_ += n;
    return true;
  }
  T* data() { return p_; }
  const T* data() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
  std::size_t cap_ = 0;
};

// Counts bytes (out null) or writes them.
class Out {
 public:
  explicit Out(char* out) : p_(out) {}
  void put(std::string_view s) {
    if (p_ != nullptr) std::memcpy(p_ + n_, s.data(), s.size());
    n_ += s.size();
  }
  void put(char c) {
    if (p_ != nullptr) p_[n_] = c;
    ++n_;
  }
  void put_padded(std::int64_t v, int width) {
    char tmp[24];
    int k = 0;
    std::uint64_t u = v < 0 ? 0 : static_cast<std::uint64_t>(v);
    do {
      tmp[k++] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    for (int i = k; i < width; ++i) put(' ');
    while (k > 0) put(tmp[--k]);
  }
  void put_2(int v) {
    put(static_cast<char>('0' + v / 10 % 10));
    put(static_cast<char>('0' + v % 10));
  }
  std::size_t size() const { return n_; }

 private:
  char* p_;
  std::size_t n_ = 0;
};

void put_html(Out& o, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '<':
        o.put("&lt;");
        break;
      case '>':
        o.put("&gt;");
        break;
      case '&':
        o.put("&amp;");
        break;
      case '"':
        o.put("&quot;");
        break;
      default:
        o.put(c);
    }
  }
}

// nginx's escaping of a URI component: what is not an unreserved character
// (and '!', '*', '\'', '(', ')' too) as %XX.
bool escapes_in_component(unsigned char c) {
  if (c >= 0x80 || c <= 0x20 || c == 0x7f) return true;
  if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) return false;
  return c != '-' && c != '.' && c != '_' && c != '~';
}

void put_uri_component(Out& o, std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (escapes_in_component(c)) {
      o.put('%');
      o.put(kHex[c >> 4]);
      o.put(kHex[c & 0xf]);
    } else {
      o.put(ch);
    }
  }
}

void put_json(Out& o, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        o.put("\\\"");
        break;
      case '\\':
        o.put("\\\\");
        break;
      case '\b':
        o.put("\\b");
        break;
      case '\f':
        o.put("\\f");
        break;
      case '\n':
        o.put("\\n");
        break;
      case '\r':
        o.put("\\r");
        break;
      case '\t':
        o.put("\\t");
        break;
      default:
        if (c < 0x20) {
          o.put("\\u00");
          o.put(kHex[c >> 4]);
          o.put(kHex[c & 0xf]);
        } else {
          o.put(ch);
        }
    }
  }
}

constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

void put_size(Out& o, const Entry& e, bool exact) {
  if (exact) {
    if (e.dir) {
      o.put("                  -");
    } else {
      o.put_padded(e.size, 19);
    }
    return;
  }
  if (e.dir) {
    o.put("      -");
    return;
  }
  // Rounded to the nearest unit, as nginx's.
  constexpr std::int64_t kK = 1024, kM = kK * 1024, kG = kM * 1024;
  const std::int64_t n = e.size;
  std::int64_t size = n;
  char scale = '\0';
  if (n > kG - 1) {
    size = n / kG + (n % kG > kG / 2 - 1 ? 1 : 0);
    scale = 'G';
  } else if (n > kM - 1) {
    size = n / kM + (n % kM > kM / 2 - 1 ? 1 : 0);
    scale = 'M';
  } else if (n > 9999) {
    size = n / kK + (n % kK > 511 ? 1 : 0);
    scale = 'K';
  }
  if (scale != '\0') {
    o.put_padded(size, 6);
    o.put(scale);
  } else {
    o.put(' ');
    o.put_padded(size, 6);
  }
}

// The bytes of the first `chars` UTF-8 characters of `s`, and in `count`
// how many characters `s` holds; false when `s` is not valid UTF-8 (then
// its bytes count, as nginx counts them).
bool utf8_prefix(std::string_view s, std::size_t chars, std::size_t& bytes, std::size_t& count) {
  bytes = s.size();
  count = 0;
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
                                                          : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    if (count == chars) bytes = i;
    ++count;
    i += len;
  }
  return true;
}

// `utf8`: the page goes out as UTF-8 (the location's `charset utf-8`), so
// a name's column width counts characters, not bytes.
void format_html(Out& o, std::string_view uri, const Entry* e, std::size_t n, const char* names,
                 const AutoindexConf& conf, long gmtoff, bool utf8) {
  o.put("<html>\r\n<head><title>Index of ");
  put_html(o, uri);
  o.put("</title></head>\r\n<body>\r\n<h1>Index of ");
  put_html(o, uri);
  o.put("</h1><hr><pre><a href=\"../\">../</a>\r\n");
  for (std::size_t i = 0; i < n; ++i) {
    const std::string_view name(names + e[i].name, e[i].len);
    o.put("<a href=\"");
    put_uri_component(o, name);
    if (e[i].dir) o.put('/');
    o.put("\">");
    std::size_t len = name.size();
    std::size_t cut = kNameColumn - 3;
    if (utf8) {
      std::size_t chars = 0;
      std::size_t bytes = 0;
      if (utf8_prefix(name, kNameColumn - 3, bytes, chars)) {
        len = chars;
        cut = bytes;
      }
    }
    if (len > kNameColumn) {
      put_html(o, name.substr(0, cut));
      o.put("..&gt;</a>");
    } else {
      put_html(o, name);
      if (e[i].dir && len < kNameColumn) {
        o.put('/');
        ++len;
      }
      o.put("</a>");
      for (std::size_t k = len; k < kNameColumn; ++k) o.put(' ');
    }
    o.put(' ');
    const std::time_t t = e[i].mtime + (conf.localtime ? gmtoff : 0);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    o.put_2(tm.tm_mday);
    o.put('-');
    o.put(kMonths[tm.tm_mon]);
    o.put('-');
    o.put_padded(tm.tm_year + 1900, 0);
    o.put(' ');
    o.put_2(tm.tm_hour);
    o.put(':');
    o.put_2(tm.tm_min);
    o.put(' ');
    put_size(o, e[i], conf.exact_size);
    o.put("\r\n");
  }
  o.put("</pre><hr></body>\r\n</html>\r\n");
}

void format_xml(Out& o, const Entry* e, std::size_t n, const char* names) {
  o.put("<?xml version=\"1.0\"?>\r\n<list>\r\n");
  for (std::size_t i = 0; i < n; ++i) {
    const char* type = e[i].dir ? "directory" : e[i].file ? "file" : "other";
    o.put('<');
    o.put(type);
    o.put(" mtime=\"");
    std::tm tm{};
    ::gmtime_r(&e[i].mtime, &tm);
    o.put_padded(tm.tm_year + 1900, 4);
    o.put('-');
    o.put_2(tm.tm_mon + 1);
    o.put('-');
    o.put_2(tm.tm_mday);
    o.put('T');
    o.put_2(tm.tm_hour);
    o.put(':');
    o.put_2(tm.tm_min);
    o.put(':');
    o.put_2(tm.tm_sec);
    o.put("Z\"");
    if (e[i].file) {
      o.put(" size=\"");
      o.put_padded(e[i].size, 0);
      o.put('"');
    }
    o.put('>');
    put_html(o, std::string_view(names + e[i].name, e[i].len));
    o.put("</");
    o.put(type);
    o.put(">\r\n");
  }
  o.put("</list>\r\n");
}

void format_json(Out& o, const Entry* e, std::size_t n, const char* names,
                 std::string_view callback) {
  if (!callback.empty()) {
    o.put("/* callback */\r\n");
    o.put(callback);
    o.put('(');
  }
  o.put('[');
  for (std::size_t i = 0; i < n; ++i) {
    o.put("\r\n{ \"name\":\"");
    put_json(o, std::string_view(names + e[i].name, e[i].len));
    o.put("\", \"type\":\"");
    o.put(e[i].dir ? "directory" : e[i].file ? "file" : "other");
    o.put("\", \"mtime\":\"");
    char date[32];
    o.put(std::string_view(date, clock::format_imf_fixdate(e[i].mtime, date)));
    o.put('"');
    if (e[i].file) {
      o.put(", \"size\":");
      o.put_padded(e[i].size, 0);
    }
    o.put(i + 1 < n ? " }," : " }");
  }
  o.put("\r\n]");
  if (!callback.empty()) o.put(");");
}

// The "callback" argument of a jsonp listing: "" when there is none; false
// when it is not a plain JavaScript name (letters, digits, '_', '.').
bool jsonp_callback(Request& r, std::string_view& callback) {
  callback = {};
  if (!r.line.has_query) return true;
  std::string_view q = r.line.query;
  while (!q.empty()) {
    const std::size_t amp = q.find('&');
    const std::string_view arg = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (arg.size() < 9 || arg.substr(0, 9) != "callback=") continue;
    callback = arg.substr(9);
    break;
  }
  if (callback.size() > 128) {
    VIGIL_LOG(*r.c->log, kInfo, 0, "*%llu client sent too long callback name: \"%.*s\"",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(callback.size()),
              callback.data());
    return false;
  }
  for (char c : callback) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
        c == '.') {
      continue;
    }
    VIGIL_LOG(*r.c->log, kInfo, 0, "*%llu client sent invalid callback name: \"%.*s\"",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(callback.size()),
              callback.data());
    return false;
  }
  return true;
}

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

}  // namespace

bool autoindex_enabled(const HttpLocConf& loc) {
  return loc_conf<AutoindexConf>(loc, autoindex_module()).on;
}

int autoindex_handler(Request& r, const char* dir_path, std::string_view uri) {
  const AutoindexConf& conf = loc_conf<AutoindexConf>(*r.loc, autoindex_module());
  const auto number = static_cast<unsigned long long>(r.c->number);
  AutoindexFormat format = conf.format;
  std::string_view callback;
  if (format == AutoindexFormat::kJsonp) {
    if (!jsonp_callback(r, callback)) return 400;
    if (callback.empty()) format = AutoindexFormat::kJson;
  }

  DIR* dir = ::opendir(dir_path);
  if (dir == nullptr) {
    const int err = errno;
    int status = 500;
    if (err == ENOENT || err == ENOTDIR || err == ENAMETOOLONG) {
      status = 404;
    } else if (err == EACCES) {
      status = 403;
    }
    if (status == 500) {
      VIGIL_LOG(*r.c->log, kCrit, err, "*%llu opendir() \"%s\" failed", number, dir_path);
    } else {
      VIGIL_LOG(*r.c->log, kError, err, "*%llu opendir() \"%s\" failed", number, dir_path);
    }
    return status;
  }
  std::unique_ptr<DIR, DirCloser> closer(dir);

  // dir_path/name for stat().
  char path[4096];
  const std::size_t dlen = std::strlen(dir_path);
  if (dlen + 256 + 1 > sizeof path) return 414;
  std::memcpy(path, dir_path, dlen);

  Grow<Entry> entries;
  Grow<char> names;
  for (;;) {
    errno = 0;
    const dirent* de = ::readdir(dir);
    if (de == nullptr) {
      if (errno != 0) {
        VIGIL_LOG(*r.c->log, kCrit, errno, "*%llu readdir() \"%s\" failed", number, dir_path);
        return 500;
      }
      break;
    }
    const std::size_t len = std::strlen(de->d_name);
    if (len == 0 || de->d_name[0] == '.') continue;  // hidden, and "." and ".."
    if (dlen + len + 1 > sizeof path) continue;
    std::memcpy(path + dlen, de->d_name, len + 1);
    struct stat st;
    if (::stat(path, &st) == -1) {
      const int err = errno;
      if (err != ENOENT && err != ELOOP) {
        VIGIL_LOG(*r.c->log, kCrit, err, "*%llu stat() \"%s\" failed", number, path);
        if (err == EACCES) continue;
        return 500;
      }
      // A link to nothing: described by itself.
      if (::lstat(path, &st) == -1) {
        VIGIL_LOG(*r.c->log, kCrit, errno, "*%llu lstat() \"%s\" failed", number, path);
        return 500;
      }
    }
    Entry e{names.size(),        len,         S_ISDIR(st.st_mode),
            S_ISREG(st.st_mode), st.st_mtime, static_cast<std::int64_t>(st.st_size)};
    if (!names.append(de->d_name, len) || !entries.append(&e, 1)) {
      VIGIL_LOG(*r.c->log, kAlert, ENOMEM, "*%llu out of memory listing \"%s\"", number, dir_path);
      return 500;
    }
  }
  closer.reset();

  const char* nm = names.data();
  Entry* e = entries.data();
  const std::size_t n = entries.size();
  if (n > 1) {
    std::sort(e, e + n, [nm](const Entry& a, const Entry& b) {
      if (a.dir != b.dir) return a.dir;
      const int c = std::memcmp(nm + a.name, nm + b.name, std::min(a.len, b.len));
      return c != 0 ? c < 0 : a.len < b.len;
    });
  }

  long gmtoff = 0;
  if (conf.localtime) {
    const std::time_t now = clock::now_sec();
    std::tm tm{};
    if (::localtime_r(&now, &tm) != nullptr) gmtoff = tm.tm_gmtoff;
  }
  const bool utf8 = format == AutoindexFormat::kHtml && charset_is_utf8(r, "text/html");
  auto format_into = [&](Out& o) {
    switch (format) {
      case AutoindexFormat::kHtml:
        format_html(o, uri, e, n, nm, conf, gmtoff, utf8);
        break;
      case AutoindexFormat::kXml:
        format_xml(o, e, n, nm);
        break;
      case AutoindexFormat::kJson:
      case AutoindexFormat::kJsonp:
        format_json(o, e, n, nm, callback);
        break;
    }
  };
  Out count(nullptr);
  format_into(count);
  const std::size_t size = count.size();
  char* mem = r.hc->worker->buffers().reserve(r.obuf, r.obuf_size, size);
  if (mem == nullptr) return 500;
  Out write(mem);
  format_into(write);

  HeadersOut& h = r.headers_out;
  HeadersOut fresh;
  fresh.www_authenticate = h.www_authenticate;
  h = fresh;
  h.status = r.status != 0 ? r.status : 200;
  switch (format) {
    case AutoindexFormat::kHtml:
      h.content_type = "text/html";
      break;
    case AutoindexFormat::kXml:
      h.content_type = "text/xml; charset=utf-8";
      break;
    case AutoindexFormat::kJson:
      h.content_type = "application/json";
      break;
    case AutoindexFormat::kJsonp:
      h.content_type = "application/javascript";
      break;
  }
  h.content_length = static_cast<std::int64_t>(size);
  r.header_only = r.line.method == Method::kHead;
  if (const int rc = send_header(r); rc != 0) return rc;
  r.bbuf = Buf{};
  if (!r.header_only && size > 0) {
    r.bbuf.reset(mem, size);
    r.bbuf.last = mem + size;
  }
  send_response(r);
  return 0;
}

const HttpModule& autoindex_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_autoindex");  // never destroyed: used until exit
    auto conf = m->add_loc_conf<AutoindexConf>();
    constexpr ConfContextMask kWhere = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
    m->conf().add("autoindex", kWhere, Arity::on_off(), conf.flag(&AutoindexConf::on, false));
    m->conf().add("autoindex_format", kWhere, Arity::exactly(1),
                  conf.one_of(&AutoindexConf::format, AutoindexFormat::kHtml,
                              {{"html", AutoindexFormat::kHtml},
                               {"xml", AutoindexFormat::kXml},
                               {"json", AutoindexFormat::kJson},
                               {"jsonp", AutoindexFormat::kJsonp}}));
    m->conf().add("autoindex_exact_size", kWhere, Arity::on_off(),
                  conf.flag(&AutoindexConf::exact_size, true));
    m->conf().add("autoindex_localtime", kWhere, Arity::on_off(),
                  conf.flag(&AutoindexConf::localtime, false));
    return m;
  }();
  return *module;
}

}  // namespace vigil::http
