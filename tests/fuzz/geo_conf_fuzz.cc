// The geo block's parser: the input is the inside of a geo block (its
// entries, ranges/proxy lines and all), loaded in a whole configuration, in
// CIDR mode and in ranges mode. Each line is also parsed as a network and as
// a range, and what parses is checked for consistency: a network's address
// has no bits past its prefix, a range starts no later than it ends, and a
// table built from it finds the value at both ends. Nothing may crash.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/conf/loader.h"
#include "core/geo_table.h"
#include "fuzz_check.h"
#include "server/modules.h"
#include "upstream/group.h"

using vigil::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  vigil::upstream::set_numeric_hosts_only(true);
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  std::string_view rest = text;
  while (!rest.empty()) {
    const std::size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    vigil::GeoNet net;
    bool warn = false;
    if (vigil::parse_geo_net(line, net, warn)) {
      const unsigned max = net.v6 ? 128 : 32;
      check(net.prefix <= max, "prefix within the family");
      const vigil::GeoU128 host =
          net.prefix == max ? 0 : (~vigil::GeoU128{0} >> (128 - (max - net.prefix)));
      check((net.addr & host) == 0, "no address bits past the prefix");
      vigil::GeoBuilder b;
      std::string old;
      check(b.add_net(net, "x", old), "a first network is new");
      const vigil::GeoTable t = b.build();
      if (net.v6) {
        check(t.lookup_v6(net.addr) == "x" && t.lookup_v6(net.addr | host) == "x",
              "both ends of the network found");
      } else {
        const auto lo = static_cast<std::uint32_t>(net.addr);
        const auto hi = static_cast<std::uint32_t>(net.addr | host);
        check(t.lookup_v4(lo) == "x" && t.lookup_v4(hi) == "x", "both ends of the network found");
      }
    }
    std::uint32_t s = 0;
    std::uint32_t e = 0;
    if (vigil::parse_geo_range(line, s, e)) {
      check(s <= e, "a range starts no later than it ends");
      vigil::GeoBuilder b(true);
      b.add_range(s, e, "r");
      const vigil::GeoTable t = b.build();
      check(t.lookup_v4(s) == "r" && t.lookup_v4(e) == "r", "both ends of the range found");
    }
  }

  if (text.find('\0') != std::string_view::npos) return 0;
  for (const char* mode : {"", "ranges;\n"}) {
    const std::string conf = "events {}\nhttp {\n geo $arg_ip $g {\n" + std::string(mode) +
                             std::string(text) +
                             "\n }\n server {\n  listen 127.0.0.1:1;\n  return 200 $g;\n }\n}\n";
    vigil::ConfLoadOptions options;
    options.modules = &vigil::server_conf_modules();
    options.prefix = "/nonexistent-vigil-fuzz-prefix";
    options.allow_include = false;
    options.embedded_text = conf;
    auto loaded = vigil::Configuration::load(options);
    if (!loaded) check(!loaded.status().message().empty(), "error without message");
  }
  return 0;
}
