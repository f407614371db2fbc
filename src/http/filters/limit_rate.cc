// limit_rate / limit_rate_after (nginx's ngx_http_write_filter limit): a
// response goes out at most at `limit_rate` bytes per second, the first
// `limit_rate_after` bytes free. HTTP/1's final writer (writer.cc), which
// every response goes through, asks rate_allowance how much it may send now
// (core/rate_limit.h); when nothing, it sets the write event's `delayed`
// flag and a timer for when the next byte is due, and the loop serves
// others meanwhile.
#include "http/filters/limit_rate.h"

#include "core/conf/values.h"
#include "http/core/conf.h"
#include "http/core/request.h"
#include "http/core/variables.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

// "12k", or an expression with variables worked out per response.
Status set_rate(const DirectiveCall& call, std::size_t& value,
                std::shared_ptr<const VarTemplate>& var) {
  const std::string& a = call.arg(0);
  if (a.find('$') != std::string::npos) {
    auto t = VarTemplate::compile(a);
    if (!t) return call.error(t.status().message());
    if (!t.value().is_literal()) {
      var = std::make_shared<const VarTemplate>(std::move(t.value()));
      value = 0;
      return Status::ok();
    }
  }
  auto v = parse_size(a);
  if (!v) return call.invalid_value(0);
  value = static_cast<std::size_t>(*v);
  var.reset();
  return Status::ok();
}

// The location's size for this request: a literal, or its expression's
// value (an empty or invalid one is 0, no limit).
std::uint64_t location_size(Request& r, std::size_t value, const VarTemplate* var) {
  if (var == nullptr) return value;
  char text[64];
  if (var->length(r) > sizeof text) {
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu invalid size in \"%s\"",
              static_cast<unsigned long long>(r.c->number), var->source().c_str());
    return 0;
  }
  const std::string_view s(text, static_cast<std::size_t>(var->write(r, text) - text));
  if (s.empty()) return 0;
  auto v = parse_size(s);
  if (!v) {
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu invalid size \"%.*s\"",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(s.size()), s.data());
    return 0;
  }
  return *v;
}

}  // namespace

void add_limit_rate_directives(Module& m, ConfSlot<HttpLocConf> loc) {
  constexpr ConfContextMask kAny = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
  m.add("limit_rate", kAny, Arity::exactly(1), loc.custom([](const DirectiveCall& call, HttpLocConf& c) {
    return set_rate(call, c.limit_rate, c.limit_rate_var);
  }));
  m.add("limit_rate_after", kAny, Arity::exactly(1),
        loc.custom([](const DirectiveCall& call, HttpLocConf& c) {
          return set_rate(call, c.limit_rate_after, c.limit_rate_after_var);
        }));
}

std::uint64_t response_limit_rate(Request& r) {
  if (!r.limit_rate_set) {
    r.limit_rate = location_size(r, r.loc->limit_rate, r.loc->limit_rate_var.get());
    r.limit_rate_set = true;
  }
  return r.limit_rate;
}

std::uint64_t response_limit_rate_after(Request& r) {
  if (!r.limit_rate_after_set) {
    r.limit_rate_after =
        location_size(r, r.loc->limit_rate_after, r.loc->limit_rate_after_var.get());
    r.limit_rate_after_set = true;
  }
  return r.limit_rate_after;
}

bool set_limit_rate(Request& r, std::string_view value) {
  auto v = parse_size(value);
  if (!v) {
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu invalid size \"%.*s\"",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(value.size()),
              value.data());
    return false;
  }
  r.limit_rate = *v;
  r.limit_rate_set = true;
  return true;
}

}  // namespace vigil::http
