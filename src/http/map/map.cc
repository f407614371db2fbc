// map (nginx's ngx_http_map_module):
//
//   map $source $variable {
//     [hostnames;] [volatile;]
//     default value;
//     key value;  ~regex value;  ~*regex value;
//   }
//
// $variable is computed when a request first reads it, and kept for the
// rest of the request (volatile: computed at every read). The source is
// looked up among the keys without regard to case (a hash), then (with
// hostnames) among the wildcard names, then the expressions in order; the
// value, which may hold variables and the expression's groups, is evaluated
// into the request's memory. No default: the empty string.
#include "http/map/map.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/conf/module.h"
#include "codec/chars.h"
#include "core/conf/parser.h"
#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "http/core/request_vars.h"
#include "http/core/variables.h"

namespace vigil::http {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = chars::to_lower(ch);
  return out;
}

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct MapValue {
  std::string text;  // a value without variables
  std::shared_ptr<const VarTemplate> vars;  // one with variables
  std::string where;  // " in F:L": compiled once the http block is read
};

// A value's variables are compiled when the whole http block has been
// read (compile_values), so that a value may name the variable of a map
// written after its own, as in nginx.
MapValue pending_value(const std::string& text, std::string where) {
  MapValue v;
  v.text = text;
  if (text.find('$') != std::string::npos) v.where = std::move(where);
  return v;
}

Status compile_value(MapValue& v) {
  if (v.where.empty()) return Status::ok();
  auto t = VarTemplate::compile(v.text);
  if (!t) return Status::error(t.status().message() + v.where);
  if (!t.value().is_literal()) v.vars = std::make_shared<const VarTemplate>(std::move(t.value()));
  v.where.clear();
  return Status::ok();
}

class MapVariable final : public ComputedVariable {
 public:
  VarTemplate source;
  std::uint32_t index = 0;  // the declared variable
  bool hostnames = false;
  std::unordered_map<std::string, MapValue, StringHash, std::equal_to<>> exact;
  struct Wildcard {
    std::string name;  // ".example.com" (a suffix) or "www.example." (a prefix)
    bool suffix;
    MapValue value;
  };
  std::vector<Wildcard> wildcards;  // longest first
  struct RegexEntry {
    HttpRegex re;
    MapValue value;
  };
  std::vector<RegexEntry> regexes;
  MapValue fallback;  // default
  bool has_default = false;

  Status compile_values() {
    for (auto& [key, v] : exact) {
      if (Status s = compile_value(v); !s) return s;
    }
    for (Wildcard& w : wildcards) {
      if (Status s = compile_value(w.value); !s) return s;
    }
    for (RegexEntry& e : regexes) {
      if (Status s = compile_value(e.value); !s) return s;
    }
    return compile_value(fallback);
  }

  bool compute(Request& r, std::string_view& out) const override {
    const std::size_t n = source.length(r);
    // The source, and its lower-case form for the keys.
    char* mem = request_alloc(r, 2 * n + 2);
    if (mem == nullptr) return false;
    std::string_view src(mem, static_cast<std::size_t>(source.write(r, mem) - mem));
    char* low = mem + src.size() + 1;
    for (std::size_t i = 0; i < src.size(); ++i) low[i] = chars::to_lower(src[i]);
    std::string_view key(low, src.size());
    if (hostnames && key.ends_with(".")) key.remove_suffix(1);
    if (auto it = exact.find(key); it != exact.end()) return evaluate(r, it->second, out);
    if (hostnames) {
      for (const Wildcard& w : wildcards) {
        const bool hit = w.suffix ? (key.ends_with(w.name) ||
                                     (key.size() + 1 == w.name.size() && w.name.ends_with(key)))
                                  : key.starts_with(w.name);
        if (hit) return evaluate(r, w.value, out);
      }
    }
    for (const RegexEntry& e : regexes) {
      const int rc = match_with_captures(r, e.re, src);
      if (rc < 0) return false;
      if (rc > 0) return evaluate(r, e.value, out);
    }
    return evaluate(r, fallback, out);
  }

 private:
  static bool evaluate(Request& r, const MapValue& v, std::string_view& out) {
    if (v.vars == nullptr) {
      out = v.text;
      return true;
    }
    const std::size_t n = v.vars->length(r);
    char* mem = request_alloc(r, n + 1);
    if (mem == nullptr) return false;
    out = std::string_view(mem, static_cast<std::size_t>(v.vars->write(r, mem) - mem));
    return true;
  }
};

// The lines of a map block.
class MapSink : public StatementSink {
 public:
  MapSink(MapVariable& map, const ConfEnv& env) : map_(map), env_(env) {}

  Status on_statement(ConfParser& parser, const ConfStatement& st) override {
    const std::string where = parser.origin().where(st.words[0].line);
    if (st.end != ConfTerminator::kSemicolon) return Status::error("unexpected \"{\"" + where);
    const std::string& key = st.words[0].text;
    if (st.words.size() == 1 && key == "hostnames") {
      map_.hostnames = true;
      return Status::ok();
    }
    if (st.words.size() == 1 && key == "volatile") {
      map_.volatile_value = true;
      return Status::ok();
    }
    if (st.words.size() != 2) return Status::error("invalid number of the map parameters" + where);
    if (key == "include") {
      // The file's lines are the block's (relative to the configuration's
      // directory, as every include).
      return parser.parse_file(env_.conf_prefixed(st.words[1].text), *this, where);
    }
    // An expression first: its named groups are variables its value may use.
    std::optional<HttpRegex> re;
    if (key.size() > 1 && key[0] == '~') {
      const bool caseless = key.size() > 2 && key[1] == '*';
      auto compiled = compile_http_regex(std::string_view(key).substr(caseless ? 2 : 1), caseless);
      if (!compiled) return Status::error(compiled.status().message() + where);
      re = std::move(compiled.value());
    }
    MapValue value = pending_value(st.words[1].text, where);
    if (re) {
      map_.regexes.push_back({std::move(*re), std::move(value)});
      return Status::ok();
    }
    if (key == "default") {
      if (map_.has_default) return Status::error("duplicate default map parameter" + where);
      map_.fallback = std::move(value);
      map_.has_default = true;
      return Status::ok();
    }
    // A key starting with '\' is taken as it is after it ("\~x", "\default").
    std::string k = lower(key.size() > 1 && key[0] == '\\' ? std::string_view(key).substr(1)
                                                           : std::string_view(key));
    if (map_.hostnames && (k.starts_with("*.") || k.starts_with(".") || k.ends_with(".*"))) {
      MapVariable::Wildcard w;
      w.suffix = !k.ends_with(".*");
      w.name = w.suffix ? k.substr(k[0] == '*' ? 1 : 0) : k.substr(0, k.size() - 1);
      w.value = std::move(value);
      map_.wildcards.push_back(std::move(w));
      return Status::ok();
    }
    if (map_.hostnames && k.ends_with(".")) k.pop_back();
    if (!map_.exact.emplace(std::move(k), std::move(value)).second) {
      return Status::error("conflicting parameter \"" + key + "\"" + where);
    }
    return Status::ok();
  }

 private:
  MapVariable& map_;
  const ConfEnv& env_;
};

// The maps of one http block, their values compiled when it is finished.
struct MapsConf {
  std::vector<std::shared_ptr<MapVariable>> maps;
};

Status set_map(const DirectiveCall& call, MapsConf& conf) {
  auto word = declared_variable_word(call.arg(1));
  if (!word) return call.error(word.status().message());
  const std::string& name = word.value();
  auto map = std::make_shared<MapVariable>();
  auto src = VarTemplate::compile(call.arg(0));
  if (!src) return call.error(src.status().message());
  map->source = std::move(src.value());
  const std::uint32_t index = declare_variable(name);
  MapSink sink(*map, call.env());
  if (Status s = call.parse_block(sink); !s) return s;
  std::stable_sort(map->wildcards.begin(), map->wildcards.end(),
                   [](const auto& a, const auto& b) { return a.name.size() > b.name.size(); });
  map->index = index;
  conf.maps.push_back(std::move(map));
  return Status::ok();
}

Status finish_maps(const ConfInit&, MapsConf& conf) {
  for (auto& map : conf.maps) {
    if (Status s = map->compile_values(); !s) return s;
  }
  for (auto& map : conf.maps) set_computed_variable(map->index, map);
  return Status::ok();
}

}  // namespace

const HttpModule& map_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_map");  // never destroyed: used until exit
    auto maps = m->conf().add_conf<MapsConf>(kHttpMainConf, finish_maps);
    m->conf().add_block("map", kHttpMainConf, Arity::exactly(2), 0, maps.custom(set_map)).multiple =
        true;
    return m;
  }();
  return *module;
}

}  // namespace vigil::http
