// The mail command parsers (src/mail/parse.h).
#include "mail/parse.h"

#include <gtest/gtest.h>

#include <string>

namespace vigil::mail {
namespace {

ParseStatus imap(std::string line, Command& cmd, std::string& keep) {
  keep = std::move(line);
  return parse_imap(keep.data(), keep.size(), cmd);
}

TEST(MailParse, FindLine) {
  EXPECT_EQ(find_line("abc", 3), 0);
  EXPECT_EQ(find_line("abc\r", 4), 0);
  EXPECT_EQ(find_line("abc\r\nx", 6), 5);
  EXPECT_EQ(find_line("abc\n", 4), 4);
  EXPECT_EQ(find_line("a\rb\r\n", 5), -1);  // a bare CR
  EXPECT_EQ(find_line(std::string("a\0b\r\n", 5).data(), 5), -1);
}

TEST(MailParse, ImapTagsCommandsAndArguments) {
  Command c;
  std::string buf;
  ASSERT_EQ(imap("a1 LOGIN alice \"se\\\"cr\\\\et\"", c, buf), ParseStatus::kOk);
  EXPECT_EQ(c.tag, "a1");
  EXPECT_EQ(c.name, "LOGIN");
  ASSERT_EQ(c.nargs, 2u);
  EXPECT_EQ(c.args[0], "alice");
  EXPECT_EQ(c.args[1], "se\"cr\\et");
  ASSERT_EQ(imap("x CAPABILITY", c, buf), ParseStatus::kOk);
  EXPECT_EQ(c.nargs, 0u);
  ASSERT_EQ(imap("x LOGIN \"\" \"\"", c, buf), ParseStatus::kOk);
  EXPECT_EQ(c.args[0], "");
  ASSERT_EQ(imap("t LOGIN {5}", c, buf), ParseStatus::kOk);
  EXPECT_TRUE(c.literal);
  ASSERT_EQ(imap("t LOGIN {5+}", c, buf), ParseStatus::kOk);
  EXPECT_TRUE(c.literal);
  for (const char* bad : {"", "a1", "a1 ", "+ LOGIN", "a1  LOGIN", "a1 LOGIN  x", "a1 LOGIN \"open",
                          "a1 LOGIN \"bad\\q\"", "a1 LOGIN {x}", "a1 LOGIN {5} more", "a1 L0GIN",
                          "a1 LOGIN x ", "a*1 NOOP", "a1 LOGIN (x)"}) {
    EXPECT_EQ(imap(bad, c, buf), ParseStatus::kInvalid) << bad;
  }
  EXPECT_EQ(imap("a X 1 2 3 4 5 6 7 8 9", c, buf), ParseStatus::kTooManyArgs);
}

TEST(MailParse, ImapLiterals) {
  Command c;
  std::string buf;
  // A whole command with its literals (RFC 3501 §4.3; "+": RFC 7888).
  ASSERT_EQ(imap("a1 LOGIN {5}\r\nal ce {6+}\r\nse\"cr\n", c, buf), ParseStatus::kOk);
  EXPECT_FALSE(c.literal);
  ASSERT_EQ(c.nargs, 2u);
  EXPECT_EQ(c.args[0], "al ce");
  EXPECT_EQ(c.args[1], "se\"cr\n");
  ASSERT_EQ(imap("a1 LOGIN {0}\n \"x\"", c, buf), ParseStatus::kOk);
  EXPECT_EQ(c.args[0], "");
  EXPECT_EQ(c.args[1], "x");
  for (const char* bad : {"a1 LOGIN {5}\r\nabc", "a1 LOGIN {2}\r\nabc", "a1 LOGIN {2}xab",
                          "a1 LOGIN {2}\rab", "a1 LOGIN {99999999999}\r\n"}) {
    EXPECT_EQ(imap(bad, c, buf), ParseStatus::kInvalid) << bad;
  }
  EXPECT_EQ(imap(std::string("a1 LOGIN {3}\r\na\0b x", 17), c, buf), ParseStatus::kInvalid);

  std::size_t size = 0;
  bool sync = false;
  EXPECT_TRUE(imap_literal_at_end("a1 LOGIN {12}", 13, size, sync));
  EXPECT_EQ(size, 12u);
  EXPECT_TRUE(sync);
  EXPECT_TRUE(imap_literal_at_end("x {7+}", 6, size, sync));
  EXPECT_EQ(size, 7u);
  EXPECT_FALSE(sync);
  for (std::string no : {"a1 LOGIN x", "{}", "a {+}", "a 5}", "a {12345678901}", "}"}) {
    EXPECT_FALSE(imap_literal_at_end(no.data(), no.size(), size, sync)) << no;
  }
}

TEST(MailParse, Pop3AndSmtp) {
  Command c;
  std::string l = "USER alice";
  ASSERT_EQ(parse_pop3(l.data(), l.size(), c), ParseStatus::kOk);
  EXPECT_EQ(c.name, "USER");
  EXPECT_EQ(c.args[0], "alice");
  l = "MAIL FROM:<a@b> SIZE=10";
  ASSERT_EQ(parse_smtp(l.data(), l.size(), c), ParseStatus::kOk);
  EXPECT_EQ(c.name, "MAIL");
  ASSERT_EQ(c.nargs, 2u);
  EXPECT_EQ(c.args[0], "FROM:<a@b>");
  l = "QUIT";
  ASSERT_EQ(parse_smtp(l.data(), l.size(), c), ParseStatus::kOk);
  EXPECT_EQ(c.nargs, 0u);
  for (std::string bad : {"", " USER", "US3R x", "USER\tx", "TOOLONGCOMMANDNAMEHERE"}) {
    EXPECT_EQ(parse_pop3(bad.data(), bad.size(), c), ParseStatus::kInvalid) << bad;
  }
  l = "X 1 2 3 4 5 6 7 8 9";
  EXPECT_EQ(parse_smtp(l.data(), l.size(), c), ParseStatus::kTooManyArgs);
}

TEST(MailParse, Base64) {
  std::string s = "AGFsaWNlAHNlY3JldA==";
  std::size_t n = s.size();
  ASSERT_TRUE(decode_base64_line(s.data(), n));
  EXPECT_EQ(std::string(s.data(), n), std::string("\0alice\0secret", 13));
  s = "=";
  n = 1;
  ASSERT_TRUE(decode_base64_line(s.data(), n));
  EXPECT_EQ(n, 0u);
  for (std::string bad : {"abc", "ab=c", "a===", "ab!c", "QQ==QQ=="}) {
    n = bad.size();
    EXPECT_FALSE(decode_base64_line(bad.data(), n)) << bad;
  }
  char out[32];
  EXPECT_EQ(std::string(out, encode_base64("Username:", 9, out)), "VXNlcm5hbWU6");
  EXPECT_EQ(std::string(out, encode_base64("ab", 2, out)), "YWI=");
  EXPECT_TRUE(iequals("AuthENTICATE", "authenticate"));
  EXPECT_FALSE(iequals("AUTH", "AUTHX"));
}

}  // namespace
}  // namespace vigil::mail
