#include "core/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

namespace vigil {

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;  // JIT-compiled: matched with pcre2_jit_match, pcre2_match's fast path
  ~Code() { pcre2_code_free(code); }
};

namespace {

// The calling thread's match data: one block, grown when an expression with
// more groups than any before it matches (configuration sizes, so in
// practice once), never per match.
struct MatchData {
  pcre2_match_data* data = nullptr;
  std::uint32_t pairs = 0;
  ~MatchData() { pcre2_match_data_free(data); }

  pcre2_match_data* get(std::uint32_t need) {
    if (data != nullptr && pairs >= need) return data;
    const std::uint32_t n = std::max<std::uint32_t>(need, 16);
    pcre2_match_data* fresh = pcre2_match_data_create(n, nullptr);
    if (fresh == nullptr) return nullptr;
    pcre2_match_data_free(data);
    data = fresh;
    pairs = n;
    return data;
  }
};

thread_local MatchData thread_match_data;

std::string error_text(int code) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(code, buf, sizeof buf);
  if (n < 0) return "error " + std::to_string(code);
  return std::string(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(n));
}

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c; }

bool is_alnum(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// Whether the expression has a "|" outside every group: then its leading
// "^" binds only the first alternative. Classes are skipped to their first
// "]" (a class that PCRE2 reads as longer leaves more text outside, which
// only makes the answer "yes" more often).
bool top_level_alternative(std::string_view p) {
  int depth = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      ++i;
    } else if (c == '[') {
      for (++i; i < p.size() && p[i] != ']'; ++i) {
        if (p[i] == '\\') ++i;
      }
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      if (depth > 0) --depth;
    } else if (c == '|' && depth == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string Regex::literal_prefix(std::string_view p) {
  if (!p.starts_with('^') || top_level_alternative(p) || p.find("\\Q") != std::string_view::npos ||
      p.find('#') != std::string_view::npos) {  // a (?# ) or (?x) comment may hold "(" or ")"
    return {};
  }
  std::string out;
  std::size_t i = 1;
  while (i < p.size()) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size() && !is_alnum(p[i + 1]) &&
        static_cast<unsigned char>(p[i + 1]) < 0x80) {
      out += p[i + 1];  // an escaped punctuation character is itself
      i += 2;
    } else if (is_alnum(c) || std::string_view("/-_~%,:;=@!&'\"<>").find(c) != std::string_view::npos) {
      out += c;
      ++i;
    } else {
      break;
    }
  }
  // A quantifier after the last one makes it optional or repeated.
  if (i < p.size() && !out.empty() && std::string_view("?*+{").find(p[i]) != std::string_view::npos) {
    out.pop_back();
  }
  return out;
}

Result<Regex> Regex::compile(std::string_view pattern, bool caseless) {
  int err = 0;
  PCRE2_SIZE at = 0;
  const std::uint32_t options = caseless ? PCRE2_CASELESS : 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &err, &at, nullptr);
  if (code == nullptr) {
    const std::string_view rest = pattern.substr(std::min<std::size_t>(at, pattern.size()));
    return Status::error("pcre2_compile() failed: " + error_text(err) + " in \"" +
                         std::string(pattern) + "\" at \"" + std::string(rest) + "\"");
  }
  auto owned = std::make_shared<Code>();
  owned->code = code;
  // JIT where the library and the CPU have it; the interpreter otherwise
  // (the same results, slower), as nginx's pcre_jit.
  owned->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;

  Regex re;
  std::uint32_t groups = 0;
  if (pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &groups) != 0) {
    return Status::error("pcre2_pattern_info() failed for \"" + std::string(pattern) + "\"");
  }
  std::uint32_t names = 0;
  std::uint32_t entry = 0;
  PCRE2_SPTR table = nullptr;
  if (pcre2_pattern_info(code, PCRE2_INFO_NAMECOUNT, &names) != 0 ||
      pcre2_pattern_info(code, PCRE2_INFO_NAMEENTRYSIZE, &entry) != 0 ||
      pcre2_pattern_info(code, PCRE2_INFO_NAMETABLE, &table) != 0) {
    return Status::error("pcre2_pattern_info() failed for \"" + std::string(pattern) + "\"");
  }
  for (std::uint32_t i = 0; i < names; ++i) {
    // Each entry: the group's number in two bytes, most significant first,
    // then its name ending with a zero.
    const PCRE2_SPTR e = table + static_cast<std::size_t>(i) * entry;
    Name n;
    n.group = (e[0] << 8) | e[1];
    n.name = reinterpret_cast<const char*>(e + 2);
    re.names_.push_back(std::move(n));
  }
  std::size_t min_length = 0;
  std::uint32_t min32 = 0;
  if (pcre2_pattern_info(code, PCRE2_INFO_MINLENGTH, &min32) == 0) min_length = min32;
  re.min_length_ = min_length;
  re.prefix_ = literal_prefix(pattern);
  if (caseless) {
    for (char& c : re.prefix_) c = ascii_lower(c);
  }
  re.code_ = std::move(owned);
  re.pattern_ = std::string(pattern);
  re.groups_ = static_cast<int>(groups);
  re.caseless_ = caseless;
  return re;
}

int Regex::match(std::string_view subject, int* captures, int pairs) const {
  if (code_ == nullptr) return -1;
  if (subject.size() < min_length_ || subject.size() < prefix_.size()) return 0;
  if (!prefix_.empty()) {
    for (std::size_t i = 0; i < prefix_.size(); ++i) {
      const char c = caseless_ ? ascii_lower(subject[i]) : subject[i];
      if (c != prefix_[i]) return 0;
    }
  }
  pcre2_match_data* md = thread_match_data.get(static_cast<std::uint32_t>(groups_) + 1);
  if (md == nullptr) return -1;
  // pcre2_jit_match skips pcre2_match's checks of the arguments, which hold
  // here (a compiled expression, no options), and its dispatch to the JIT
  // code: a location search may try dozens of expressions per request.
  // An empty view may have no data at all (an unset variable's value):
  // pcre2_jit_match takes a null subject for an error where pcre2_match
  // matches it as "", so the empty subject is given a place.
  static constexpr char kEmpty[1] = "";
  const auto* text =
      reinterpret_cast<PCRE2_SPTR>(subject.data() != nullptr ? subject.data() : kEmpty);
  const int rc = code_->jit ? pcre2_jit_match(code_->code, text, subject.size(), 0, 0, md, nullptr)
                            : pcre2_match(code_->code, text, subject.size(), 0, 0, md, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return 0;
  if (rc < 0) return -1;
  if (pairs <= 0) return 1;
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  // rc counts the pairs up to the highest group that took part; the groups
  // after it, up to the expression's count, are unset.
  const int filled = std::min(pairs, groups_ + 1);
  for (int i = 0; i < filled; ++i) {
    if (i < rc && ov[2 * i] != PCRE2_UNSET) {
      captures[2 * i] = static_cast<int>(ov[2 * i]);
      captures[2 * i + 1] = static_cast<int>(ov[2 * i + 1]);
    } else {
      captures[2 * i] = -1;
      captures[2 * i + 1] = -1;
    }
  }
  return filled;
}

}  // namespace vigil
