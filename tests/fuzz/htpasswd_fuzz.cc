// Feeds arbitrary bytes to auth_basic's parsers of untrusted input
// (htpasswd.cc): the Authorization field's Basic credentials and base64, and
// the streaming htpasswd scan. The first byte picks the user name's length
// and the piece size the file is fed in; whatever the pieces, the scan must
// find the same entry as one that sees the file whole, and an entry found
// must be bounded and free of line ends. Decoded credentials must split at
// their first ':' and re-encode to what was decoded.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "http/access/htpasswd.h"

using vigil::fuzz::check;
using vigil::http::HtpasswdScanner;

namespace {

bool scan(std::string_view user, std::string_view file, std::size_t piece, std::string& hash,
          bool& too_long) {
  HtpasswdScanner s(user);
  bool found = false;
  for (std::size_t at = 0; at < file.size() && !found; at += piece) {
    found = s.feed(file.data() + at, std::min(piece, file.size() - at));
  }
  if (!found) found = s.finish();
  hash = std::string(s.hash());
  too_long = s.too_long();
  return found;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::size_t user_len = std::min<std::size_t>(data[0] & 0x0f, all.size());
  const std::size_t piece = 1 + (data[0] >> 4);
  const std::string_view user = all.substr(0, user_len);
  const std::string_view file = all.substr(user_len);

  std::string whole_hash, piece_hash;
  bool whole_long = false, piece_long = false;
  const bool whole = scan(user, file, file.size() + 1, whole_hash, whole_long);
  const bool pieces = scan(user, file, piece, piece_hash, piece_long);
  check(whole == pieces, "the pieces a file comes in do not change what is found");
  if (whole) {
    check(whole_hash == piece_hash && whole_long == piece_long, "the same entry either way");
    check(whole_hash.size() <= HtpasswdScanner::kMaxHash, "the hash is bounded");
    check(whole_hash.find_first_of("\r\n:") == std::string::npos, "the hash is one field");
  }

  // The whole input as an Authorization value.
  std::vector<char> buf(all.size() + 1);
  std::string_view u, p;
  if (vigil::http::parse_basic_credentials(all, buf.data(), u, p)) {
    check(u.find(':') == std::string_view::npos, "the user ends at the first ':'");
    check(u.size() + 1 + p.size() <= all.size(), "decoding shrinks");
  }
  const std::ptrdiff_t n = vigil::http::decode_base64(all, buf.data());
  if (n >= 0) {
    std::vector<char> enc(4 * (static_cast<std::size_t>(n) / 3 + 1));
    const std::size_t m = vigil::http::encode_base64(
        std::string_view(buf.data(), static_cast<std::size_t>(n)), enc.data());
    std::vector<char> again(m + 3);
    const std::ptrdiff_t n2 = vigil::http::decode_base64({enc.data(), m}, again.data());
    check(n2 == n && std::memcmp(again.data(), buf.data(), static_cast<std::size_t>(n)) == 0,
          "base64 round-trips");
  }
  return 0;
}
