#include "stream/map.h"

#include <utility>

#include "core/conf/parser.h"
#include "stream/session.h"

namespace vigil::stream {
namespace {

// Groups of a map expression its value can name (group 0 included).
constexpr int kMaxGroups = 32;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) {
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  }
  return out;
}

// The lines of a map block.
class MapSink : public StatementSink {
 public:
  MapSink(StreamMap& map, const ConfEnv& env) : map_(map), env_(env) {}

  Status on_statement(ConfParser& parser, const ConfStatement& st) override {
    const std::string where = parser.origin().where(st.words[0].line);
    if (st.end != ConfTerminator::kSemicolon) return Status::error("unexpected \"{\"" + where);
    const std::string& key = st.words[0].text;
    // Every value is computed when read, so "volatile" changes nothing;
    // "hostnames" is not supported in stream (an error below, not ignored).
    if (st.words.size() == 1 && key == "volatile") return Status::ok();
    if (st.words.size() != 2) return Status::error("invalid number of the map parameters" + where);
    if (key == "include") return parser.parse_file(env_.conf_prefixed(st.words[1].text), *this, where);
    if (key.size() > 1 && key[0] == '~') {
      // Its value may use the expression's groups: $1..$9 and the named ones.
      const bool caseless = key.size() > 2 && key[1] == '*';
      auto re = Regex::compile(std::string_view(key).substr(caseless ? 2 : 1), caseless);
      if (!re) return Status::error(re.status().message() + where);
      auto text = VarTemplate::compile(st.words[1].text, &re.value().names());
      if (!text) return Status::error(text.status().message() + where);
      map_.regexes.push_back({std::move(re.value()), {std::move(text.value())}});
      return Status::ok();
    }
    auto text = VarTemplate::compile(st.words[1].text);
    if (!text) return Status::error(text.status().message() + where);
    StreamMap::Value value{std::move(text.value())};
    if (key == "default") {
      if (map_.fallback) return Status::error("duplicate default map parameter" + where);
      map_.fallback = std::move(value);
      return Status::ok();
    }
    // A key starting with '\' is taken as it is after it ("\~x", "\default").
    std::string k = lower(key.size() > 1 && key[0] == '\\' ? std::string_view(key).substr(1)
                                                           : std::string_view(key));
    if (!map_.exact.emplace(std::move(k), std::move(value)).second) {
      return Status::error("conflicting parameter \"" + key + "\"" + where);
    }
    return Status::ok();
  }

 private:
  StreamMap& map_;
  const ConfEnv& env_;
};

}  // namespace

bool StreamMap::put(const Session& s, const Value& v, VarSink& out) {
  if (v.text.is_literal()) {
    out.put(v.text.literal_text());
    return true;
  }
  // The same sink: the length pass counts, the write pass writes in place.
  char* at = out.at();
  if (at == nullptr) {
    out.advance(v.text.length(s));
  } else {
    out.advance(static_cast<std::size_t>(v.text.write(s, at) - at));
  }
  return true;
}

bool StreamMap::value(const Session& s, VarSink& out) const {
  std::string_view src;
  if (!source.evaluate(s, src)) return false;
  if (!exact.empty()) {
    // The keys are lower case; most sources are short.
    char stack[256];
    std::string heap;
    char* low = stack;
    if (src.size() > sizeof stack) {
      heap.resize(src.size());
      low = heap.data();
    }
    for (std::size_t i = 0; i < src.size(); ++i) {
      const char ch = src[i];
      low[i] = ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch;
    }
    if (auto it = exact.find(std::string_view(low, src.size())); it != exact.end()) {
      return put(s, it->second, out);
    }
  }
  for (const RegexEntry& e : regexes) {
    int offsets[2 * kMaxGroups];
    const int n = e.re.match(src, offsets, kMaxGroups);
    if (n <= 0) continue;  // no match (or a matching error: as none)
    // The groups while the value is evaluated (both passes see the same).
    const Captures captures{src, offsets, n};
    const Captures* outer = s.captures;
    s.captures = &captures;
    put(s, e.value, out);
    s.captures = outer;
    return true;
  }
  if (fallback) return put(s, *fallback, out);
  return true;  // no default: the empty string
}

Status set_map(const DirectiveCall& call) {
  auto word = declared_variable_word(call.arg(1));
  if (!word) return call.error(word.status().message());
  auto map = std::make_shared<StreamMap>();
  auto src = VarTemplate::compile(call.arg(0));
  if (!src) return call.error(src.status().message());
  map->source = std::move(src.value());
  MapSink sink(*map, call.env());
  if (Status s = call.parse_block(sink); !s) return s;
  declare_variable(word.value(), std::move(map));
  return Status::ok();
}

}  // namespace vigil::stream
