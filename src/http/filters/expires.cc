// expires (nginx's ngx_http_headers_filter_module, the expires half): a
// header filter that sets the Expires and Cache-Control fields of the
// responses of status 200, 201, 204, 206, 301, 302, 303, 304, 307 and 308,
// as nginx does. The filter only records the time and the max-age in the
// response head (HeadersOut::expires, cache_max_age); the head writer
// formats them, so nothing is allocated per request. A proxied response's
// own Expires and Cache-Control fields are replaced.
#include "http/filters/expires.h"

#include <memory>
#include <string_view>

#include "codec/http_date.h"
#include "codec/parse.h"
#include "codec/tokens.h"
#include "core/conf/values.h"
#include "http/core/conf.h"
#include "http/core/filters.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "http/core/servers.h"
#include "http/filters/add_header.h"
#include "vigil/core/clock.h"

namespace vigil::http {
namespace {

constexpr std::time_t kEpochTime = 1;             // Thu, 01 Jan 1970 00:00:01 GMT
constexpr std::time_t kMaxTime = 2145916555;      // Thu, 31 Dec 2037 23:55:55 GMT
constexpr std::int64_t kMaxAge = 315360000;       // ten years
constexpr std::int64_t kDay = 24 * 60 * 60;

// The next moment (after now) whose local time of day is `when` seconds
// after midnight.
std::time_t next_time_of_day(std::time_t now, std::int64_t when) {
  std::tm tm{};
  if (::localtime_r(&now, &tm) == nullptr) return -1;
  tm.tm_hour = static_cast<int>(when / 3600);
  tm.tm_min = static_cast<int>(when % 3600 / 60);
  tm.tm_sec = static_cast<int>(when % 60);
  tm.tm_isdst = -1;
  std::time_t next = std::mktime(&tm);
  if (next == -1 || next > now) return next;
  tm.tm_mday += 1;
  tm.tm_isdst = -1;
  return std::mktime(&tm);
}

// The Last-Modified time of the response: the server's own, or a proxied
// response's field.
std::time_t last_modified(const HeadersOut& h, std::time_t now) {
  if (h.last_modified >= 0) return h.last_modified;
  for (std::uint32_t i = 0; i < h.nfields; ++i) {
    const HeaderField& f = h.fields[i];
    if (f.omit || !iequals(f.name, "last-modified")) continue;
    auto t = parse_http_date(f.value, now);
    return t ? *t : -1;
  }
  return -1;
}

Status set_expires(const DirectiveCall& call, ExpiresConf& conf) {
  std::size_t n = 0;
  Expires kind = Expires::kAccess;
  if (call.arg_count() == 2) {
    if (call.arg(0) != "modified") return call.error("\"expires\" directive invalid value");
    kind = Expires::kModified;
    n = 1;
  }
  auto t = VarTemplate::compile(call.arg(n));
  if (!t) return call.error(t.status().message());
  conf.expires = kind;
  if (!t->is_literal()) {
    conf.value = std::move(t.value());
    conf.has_value = true;
    return Status::ok();
  }
  if (const char* err = parse_expires(call.arg(n), conf.expires, conf.time)) {
    return call.error(std::string("\"expires\" directive ") + err);
  }
  return Status::ok();
}

const ExpiresConf& expires_conf(const HttpLocConf& loc) {
  return loc_conf<ExpiresConf>(loc, expires_module());
}

}  // namespace

int expires_header_filter(Request& r) {
  if (r.loc == nullptr) return 0;
  HeadersOut& h = r.headers_out;
  if (!success_or_redirect(h.status)) return 0;
  const ExpiresConf& conf = expires_conf(*r.loc);
  Expires kind = conf.expires;
  std::int64_t time = conf.time;
  if (kind == Expires::kOff) return 0;
  if (conf.has_value) {
    // The value is short ("epoch", "@15h30m", "-1d"): a longer one is not one.
    char text[64];
    if (conf.value.length(r) >= sizeof text) return 0;
    const std::string_view v(text, static_cast<std::size_t>(conf.value.write(r, text) - text));
    if (parse_expires(v, kind, time) != nullptr || kind == Expires::kOff) return 0;
  }
  // The response's own fields (a proxied one's) give way.
  for (std::uint32_t i = 0; i < h.nfields; ++i) {
    HeaderField& f = h.fields[i];
    if (iequals(f.name, "expires") || iequals(f.name, "cache-control")) f.omit = true;
  }
  if (kind == Expires::kEpoch) {
    h.expires = kEpochTime;
    h.cache_max_age = HeadersOut::kNoCache;
    return 0;
  }
  if (kind == Expires::kMax) {
    h.expires = kMaxTime;
    h.cache_max_age = kMaxAge;
    return 0;
  }
  const std::time_t now = clock::now_sec();
  if (time == 0 && kind != Expires::kDaily) {
    h.expires = now;
    h.cache_max_age = 0;
    return 0;
  }
  std::time_t at = 0;
  std::int64_t max_age = 0;
  const std::time_t modified = kind == Expires::kModified ? last_modified(h, now) : -1;
  if (kind == Expires::kDaily) {
    at = next_time_of_day(now, time);
    if (at == -1) return 0;
    max_age = at - now;
  } else if (modified == -1) {
    at = now + time;
    max_age = time;
  } else {
    at = modified + time;
    max_age = at - now;
  }
  h.expires = at < 0 ? 0 : at;
  h.cache_max_age = time < 0 || max_age < 0 ? HeadersOut::kNoCache : max_age;
  return 0;
}

const char* parse_expires(std::string_view value, Expires& expires, std::int64_t& time) {
  if (expires != Expires::kModified) {
    if (value == "epoch") {
      expires = Expires::kEpoch;
      return nullptr;
    }
    if (value == "max") {
      expires = Expires::kMax;
      return nullptr;
    }
    if (value == "off") {
      expires = Expires::kOff;
      return nullptr;
    }
  }
  bool minus = false;
  bool daily = false;
  if (!value.empty() && value[0] == '@') {
    if (expires == Expires::kModified) {
      return "daily time cannot be used with \"modified\" parameter";
    }
    daily = true;
    value.remove_prefix(1);
  } else if (!value.empty() && (value[0] == '+' || value[0] == '-')) {
    minus = value[0] == '-';
    value.remove_prefix(1);
  }
  auto t = parse_sec(value);
  if (!t) return "invalid value";
  if (daily && *t > kDay) return "daily time value must be less than 24 hours";
  if (daily) expires = Expires::kDaily;
  time = minus ? -*t : *t;
  return nullptr;
}

const HttpModule& expires_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_expires");  // never destroyed: used until exit
    auto conf = m->add_loc_conf<ExpiresConf>(
        {}, [](const ConfInit& ctx, const ExpiresConf& parent, ExpiresConf& child) {
          if (!ctx.is_set("expires")) child = parent;
          return Status::ok();
        });
    m->conf().add("expires", kHttpMainConf | kHttpSrvConf | kHttpLocConf, Arity::between(1, 2),
                  conf.custom(set_expires));
    return m;
  }();
  return *module;
}

bool uses_expires(const HttpServers& servers) {
  for (const HttpLocConf* loc : servers.locations) {
    if (expires_conf(*loc).expires != Expires::kOff) return true;
  }
  return false;
}

}  // namespace vigil::http
