// Regular-expression matching as a location search does it: a URI tried
// against 50 expressions in order, the first 49 missing and the 50th
// matching (the shape of bench/load/regex_map_vs_nginx.sh). Reports the time
// per URI, i.e. for 49 misses and one match with its groups.
//
//   BM_LocationWalk/0   Regex::match, captures wanted only from the last
//   BM_LocationWalk/1   the same with captures wanted from every expression

#include <benchmark/benchmark.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/regex.h"

namespace {

std::vector<vigil::Regex> fifty() {
  const char* kinds[] = {
      "\\.php$", "\\.(css|js|png)$", "\\.(jpe?g|gif|webp|avif|ico)$", "\\.(woff2?|ttf|otf|eot)$",
      "\\.(bak|old|orig|swp)$", "/\\.(git|svn|hg)(/|$)", "^/(wp-admin|wp-login\\.php|xmlrpc\\.php)",
      "^/blog/([0-9]{4})/([0-9]{2})/([a-z0-9-]+)/?$", "^/user/([0-9]+)/avatar$",
      "^/download/(?<file>[^/]+)$", "^/search/(.*)$", "^/(en|fr|de|es|it|zh|ja)/",
      "^/img/(\\d+)x(\\d+)/(.+)$", "^/feed(/rss|/atom)?$"};
  std::vector<std::string> patterns(std::begin(kinds), std::end(kinds));
  for (const char* resource : {"users", "orders", "products", "carts", "invoices", "payments",
                               "sessions", "reviews", "categories", "coupons", "shipments",
                               "refunds", "notes", "tags", "teams", "files", "events", "plans"}) {
    patterns.push_back(std::string("^/api/v[0-9]+/") + resource + "/([0-9]+)$");
    patterns.push_back(std::string("^/api/v[0-9]+/") + resource + "/([0-9]+)/(history|items)$");
  }
  patterns.resize(49);
  patterns.push_back("^/p/([0-9]+)$");
  std::vector<vigil::Regex> out;
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    auto re = vigil::Regex::compile(patterns[i], /*caseless=*/i % 7 == 1);
    if (!re) {
      std::fprintf(stderr, "%s\n", re.status().message().c_str());
      std::abort();
    }
    out.push_back(std::move(re.value()));
  }
  return out;
}

void BM_LocationWalk(benchmark::State& state) {
  const std::vector<vigil::Regex> res = fifty();
  const bool all_captures = state.range(0) != 0;
  const std::array<std::string_view, 4> uris = {"/p/17", "/p/4999", "/p/9999", "/p/12345"};
  std::size_t k = 0;
  int caps[2 * 10];
  for (auto _ : state) {
    const std::string_view uri = uris[k++ % uris.size()];
    int found = -1;
    for (std::size_t i = 0; i < res.size(); ++i) {
      const int rc = all_captures || i + 1 == res.size() ? res[i].match(uri, caps, 10)
                                                         : (res[i].matches(uri) ? 1 : 0);
      if (rc > 0) {
        found = static_cast<int>(i);
        break;
      }
    }
    if (found != 49) state.SkipWithError("the 50th expression did not match");
    benchmark::DoNotOptimize(caps);
  }
}
BENCHMARK(BM_LocationWalk)->Arg(0)->Arg(1);

}  // namespace

BENCHMARK_MAIN();
