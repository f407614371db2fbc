#pragma once
// The block of split_clients (http's and stream's, nginx's
// ngx_http_split_clients_module and ngx_stream_split_clients_module):
//
//   split_clients "${remote_addr}AAA" $variant { 0.5% .one; 2.0% .two; * ""; }
//
// The source is hashed with MurmurHash2; the 32-bit hash space is cut into
// parts in order, each the given share of it ("*": the rest), and the
// variable is the value of the part the hash falls in (empty past the last
// part when the shares do not add up to 100%).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/conf/parser.h"

namespace vigil {

// MurmurHash2 with seed 0, the hash split_clients spreads sources by (so
// the same source lands in the same part as with nginx).
std::uint32_t murmur_hash2(const unsigned char* data, std::size_t len);

struct SplitPart {
  std::uint32_t upto = 0;  // the part holds hashes below this; 0 with `rest`
  bool rest = false;       // "*"
  std::string value;
};

// The value of the part `hash` falls in (empty past the last part).
std::string_view split_value(const std::vector<SplitPart>& parts, std::uint32_t hash);

// Reads the block's lines into `parts`.
class SplitClientsSink : public StatementSink {
 public:
  explicit SplitClientsSink(std::vector<SplitPart>& parts) : parts_(parts) {}
  Status on_statement(ConfParser& parser, const ConfStatement& st) override;

 private:
  std::vector<SplitPart>& parts_;
  long sum_ = 0;  // hundredths of a percent so far
};

}  // namespace vigil
