#pragma once
// The block of geo (http's and stream's, nginx's ngx_http_geo_module and
// ngx_stream_geo_module), read into a GeoTable (geo_table.h):
//
//   geo [$address] $variable {
//     [ranges;] default value;  include file;  delete network;
//     network value;            (CIDR: 192.0.2.0/24, 2001:db8::/32, 10.0.0.1)
//     a.b.c.d-e.f.g.h value;    (with ranges)
//     [proxy address[/prefix];] [proxy_recursive;]   (http only)
//   }
//
// and the lookup of an address in the table: an address that is neither
// IPv4 nor IPv6 (a unix-domain client, a value that is no address) is looked
// up as 255.255.255.255, an IPv4-mapped IPv6 address as its IPv4 address,
// and with ranges an IPv6 address as 255.255.255.255 too.

#include <sys/socket.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/access_rule.h"
#include "core/conf/parser.h"
#include "core/conf/scope.h"
#include "core/geo_table.h"

namespace vigil {

struct GeoBlock {
  GeoTable table;  // built when the block has been read
  bool ranges = false;
  std::vector<AccessRule> proxies;  // `proxy` (http only)
  bool proxy_recursive = false;
};

// Reads the block's lines into `geo` (parse_block, then finish()).
class GeoBlockSink : public StatementSink {
 public:
  GeoBlockSink(GeoBlock& geo, const ConfEnv& env, bool allow_proxy)
      : geo_(geo), env_(env), allow_proxy_(allow_proxy) {}
  Status on_statement(ConfParser& parser, const ConfStatement& st) override;
  // Builds the table once the block is read.
  void finish() { geo_.table = builder_.build(); }

 private:
  Status add_proxy(const std::string& text, const std::string& where);

  GeoBuilder builder_;
  GeoBlock& geo_;
  const ConfEnv& env_;
  bool allow_proxy_;
};

// `text` as an IPv4 or IPv6 address; false for anything else.
bool parse_geo_address(std::string_view text, sockaddr_storage& addr);
// The value of `addr` (of any family: see above).
std::string_view geo_lookup(const GeoBlock& geo, const sockaddr* addr);

}  // namespace vigil
