// gzip of a whole body: zlib (as the gzip filter streams it: the window and
// memory level nginx chooses for the length, 4 KiB output pieces) against
// libdeflate (one libdeflate_gzip_compress call with a compressor kept
// across calls, as the filter's whole-body path), on an HTML page shaped as
// bench/load/gzip_vs_nginx.sh's (table rows of numbers and words), cut to
// each size:
//
//   BM_Zlib/<level>/<bytes>        BM_Libdeflate/<level>/<bytes>
//
// The "out" counter is the compressed size. The filter's thresholds
// (kWholeMin in src/http/gzip/gzip.cc) come from these figures.
//
//   build/release/bench_deflate_bench --benchmark_min_time=0.2

#include <benchmark/benchmark.h>
#include <libdeflate.h>
#include <zlib.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

const std::string& page() {
  static const std::string p = [] {
    static const char* const kWords[] = {"lorem", "ipsum", "dolor",      "sit",        "amet",
                                         "consectetur", "adipiscing", "elit", "sed", "do",
                                         "eiusmod", "tempor"};
    std::mt19937 rng(7);
    std::string s = "<!DOCTYPE html>\n<html><head><title>bench</title></head><body><table>\n";
    char row[256];
    for (int i = 0; s.size() < 131072; ++i) {
      std::string words;
      for (int k = 0; k < 6; ++k) {
        if (k > 0) words += ' ';
        words += kWords[rng() % 12];
      }
      std::snprintf(row, sizeof row, "<tr class=\"r%d\"><td>%u</td><td>%s</td><td>%.3f</td></tr>\n",
                    i % 7, static_cast<unsigned>(rng() % 1000000), words.c_str(),
                    static_cast<double>(rng() % 1000000) / 1000.0);
      s += row;
    }
    return s;
  }();
  return p;
}

void BM_Zlib(benchmark::State& state) {
  const int level = static_cast<int>(state.range(0));
  const auto n = static_cast<std::size_t>(state.range(1));
  int wbits = MAX_WBITS;
  int memlevel = MAX_MEM_LEVEL - 1;
  while (static_cast<long long>(n) < (1LL << (wbits - 1)) - 262) {
    --wbits;
    --memlevel;
  }
  if (memlevel < 1) memlevel = 1;
  unsigned char out[4096];
  std::size_t made = 0;
  for (auto _ : state) {
    z_stream zs{};
    if (deflateInit2(&zs, level, Z_DEFLATED, wbits + 16, memlevel, Z_DEFAULT_STRATEGY) != Z_OK) {
      state.SkipWithError("deflateInit2");
      return;
    }
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(page().data()));
    zs.avail_in = static_cast<uInt>(n);
    made = 0;
    int rc;
    do {
      zs.next_out = out;
      zs.avail_out = sizeof out;
      rc = deflate(&zs, Z_FINISH);
      made += sizeof out - zs.avail_out;
    } while (rc == Z_OK || rc == Z_BUF_ERROR);
    deflateEnd(&zs);
    benchmark::DoNotOptimize(out);
  }
  state.counters["out"] = static_cast<double>(made);
}

void BM_Libdeflate(benchmark::State& state) {
  const int level = static_cast<int>(state.range(0));
  const auto n = static_cast<std::size_t>(state.range(1));
  libdeflate_compressor* c = libdeflate_alloc_compressor(level);
  if (c == nullptr) {
    state.SkipWithError("libdeflate_alloc_compressor");
    return;
  }
  std::vector<char> out(libdeflate_gzip_compress_bound(c, n));
  std::size_t made = 0;
  for (auto _ : state) {
    made = libdeflate_gzip_compress(c, page().data(), n, out.data(), out.size());
    benchmark::DoNotOptimize(out.data());
  }
  libdeflate_free_compressor(c);
  state.counters["out"] = static_cast<double>(made);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int level = 1; level <= 9; ++level) {
    for (int n : {2048, 8192, 16384, 102400}) b->Args({level, n});
  }
}

BENCHMARK(BM_Zlib)->Apply(sizes);
BENCHMARK(BM_Libdeflate)->Apply(sizes);

}  // namespace

BENCHMARK_MAIN();
