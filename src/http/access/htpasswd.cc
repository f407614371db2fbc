// htpasswd files and Basic credentials (htpasswd.h).
#include "http/access/htpasswd.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cstring>
#include <memory>

namespace vigil::http {
namespace {

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

// Equal lengths and equal bytes, in a time that does not depend on where
// the bytes differ (the length is not a secret worth hiding: a hash's is fixed).
bool same_bytes(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

// One digest over up to four pieces.
bool digest(EVP_MD_CTX* ctx, const EVP_MD* md, std::initializer_list<std::string_view> parts,
            unsigned char* out) {
  if (EVP_DigestInit_ex(ctx, md, nullptr) != 1) return false;
  for (std::string_view p : parts) {
    if (!p.empty() && EVP_DigestUpdate(ctx, p.data(), p.size()) != 1) return false;
  }
  unsigned int n = 0;
  return EVP_DigestFinal_ex(ctx, out, &n) == 1;
}

PasswordCheck check_sha(std::string_view password, std::string_view b64) {
  MdCtx ctx(EVP_MD_CTX_new());
  unsigned char sum[20];
  if (!ctx || !digest(ctx.get(), EVP_sha1(), {password}, sum)) return PasswordCheck::kError;
  char text[28];
  const std::size_t n =
      encode_base64(std::string_view(reinterpret_cast<const char*>(sum), sizeof sum), text);
  return same_bytes({text, n}, b64) ? PasswordCheck::kMatch : PasswordCheck::kMismatch;
}

PasswordCheck check_ssha(std::string_view password, std::string_view b64) {
  char decoded[HtpasswdScanner::kMaxHash];
  if (b64.size() > sizeof decoded) return PasswordCheck::kMismatch;
  const std::ptrdiff_t n = decode_base64(b64, decoded);
  if (n < 20) return PasswordCheck::kMismatch;  // not base64, or no whole SHA-1
  MdCtx ctx(EVP_MD_CTX_new());
  unsigned char sum[20];
  const std::string_view salt(decoded + 20, static_cast<std::size_t>(n) - 20);
  if (!ctx || !digest(ctx.get(), EVP_sha1(), {password, salt}, sum)) {
    return PasswordCheck::kError;
  }
  return CRYPTO_memcmp(sum, decoded, 20) == 0 ? PasswordCheck::kMatch : PasswordCheck::kMismatch;
}

PasswordCheck check_crypt(std::string_view password, std::string_view hash) {
  // crypt(3) takes C strings: a password with a NUL in it is cut there, as
  // nginx's is. struct crypt_data is large (tens of kilobytes): one per
  // thread, not on the stack.
  thread_local crypt_data data;
  char pw[HtpasswdScanner::kMaxHash + 1];
  char setting[HtpasswdScanner::kMaxHash + 1];
  if (hash.size() >= sizeof setting) return PasswordCheck::kMismatch;
  std::memcpy(setting, hash.data(), hash.size());
  setting[hash.size()] = '\0';
  std::unique_ptr<char[]> long_pw;
  char* p = pw;
  if (password.size() >= sizeof pw) {
    long_pw.reset(new (std::nothrow) char[password.size() + 1]);
    if (!long_pw) return PasswordCheck::kError;
    p = long_pw.get();
  }
  std::memcpy(p, password.data(), password.size());
  p[password.size()] = '\0';
  std::memset(&data, 0, sizeof data);
  const char* out = crypt_rn(p, setting, &data, sizeof data);
  if (out == nullptr) return PasswordCheck::kError;
  return same_bytes(out, hash) ? PasswordCheck::kMatch : PasswordCheck::kMismatch;
}

}  // namespace

std::ptrdiff_t decode_base64(std::string_view in, char* out) {
  std::size_t n = in.size();
  while (n > 0 && in[n - 1] == '=') --n;
  if (in.size() - n > 2 || n % 4 == 1) return -1;
  std::size_t o = 0;
  std::uint32_t acc = 0;
  int bits = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const int v = base64_value(static_cast<unsigned char>(in[i]));
    if (v < 0) return -1;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return static_cast<std::ptrdiff_t>(o);
}

std::size_t encode_base64(std::string_view in, char* out) {
  const auto* s = reinterpret_cast<const unsigned char*>(in.data());
  std::size_t n = in.size();
  char* p = out;
  while (n >= 3) {
    *p++ = kBase64[s[0] >> 2];
    *p++ = kBase64[((s[0] & 0x03) << 4) | (s[1] >> 4)];
    *p++ = kBase64[((s[1] & 0x0f) << 2) | (s[2] >> 6)];
    *p++ = kBase64[s[2] & 0x3f];
    s += 3;
    n -= 3;
  }
  if (n > 0) {
    *p++ = kBase64[s[0] >> 2];
    if (n == 1) {
      *p++ = kBase64[(s[0] & 0x03) << 4];
      *p++ = '=';
    } else {
      *p++ = kBase64[((s[0] & 0x03) << 4) | (s[1] >> 4)];
      *p++ = kBase64[(s[1] & 0x0f) << 2];
    }
    *p++ = '=';
  }
  return static_cast<std::size_t>(p - out);
}

bool parse_basic_credentials(std::string_view value, char* buf, std::string_view& user,
                             std::string_view& password) {
  if (!starts_with_nocase(value, "basic ")) return false;
  std::size_t i = 6;
  while (i < value.size() && value[i] == ' ') ++i;
  const std::ptrdiff_t n = decode_base64(value.substr(i), buf);
  if (n <= 0) return false;
  const std::string_view text(buf, static_cast<std::size_t>(n));
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  user = text.substr(0, colon);
  password = text.substr(colon + 1);
  return true;
}

bool HtpasswdScanner::feed(const char* p, std::size_t n) {
  for (std::size_t i = 0; i < n && state_ != State::kFound; ++i) {
    const char ch = p[i];
    switch (state_) {
      case State::kLogin:
        if (login_ == 0) {
          if (ch == '#') {
            state_ = State::kSkip;
            break;
          }
          if (ch == '\r' || ch == '\n') break;  // a blank line
        }
        if (login_ == user_.size()) {
          state_ = ch == ':' ? State::kHash : State::kSkip;
          hash_len_ = 0;
          too_long_ = false;
          break;
        }
        if (ch != user_[login_]) {
          state_ = State::kSkip;
          break;
        }
        ++login_;
        break;
      case State::kHash:
        if (ch == '\r' || ch == '\n' || ch == ':') {
          state_ = State::kFound;
          break;
        }
        if (hash_len_ == kMaxHash) {
          too_long_ = true;
        } else {
          hash_[hash_len_++] = ch;
        }
        break;
      case State::kSkip:
        if (ch == '\n') {
          state_ = State::kLogin;
          login_ = 0;
        }
        break;
      case State::kFound:
        break;
    }
  }
  return state_ == State::kFound;
}

bool HtpasswdScanner::finish() {
  if (state_ == State::kHash) state_ = State::kFound;
  return state_ == State::kFound;
}

std::size_t apr1_crypt(std::string_view password, std::string_view setting, char* out) {
  static constexpr std::string_view kMagic = "$apr1$";
  static constexpr char kItoa64[] =
      "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::string_view salt = setting.substr(setting.starts_with(kMagic) ? kMagic.size() : 0);
  salt = salt.substr(0, std::min(salt.find('$'), std::size_t{8}));

  MdCtx ctx(EVP_MD_CTX_new());
  if (!ctx) return 0;
  const EVP_MD* md5 = EVP_md5();
  unsigned char sum[16];
  // MD5(password salt password), spread over the main digest.
  if (!digest(ctx.get(), md5, {password, salt, password}, sum)) return 0;
  if (EVP_DigestInit_ex(ctx.get(), md5, nullptr) != 1) return 0;
  bool ok = EVP_DigestUpdate(ctx.get(), password.data(), password.size()) == 1 &&
            EVP_DigestUpdate(ctx.get(), kMagic.data(), kMagic.size()) == 1 &&
            EVP_DigestUpdate(ctx.get(), salt.data(), salt.size()) == 1;
  for (std::size_t left = password.size(); ok && left > 0;
       left -= std::min(left, std::size_t{16})) {
    ok = EVP_DigestUpdate(ctx.get(), sum, std::min(left, std::size_t{16})) == 1;
  }
  // One byte per bit of the length: a NUL for a set bit, the password's
  // first byte for a clear one (the original algorithm's quirk, kept).
  for (std::size_t bits = password.size(); ok && bits != 0; bits >>= 1) {
    const char zero = '\0';
    ok = EVP_DigestUpdate(ctx.get(), (bits & 1) != 0 ? &zero : password.data(), 1) == 1;
  }
  unsigned int len = 0;
  if (!ok || EVP_DigestFinal_ex(ctx.get(), sum, &len) != 1) return 0;
  // A thousand rounds, to make guessing slow.
  const std::string_view prev(reinterpret_cast<const char*>(sum), sizeof sum);
  for (int i = 0; i < 1000; ++i) {
    const std::string_view a = (i & 1) != 0 ? password : prev;
    const std::string_view b = i % 3 != 0 ? salt : std::string_view();
    const std::string_view c = i % 7 != 0 ? password : std::string_view();
    const std::string_view d = (i & 1) != 0 ? prev : password;
    unsigned char next[16];
    if (!digest(ctx.get(), md5, {a, b, c, d}, next)) return 0;
    std::memcpy(sum, next, sizeof sum);
  }
  char* p = out;
  std::memcpy(p, kMagic.data(), kMagic.size());
  p += kMagic.size();
  std::memcpy(p, salt.data(), salt.size());
  p += salt.size();
  *p++ = '$';
  auto put = [&p](std::uint32_t v, int n) {
    while (n-- > 0) {
      *p++ = kItoa64[v & 0x3f];
      v >>= 6;
    }
  };
  static constexpr int kOrder[5][3] = {{0, 6, 12}, {1, 7, 13}, {2, 8, 14}, {3, 9, 15}, {4, 10, 5}};
  for (const auto& g : kOrder) {
    put((std::uint32_t{sum[g[0]]} << 16) | (std::uint32_t{sum[g[1]]} << 8) | sum[g[2]], 4);
  }
  put(sum[11], 2);
  return static_cast<std::size_t>(p - out);
}

PasswordCheck check_password(std::string_view password, std::string_view hash) {
  if (hash.starts_with("{PLAIN}")) {
    return same_bytes(password, hash.substr(7)) ? PasswordCheck::kMatch : PasswordCheck::kMismatch;
  }
  if (hash.starts_with("{SHA}")) return check_sha(password, hash.substr(5));
  if (hash.starts_with("{SSHA}")) return check_ssha(password, hash.substr(6));
  if (hash.starts_with("$apr1$")) {
    char out[kApr1Max];
    const std::size_t n = apr1_crypt(password, hash, out);
    if (n == 0) return PasswordCheck::kError;
    return same_bytes({out, n}, hash) ? PasswordCheck::kMatch : PasswordCheck::kMismatch;
  }
  return check_crypt(password, hash);
}

}  // namespace vigil::http
