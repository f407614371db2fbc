// Feeds arbitrary bytes to ssl_preread's ClientHello parser
// (stream/client_hello.cc). The first byte picks where the input is cut
// into pieces; the rest is what the client sent. Invariants: the names it
// keeps lie inside the memory it was given; fed whole, cut in two, or a
// byte at a time, it reaches the same result and the same names; more
// bytes after a result change nothing; an ALPN list has no empty entry.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "stream/client_hello.h"

using vigil::fuzz::check;
using vigil::stream::ClientHelloParser;

namespace {

struct Outcome {
  ClientHelloParser::Result result;
  std::uint16_t version;
  std::string_view host;
  std::string_view alpn;
};

Outcome run(const std::uint8_t* data, std::size_t size, std::size_t step, std::vector<char>& out) {
  ClientHelloParser p(out.data(), out.size());
  ClientHelloParser::Result r = ClientHelloParser::Result::kAgain;
  for (std::size_t i = 0; i < size; i += step) {
    const std::size_t n = step < size - i ? step : size - i;
    const ClientHelloParser::Result now = p.feed(data + i, n);
    if (r != ClientHelloParser::Result::kAgain) check(now == r, "a result is final");
    r = now;
  }
  check(r == p.result(), "result() is what feed() said");
  const std::string_view host = p.server_name();
  const std::string_view alpn = p.alpn_protocols();
  check(host.empty() ||
            (host.data() >= out.data() && host.data() + host.size() <= out.data() + out.size()),
        "the server name lies in the memory given");
  check(alpn.empty() ||
            (alpn.data() >= out.data() && alpn.data() + alpn.size() <= out.data() + out.size()),
        "the ALPN list lies in the memory given");
  return {r, p.version(), host, alpn};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t cut = data[0];
  ++data;
  --size;
  // Memory as large as the input (what the preread phase gives), and less.
  std::vector<char> whole_out(size);
  std::vector<char> split_out(size);
  std::vector<char> byte_out(size);
  const Outcome whole = run(data, size, size == 0 ? 1 : size, whole_out);
  const Outcome split = run(data, size, cut + 1, split_out);
  const Outcome bytes = run(data, size, 1, byte_out);
  for (const Outcome* o : {&split, &bytes}) {
    check(o->result == whole.result, "the same result however the input is cut");
    if (whole.result != ClientHelloParser::Result::kDone) continue;
    check(o->version == whole.version, "the same version");
    check(o->host == whole.host, "the same server name");
    check(o->alpn == whole.alpn, "the same ALPN list");
  }
  if (whole.result == ClientHelloParser::Result::kDone) {
    const std::string_view a = whole.alpn;
    check(a.empty() || (a.front() != ',' && a.back() != ','), "no empty ALPN entry at an end");
    check(whole.host.size() + whole.alpn.size() <= size, "what is kept came from the input");
  }
  // Memory smaller than what the names need: a refusal, never more bytes.
  if (size > 1) {
    std::vector<char> small(size / 2);
    const Outcome s = run(data, size, size, small);
    check(s.result != ClientHelloParser::Result::kDone ||
              (s.host == whole.host && s.alpn == whole.alpn),
          "small memory gives the same names or none");
  }
  return 0;
}
