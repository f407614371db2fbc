// split_clients (nginx's ngx_http_split_clients_module), for A/B tests:
//
//   split_clients "${remote_addr}AAA" $variant { 0.5% .one; 2.0% .two; * ""; }
//
// The source is hashed with MurmurHash2; the 32-bit hash space is cut into
// parts in order, each the given share of it ("*": the rest), and the
// variable is the value of the part the hash falls in (empty past the last
// part when the shares do not add up to 100%). Computed when a request
// first reads it, kept for the request.
#include "http/split_clients/split_clients.h"

#include <memory>
#include <string>
#include <vector>

#include "core/conf/module.h"
#include "core/conf/parser.h"
#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "http/core/request_vars.h"
#include "http/core/variables.h"

namespace vigil::http {

std::uint32_t murmur_hash2(const unsigned char* data, std::size_t len) {
  constexpr std::uint32_t m = 0x5bd1e995;
  std::uint32_t h = static_cast<std::uint32_t>(len);
  while (len >= 4) {
    std::uint32_t k = static_cast<std::uint32_t>(data[0]) | (static_cast<std::uint32_t>(data[1]) << 8) |
                      (static_cast<std::uint32_t>(data[2]) << 16) |
                      (static_cast<std::uint32_t>(data[3]) << 24);
    k *= m;
    k ^= k >> 24;
    k *= m;
    h *= m;
    h ^= k;
    data += 4;
    len -= 4;
  }
  switch (len) {
    case 3:
      h ^= static_cast<std::uint32_t>(data[2]) << 16;
      [[fallthrough]];
    case 2:
      h ^= static_cast<std::uint32_t>(data[1]) << 8;
      [[fallthrough]];
    case 1:
      h ^= data[0];
      h *= m;
      break;
    default:
      break;
  }
  h ^= h >> 13;
  h *= m;
  h ^= h >> 15;
  return h;
}

namespace {

struct Part {
  std::uint32_t upto = 0;  // the part holds hashes below this; 0 with `rest`
  bool rest = false;       // "*"
  std::string value;
};

class SplitVariable final : public ComputedVariable {
 public:
  VarTemplate source;
  std::vector<Part> parts;

  bool compute(Request& r, std::string_view& out) const override {
    const std::size_t n = source.length(r);
    char* mem = request_alloc(r, n + 1);
    if (mem == nullptr) return false;
    const std::size_t len = static_cast<std::size_t>(source.write(r, mem) - mem);
    const std::uint32_t hash = murmur_hash2(reinterpret_cast<const unsigned char*>(mem), len);
    for (const Part& p : parts) {
      if (p.rest || hash < p.upto) {
        out = p.value;
        return true;
      }
    }
    out = {};
    return true;
  }
};

// "51.2%" as hundredths of a percent (5120); -1 when malformed.
long parse_percent(std::string_view s) {
  if (s.size() < 2 || s.back() != '%') return -1;
  s.remove_suffix(1);
  long whole = 0;
  long frac = 0;
  int digits = 0;
  bool dot = false;
  for (char ch : s) {
    if (ch == '.' && !dot) {
      dot = true;
      continue;
    }
    if (ch < '0' || ch > '9') return -1;
    if (!dot) {
      whole = whole * 10 + (ch - '0');
      if (whole > 100) return -1;
    } else {
      if (++digits > 2) return -1;
      frac = frac * 10 + (ch - '0');
    }
  }
  while (digits < 2) {
    frac *= 10;
    ++digits;
  }
  return whole * 100 + frac;
}

class SplitSink : public StatementSink {
 public:
  explicit SplitSink(SplitVariable& var) : var_(var) {}
  Status on_statement(ConfParser& parser, const ConfStatement& st) override {
    const std::string where = parser.origin().where(st.words[0].line);
    if (st.end != ConfTerminator::kSemicolon) return Status::error("unexpected \"{\"" + where);
    if (st.words.size() != 2) {
      return Status::error("invalid number of arguments in \"split_clients\" block" + where);
    }
    Part p;
    p.value = st.words[1].text;
    if (st.words[0].text == "*") {
      p.rest = true;
    } else {
      const long pct = parse_percent(st.words[0].text);
      if (pct <= 0) return Status::error("invalid percent value \"" + st.words[0].text + "\"" + where);
      sum_ += pct;
      if (sum_ > 10000) return Status::error("percent total is greater than 100%" + where);
      p.upto = static_cast<std::uint32_t>(static_cast<std::uint64_t>(sum_) * 0xffffffffULL / 10000);
    }
    var_.parts.push_back(std::move(p));
    return Status::ok();
  }

 private:
  SplitVariable& var_;
  long sum_ = 0;
};

Status set_split_clients(const DirectiveCall& call) {
  auto name = declared_variable_word(call.arg(1));
  if (!name) return call.error(name.status().message());
  auto split = std::make_shared<SplitVariable>();
  auto src = VarTemplate::compile(call.arg(0));
  if (!src) return call.error(src.status().message());
  split->source = std::move(src.value());
  SplitSink sink(*split);
  if (Status s = call.parse_block(sink); !s) return s;
  set_computed_variable(declare_variable(name.value()), std::move(split));
  return Status::ok();
}

}  // namespace

const HttpModule& split_clients_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_split_clients");  // never destroyed: used until exit
    m->conf()
        .add_block("split_clients", kHttpMainConf, Arity::exactly(2), 0,
                   DirectiveBody::handler(set_split_clients))
        .multiple = true;
    return m;
  }();
  return *module;
}

}  // namespace vigil::http
