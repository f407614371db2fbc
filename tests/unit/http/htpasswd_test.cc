// auth_basic's parsers (htpasswd.cc): base64, the Basic credentials of an
// Authorization field, the streaming htpasswd scan (comments, blank lines,
// CR, a last line without a newline, pieces of any size, a hash too long to
// keep) and each hash format against known values; then the directives'
// load errors with the file and line.
#include <gtest/gtest.h>

#include <string>

#include "http/access/htpasswd.h"
#include "unit/http/http_conf_fixture.h"

namespace vigil::http {
namespace {

std::string b64(std::string_view s) {
  std::string out(4 * (s.size() / 3 + 1), '\0');
  out.resize(encode_base64(s, out.data()));
  return out;
}

std::string unb64(std::string_view s, bool& ok) {
  std::string out(s.size() + 3, '\0');
  const std::ptrdiff_t n = decode_base64(s, out.data());
  ok = n >= 0;
  out.resize(ok ? static_cast<std::size_t>(n) : 0);
  return out;
}

TEST(Base64, EncodesAndDecodesWithOrWithoutPadding) {
  EXPECT_EQ(b64(""), "");
  EXPECT_EQ(b64("f"), "Zg==");
  EXPECT_EQ(b64("fo"), "Zm8=");
  EXPECT_EQ(b64("foo"), "Zm9v");
  EXPECT_EQ(b64("user:password"), "dXNlcjpwYXNzd29yZA==");
  bool ok = false;
  EXPECT_EQ(unb64("dXNlcjpwYXNzd29yZA==", ok), "user:password");
  EXPECT_TRUE(ok);
  EXPECT_EQ(unb64("dXNlcjpwYXNzd29yZA", ok), "user:password") << "padding may be left out";
  EXPECT_TRUE(ok);
  for (const char* bad : {"Z", "Zm9v!", "Zg===", "Z=g=", "Zm 9v"}) {
    unb64(bad, ok);
    EXPECT_FALSE(ok) << bad;
  }
}

TEST(BasicCredentials, SplitAtTheFirstColon) {
  char buf[128];
  std::string_view user, password;
  ASSERT_TRUE(parse_basic_credentials("Basic " + b64("u:p:q"), buf, user, password));
  EXPECT_EQ(user, "u");
  EXPECT_EQ(password, "p:q");
  ASSERT_TRUE(parse_basic_credentials("bAsIc   " + b64("name:"), buf, user, password))
      << "the scheme in any case, spaces after it";
  EXPECT_EQ(user, "name");
  EXPECT_EQ(password, "");
  for (const std::string& bad :
       {std::string("Bearer ") + b64("u:p"), "Basic " + b64("nocolon"), std::string("Basic !!!!"),
        std::string("Basic"), std::string("Basic ")}) {
    EXPECT_FALSE(parse_basic_credentials(bad, buf, user, password)) << bad;
  }
}

// Scans `file` for `user`, fed in pieces of `piece` bytes.
std::string find(std::string_view user, std::string_view file, std::size_t piece = 1 << 20,
                 bool* found_out = nullptr) {
  HtpasswdScanner s(user);
  bool found = false;
  for (std::size_t at = 0; at < file.size() && !found; at += piece) {
    found = s.feed(file.data() + at, std::min(piece, file.size() - at));
  }
  if (!found) found = s.finish();
  if (found_out != nullptr) *found_out = found;
  return found ? std::string(s.hash()) : "<none>";
}

TEST(HtpasswdScanner, FindsTheFirstEntryOfTheUser) {
  const std::string file =
      "# a comment\n"
      "\n"
      "alice:{PLAIN}one\r\n"
      "  bob:{PLAIN}spaced\n"
      "#bob:{PLAIN}commented\n"
      "bobby:{PLAIN}longer\n"
      "bob:{PLAIN}two:a comment field\n"
      "bob:{PLAIN}second\n"
      "carol:{PLAIN}last";
  for (std::size_t piece : {std::size_t{1}, std::size_t{2}, std::size_t{7}, file.size()}) {
    EXPECT_EQ(find("alice", file, piece), "{PLAIN}one") << piece;
    EXPECT_EQ(find("bob", file, piece), "{PLAIN}two") << piece;
    EXPECT_EQ(find("bobby", file, piece), "{PLAIN}longer") << piece;
    EXPECT_EQ(find("carol", file, piece), "{PLAIN}last") << "no newline at the end";
    EXPECT_EQ(find("dave", file, piece), "<none>");
    EXPECT_EQ(find("bo", file, piece), "<none>") << "a prefix of a name is not the name";
    EXPECT_EQ(find("# a comment", file, piece), "<none>");
  }
}

TEST(HtpasswdScanner, AHashLongerThanItKeepsIsMarked) {
  const std::string file = "u:" + std::string(HtpasswdScanner::kMaxHash + 10, 'x') + "\n";
  HtpasswdScanner s("u");
  ASSERT_TRUE(s.feed(file.data(), file.size()));
  EXPECT_TRUE(s.too_long());
  EXPECT_EQ(s.hash().size(), HtpasswdScanner::kMaxHash);
}

TEST(CheckPassword, EachFormat) {
  // "password" under every format (the {SHA}, {SSHA} and $apr1$ values are
  // the ones nginx's own tests use; the crypt(3) ones from `openssl passwd`
  // and Python's crypt).
  for (const char* hash : {
           "{PLAIN}password",
           "{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=",
           "{SSHA}yI6cZwQadOA1e+/f+T+H3eCQQhRzYWx0",
           "$apr1$salt$Xxd1irWT9ycqoYxGFn4cb.",
           "sa3tHJ3/KuYvI",
           "$1$salt$qJH7.N4xYta3aEG/dfqo/0",
           "$5$saltsalt$gOjOtoMpVhru2uyjeJSEc/JaLQWOXMNmlOnj6T4AtC.",
           "$6$saltsalt$qFmFH.bQmmtXzyBY0s9v7Oicd2z4XSIecDzlB5KiA2/jctKu9YterLp8wwnSq.qc."
           "eoxqOmSuNp2xS0ktL3nh/",
           "$2b$04$abcdefghijklmnopqrstuughE8Ev8uGFaUgY2cNEySvxngrb/Jzdm",
           "$2y$04$abcdefghijklmnopqrstuughE8Ev8uGFaUgY2cNEySvxngrb/Jzdm",
       }) {
    EXPECT_EQ(check_password("password", hash), PasswordCheck::kMatch) << hash;
    EXPECT_EQ(check_password("passwore", hash), PasswordCheck::kMismatch) << hash;
    EXPECT_EQ(check_password("", hash), PasswordCheck::kMismatch) << hash;
  }
}

TEST(CheckPassword, BrokenHashesMatchNothing) {
  for (const char* hash :
       {"{SHA}_____Mm5Pz8GgiULbPgzG37mj9g=", "{SHA}Zm9vCg==",
        "{SSHA}_____wQadOA1e+/f+T+H3eCQQhRzYWx0", "{SSHA}Zm9vCg==", "$apr1$", "{PLAIN}"}) {
    EXPECT_EQ(check_password("1", hash), PasswordCheck::kMismatch) << hash;
  }
  // crypt(3) refuses a setting it does not know: an error (500), as nginx's.
  EXPECT_EQ(check_password("1", "$9$nonsense"), PasswordCheck::kError);
}

TEST(Apr1, KnownValues) {
  char out[kApr1Max];
  const std::size_t n = apr1_crypt("password", "$apr1$salt$", out);
  EXPECT_EQ(std::string_view(out, n), "$apr1$salt$Xxd1irWT9ycqoYxGFn4cb.");
  // The salt stops at 8 bytes.
  const std::size_t m = apr1_crypt("x", "$apr1$0123456789$", out);
  EXPECT_EQ(std::string_view(out, m).substr(0, 15), "$apr1$01234567$");
  EXPECT_EQ(m, kApr1Max);
}

using AuthConfTest = testing::HttpConfTest;

TEST_F(AuthConfTest, ErrorsNameTheFileAndLine) {
  for (const char* bad : {"satisfy some;", "auth_basic;", "auth_basic a b;",
                          "auth_basic_user_file;", "auth_basic \"$nosuchvariable\";",
                          "set_real_ip_from 1.2.3.4/40;", "real_ip_recursive maybe;",
                          "autoindex yes;", "autoindex_format yaml;", "autoindex_exact_size 1;"}) {
    const std::string e = error(std::string("server { location / { ") + bad + " } }");
    EXPECT_NE(e.find(".conf:"), std::string::npos) << bad << ": " << e;
  }
  EXPECT_NE(error("server { satisfy some; }").find("it must be \"all\" or \"any\""),
            std::string::npos);
}

}  // namespace
}  // namespace vigil::http
