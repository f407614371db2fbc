#pragma once
// The parsers and checks behind auth_basic (auth_basic.cc), kept apart from
// the request so that they can be unit-tested and fuzzed: the credentials of
// an "Authorization: Basic" field, a streaming scan of an htpasswd file for
// one user's entry, and the check of a password against that entry's hash.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vigil::http {

// Decodes base64 (RFC 4648 §4; the padding may be left out, as nginx's
// decoder allows) from `in` into `out`, which holds at least
// in.size() / 4 * 3 + 2 bytes. Returns the decoded length, or -1 when `in`
// is not base64.
std::ptrdiff_t decode_base64(std::string_view in, char* out);
// Encodes `in` as base64 with padding into `out` (4 * ceil(n / 3) bytes).
std::size_t encode_base64(std::string_view in, char* out);

// The user and password of an Authorization field value "Basic <base64 of
// user:password>" (the scheme case-insensitive, spaces after it skipped), as
// nginx's ngx_http_auth_basic_user: decoded into `buf` (at least
// value.size() bytes). False when the value is not such credentials (another
// scheme, bad base64, no ':').
bool parse_basic_credentials(std::string_view value, char* buf, std::string_view& user,
                             std::string_view& password);

// Finds the entry of one user in an htpasswd file fed in pieces of any size,
// keeping nothing but the entry's hash (at most kMaxHash bytes): lines of
// "user:hash", '#' at the start of a line makes it a comment, blank lines
// and CR are ignored, a field after the hash (":comment") is not part of it,
// and the first entry for the user decides.
class HtpasswdScanner {
 public:
  static constexpr std::size_t kMaxHash = 512;

  explicit HtpasswdScanner(std::string_view user) : user_(user) {}

  // Scans the next piece of the file; true once the user's entry is complete
  // (hash()), after which further pieces are ignored.
  bool feed(const char* p, std::size_t n);
  // The end of the file: true when it ends inside the user's entry (a last
  // line without a newline), or the entry was already found.
  bool finish();

  std::string_view hash() const { return {hash_, hash_len_}; }
  // The entry's hash was longer than kMaxHash: it matches no password.
  bool too_long() const { return too_long_; }

 private:
  enum class State : std::uint8_t { kLogin, kHash, kSkip, kFound };
  std::string_view user_;
  State state_ = State::kLogin;
  std::size_t login_ = 0;
  std::size_t hash_len_ = 0;
  bool too_long_ = false;
  char hash_[kMaxHash];
};

// Checks `password` against an htpasswd hash: "{PLAIN}text", "{SHA}" (base64
// of SHA-1), "{SSHA}" (base64 of SHA-1 of password + salt, then the salt),
// "$apr1$" (Apache's MD5), else crypt(3) (DES, $1$, $5$, $6$, $2b$/$2y$).
// Comparisons take the same time whatever bytes differ.
enum class PasswordCheck : std::uint8_t { kMatch, kMismatch, kError };
PasswordCheck check_password(std::string_view password, std::string_view hash);

// Apache's MD5 crypt ("$apr1$salt$hash") of `password` with the salt of
// `setting` (up to 8 bytes after "$apr1$", to a '$'), written to `out`
// (kApr1Max bytes); returns its length, 0 when MD5 is not available.
inline constexpr std::size_t kApr1Max = 6 + 8 + 1 + 22;
std::size_t apr1_crypt(std::string_view password, std::string_view setting, char* out);

}  // namespace vigil::http
