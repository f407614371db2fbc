#include "http/core/request_vars.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "codec/chars.h"
#include "http/core/request.h"
#include "http/core/worker.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

constexpr std::size_t kChunk = 4096;

// Declared names, by index. Written only while a configuration loads (one
// thread), read by the workers afterwards.
std::vector<std::string>& declared() {
  static auto* names = new std::vector<std::string>();  // never destroyed: used until exit
  return *names;
}

std::vector<std::shared_ptr<const ComputedVariable>>& computed() {
  static auto* vars = new std::vector<std::shared_ptr<const ComputedVariable>>();  // until exit
  return *vars;
}

}  // namespace

void set_computed_variable(std::uint32_t index, std::shared_ptr<const ComputedVariable> var) {
  auto& vars = computed();
  if (vars.size() <= index) vars.resize(index + 1);
  vars[index] = std::move(var);
}

bool read_declared_variable(const Request& r, std::uint32_t index, std::string_view& out) {
  const VarValue v = user_variable(r, index);
  if (v.set) {
    out = std::string_view(v.data, v.len);
    return true;
  }
  const auto& vars = computed();
  if (index >= vars.size() || vars[index] == nullptr) return false;
  // A map whose source leads back to itself would not end: nginx's cycle check.
  thread_local int depth = 0;
  if (depth > 32) return false;
  ++depth;
  // Computing a value keeps it in the request: the request is the caller's
  // own, reached through templates that only read it.
  Request& mr = const_cast<Request&>(r);
  const bool ok = vars[index]->compute(mr, out);
  --depth;
  if (!ok) return false;
  if (!vars[index]->volatile_value) (void)set_user_variable(mr, index, out);
  return true;
}

char* request_alloc(Request& r, std::size_t n) {
  RequestVars& v = r.vars;
  n = (n + alignof(void*) - 1) & ~(alignof(void*) - 1);
  if (v.nchunks > 0 && v.chunk_size[v.nchunks - 1] - v.used >= n) {
    char* p = v.chunk[v.nchunks - 1] + v.used;
    v.used += static_cast<std::uint32_t>(n);
    return p;
  }
  if (v.nchunks == RequestVars::kMaxChunks || n > UINT32_MAX - kChunk) return nullptr;
  const std::size_t size = (n + kChunk - 1) / kChunk * kChunk;
  char* mem = r.hc->worker->buffers().get(size);
  if (mem == nullptr) return nullptr;
  v.chunk[v.nchunks] = mem;
  v.chunk_size[v.nchunks] = static_cast<std::uint32_t>(size);
  ++v.nchunks;
  v.used = static_cast<std::uint32_t>(n);
  return mem;
}

void release_request_vars(Request& r) {
  RequestVars& v = r.vars;
  BufferCache& cache = r.hc->worker->buffers();
  for (std::uint32_t i = 0; i < v.nchunks; ++i) cache.put(v.chunk[i], v.chunk_size[i]);
  v = RequestVars{};
}

std::uint32_t declare_variable(std::string_view name) {
  auto& names = declared();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<std::uint32_t>(i);
  }
  names.emplace_back(name);
  return static_cast<std::uint32_t>(names.size() - 1);
}

int find_declared_variable(std::string_view name) {
  const auto& names = declared();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  return -1;
}

std::string_view declared_variable_name(std::uint32_t index) {
  const auto& names = declared();
  return index < names.size() ? std::string_view(names[index]) : std::string_view();
}

VarValue user_variable(const Request& r, std::uint32_t index) {
  if (index >= r.vars.nvalues) return {};
  return r.vars.values[index];
}

bool set_user_variable(Request& r, std::uint32_t index, std::string_view value) {
  RequestVars& v = r.vars;
  if (index >= v.nvalues) {
    const std::size_t n = std::max<std::size_t>(declared().size(), index + 1);
    auto* fresh = reinterpret_cast<VarValue*>(request_alloc(r, n * sizeof(VarValue)));
    if (fresh == nullptr) return false;
    for (std::size_t i = 0; i < n; ++i) fresh[i] = i < v.nvalues ? v.values[i] : VarValue{};
    v.values = fresh;
    v.nvalues = static_cast<std::uint32_t>(n);
  }
  v.values[index] = VarValue{value.data(), static_cast<std::uint32_t>(value.size()), true};
  return true;
}

Result<HttpRegex> compile_http_regex(std::string_view pattern, bool caseless) {
  auto re = Regex::compile(pattern, caseless);
  if (!re) return re.status();
  HttpRegex out;
  out.re = std::move(re.value());
  for (const Regex::Name& n : out.re.names()) {
    std::string lname;
    for (char ch : n.name) lname += chars::to_lower(ch);
    out.names.push_back(declare_variable(lname));
  }
  return out;
}

int match_with_captures(Request& r, const HttpRegex& hre, std::string_view subject) {
  const Regex& re = hre.re;
  int caps[2 * kMaxCaptures];
  const int n = re.match(subject, caps, kMaxCaptures);
  if (n < 0) {
    VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu pcre2_match() failed on \"%.*s\" using \"%s\"",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(subject.size()),
              subject.data(), re.pattern().c_str());
    return -1;
  }
  if (n == 0) return 0;
  if (re.groups() == 0 && hre.names.empty()) return 1;
  // The groups point into a copy: the subject (the URI, a header) may be
  // rewritten while $1 is still to be used.
  char* copy = request_alloc(r, subject.size() + 1);
  if (copy == nullptr) return -1;
  if (!subject.empty()) std::memcpy(copy, subject.data(), subject.size());
  RequestVars& v = r.vars;
  std::memcpy(v.captures, caps, sizeof(int) * 2 * static_cast<std::size_t>(n));
  v.ncaptures = n;
  v.capture_subject = copy;
  // Named groups past $9 are matched again with room for every group.
  const auto& names = re.names();
  for (std::size_t i = 0; i < names.size() && i < hre.names.size(); ++i) {
    const int g = names[i].group;
    std::string_view value;
    if (g < n) {
      if (caps[2 * g] >= 0) value = std::string_view(copy + caps[2 * g], caps[2 * g + 1] - caps[2 * g]);
    } else {
      int all[2 * 256];
      if (g >= 256 || re.match(subject, all, g + 1) <= g || all[2 * g] < 0) continue;
      value = std::string_view(copy + all[2 * g], all[2 * g + 1] - all[2 * g]);
    }
    if (!set_user_variable(r, hre.names[i], value)) return -1;
  }
  return 1;
}

bool capture(const Request& r, int n, std::string_view& out) {
  const RequestVars& v = r.vars;
  if (n < 0 || n >= v.ncaptures || v.capture_subject == nullptr) return false;
  const int a = v.captures[2 * n];
  const int b = v.captures[2 * n + 1];
  if (a < 0 || b < a) {
    out = {};
    return true;  // a group that took no part: empty, as nginx
  }
  out = std::string_view(v.capture_subject + a, static_cast<std::size_t>(b - a));
  return true;
}

}  // namespace vigil::http
