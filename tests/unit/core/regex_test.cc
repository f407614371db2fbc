// PCRE2 through core/regex.h: compile errors name the expression and the
// place, groups and named groups come back as offsets, caseless works, and
// a group that took no part is unset.
#include "core/regex.h"

#include <gtest/gtest.h>

#include <string>

namespace vigil {
namespace {

TEST(Regex, CompileErrorNamesThePatternAndWhere) {
  auto re = Regex::compile("^/a(b", false);
  ASSERT_FALSE(re);
  const std::string m = re.status().message();
  EXPECT_EQ(m.rfind("pcre2_compile() failed: ", 0), 0u) << m;
  EXPECT_NE(m.find("in \"^/a(b\""), std::string::npos) << m;
  EXPECT_NE(m.find("missing closing parenthesis"), std::string::npos) << m;
}

TEST(Regex, GroupsAndNames) {
  auto re = Regex::compile("^/img/(?<name>[a-z]+)\\.(png|gif)$", false);
  ASSERT_TRUE(re) << re.status().message();
  EXPECT_EQ(re->groups(), 2);
  ASSERT_EQ(re->names().size(), 1u);
  EXPECT_EQ(re->names()[0].name, "name");
  EXPECT_EQ(re->names()[0].group, 1);
  int caps[2 * 4];
  const std::string s = "/img/cat.png";
  ASSERT_EQ(re->match(s, caps, 4), 3);  // the whole match and two groups
  EXPECT_EQ(s.substr(caps[0], caps[1] - caps[0]), s);
  EXPECT_EQ(s.substr(caps[2], caps[3] - caps[2]), "cat");
  EXPECT_EQ(s.substr(caps[4], caps[5] - caps[4]), "png");
  EXPECT_EQ(re->match("/img/Cat.png", caps, 4), 0);
  EXPECT_FALSE(re->matches("/img/cat.jpg"));
}

TEST(Regex, LiteralPrefix) {
  EXPECT_EQ(Regex::literal_prefix("^/api/v[0-9]+/users/([0-9]+)$"), "/api/v");
  EXPECT_EQ(Regex::literal_prefix("^/img\\.d/(.+)$"), "/img.d/");
  EXPECT_EQ(Regex::literal_prefix("^/abc?"), "/ab");     // c is optional
  EXPECT_EQ(Regex::literal_prefix("^/ab{0,2}x"), "/a");
  EXPECT_EQ(Regex::literal_prefix("^/a\\.*"), "/a");
  EXPECT_EQ(Regex::literal_prefix("^/a\\d"), "/a");     // an escaped letter is a class
  EXPECT_EQ(Regex::literal_prefix("^/(en|fr)/"), "/");
  EXPECT_EQ(Regex::literal_prefix("\\.php$"), "");       // not anchored
  EXPECT_EQ(Regex::literal_prefix("^/a|/b"), "");        // "^" binds the first alternative only
  EXPECT_EQ(Regex::literal_prefix("^/a[(]|/b"), "");     // a class's "(" opens no group
  EXPECT_EQ(Regex::literal_prefix("^/a\\Q(\\E|/b"), "");  // nor a quoted one
  EXPECT_EQ(Regex::literal_prefix("^/a(?#(x)|/b"), "");  // nor a comment's
  EXPECT_EQ(Regex::literal_prefix("^(?i)/a"), "");
}

TEST(Regex, PrefixAndLengthShortcutsKeepTheAnswers) {
  auto re = Regex::compile("^/api/v[0-9]+/users/([0-9]+)$", false);
  ASSERT_TRUE(re);
  EXPECT_TRUE(re->matches("/api/v2/users/7"));
  EXPECT_FALSE(re->matches("/api/v"));         // shorter than any match
  EXPECT_FALSE(re->matches("/API/v2/users/7"));
  EXPECT_FALSE(re->matches("/p/9999"));
  auto caseless = Regex::compile("^/Api/v[0-9]+/", true);
  ASSERT_TRUE(caseless);
  EXPECT_TRUE(caseless->matches("/API/V2/"));
  EXPECT_TRUE(caseless->matches("/api/v10/x"));
  EXPECT_FALSE(caseless->matches("/apx/v1/"));
  auto alt = Regex::compile("^/a|/b", false);
  ASSERT_TRUE(alt);
  EXPECT_TRUE(alt->matches("/x/b"));
  auto comment = Regex::compile("^/a(?#(x)|/b", false);
  ASSERT_TRUE(comment);
  EXPECT_TRUE(comment->matches("/x/b"));
  auto empty = Regex::compile("^", false);
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->matches(""));
}

TEST(Regex, CaselessAndUnsetGroups) {
  auto re = Regex::compile("\\.(php)(x)?$", true);
  ASSERT_TRUE(re);
  EXPECT_TRUE(re->caseless());
  int caps[2 * 3];
  const std::string s = "/INDEX.PHP";
  ASSERT_EQ(re->match(s, caps, 3), 3);
  EXPECT_EQ(s.substr(caps[2], caps[3] - caps[2]), "PHP");
  EXPECT_EQ(caps[4], -1);  // (x)? took no part
  EXPECT_EQ(caps[5], -1);
  // Fewer pairs than groups: only those are filled.
  int two[2 * 1];
  EXPECT_EQ(re->match(s, two, 1), 1);
  EXPECT_EQ(two[0], 6);
}

TEST(Regex, ManyGroupsGrowTheMatchData) {
  std::string pattern;
  for (int i = 0; i < 40; ++i) pattern += "(a)";
  auto re = Regex::compile(pattern, false);
  ASSERT_TRUE(re);
  EXPECT_EQ(re->groups(), 40);
  int caps[2 * 41];
  EXPECT_EQ(re->match(std::string(40, 'a'), caps, 41), 41);
  EXPECT_EQ(caps[80], 39);
  EXPECT_EQ(re->match(std::string(39, 'a'), caps, 41), 0);
}

// An unset variable's value is an empty view with no data: it is the
// empty string to every expression (the JIT's entry refuses a null subject).
TEST(Regex, AnEmptyViewWithoutDataIsTheEmptyString) {
  for (const char* pattern : {"^$", "x?", "^(a*)$"}) {
    auto re = Regex::compile(pattern, false);
    ASSERT_TRUE(re) << pattern;
    int caps[4];
    EXPECT_EQ(re->match(std::string_view(), caps, 2), pattern[1] == '(' ? 2 : 1) << pattern;
    EXPECT_EQ(caps[0], 0);
    EXPECT_EQ(caps[1], 0);
  }
  auto re = Regex::compile("^a", false);
  ASSERT_TRUE(re);
  EXPECT_EQ(re->match(std::string_view(), nullptr, 0), 0);
}

TEST(Regex, AnInvalidRegexDoesNotMatch) {
  Regex empty;
  EXPECT_FALSE(empty.valid());
  int caps[2];
  EXPECT_EQ(empty.match("x", caps, 1), -1);
}

}  // namespace
}  // namespace vigil
