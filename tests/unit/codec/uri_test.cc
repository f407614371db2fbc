// Tests for src/http/uri.cc: percent-decoding, dot segments, "//" merging,
// traversal attempts and the extension.

#include "codec/uri.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace vigil::http {
namespace {

struct Case {
  std::string raw;
  int status;
  const char* path;
  const char* extension;
};

NormalizedPath normalize(const std::string& raw, std::vector<char>& out) {
  out.assign(normalized_path_capacity(raw), '\xAA');
  return normalize_path(raw, out.data(), out.size());
}

// clang-format off
const Case kCases[] = {
    {"/", 0, "/", ""},
    {"", 0, "/", ""},  // absolute-form without a path
    {"/index.html", 0, "/index.html", "html"},
    {"/a/b/c.tar.gz", 0, "/a/b/c.tar.gz", "gz"},
    {"/a/.profile", 0, "/a/.profile", ""},
    {"/a/b.", 0, "/a/b.", ""},
    {"/dir/", 0, "/dir/", ""},
    {"/a.b/c", 0, "/a.b/c", ""},
    {"/a.b/", 0, "/a.b/", ""},
    {"/...a", 0, "/...a", "a"},
    // "//" merging
    {"/a//b///c", 0, "/a/b/c", ""},
    {"//", 0, "/", ""},
    {"///x//", 0, "/x/", ""},
    // dot segments (RFC 3986 §5.2.4)
    {"/./a/./b/.", 0, "/a/b/", ""},
    {"/a/b/../c", 0, "/a/c", ""},
    {"/a/b/..", 0, "/a/", ""},
    {"/a/b/../", 0, "/a/", ""},
    {"/a/..", 0, "/", ""},
    {"/a/./../b", 0, "/b", ""},
    {"/a/b/./../../c.css", 0, "/c.css", "css"},
    {"/a/b/../../etc/passwd", 0, "/etc/passwd", ""},
    {"/a//..", 0, "/", ""},
    {"/.", 0, "/", ""},
    {"/...", 0, "/...", ""},
    {"/.a/..b/.../c..", 0, "/.a/..b/.../c..", ""},
    {"/a\\..\\b", 0, "/a\\..\\b", "\\b"},  // a backslash is an ordinary octet here
    // percent-decoding (RFC 3986 §2.1), before segment processing
    {"/a%20b.txt", 0, "/a b.txt", "txt"},
    {"/%41%42%7e", 0, "/AB~", ""},
    {"/caf%C3%A9.HTML", 0, "/caf\xC3\xA9.HTML", "HTML"},
    {"/a%2fb", 0, "/a/b", ""},
    {"/a%2F..%2Fb", 0, "/b", ""},
    {"/a/%2e%2e/b", 0, "/b", ""},
    {"/a/%2E./b", 0, "/b", ""},
    {"/%2e", 0, "/", ""},
    {"/a%2f%2f%2fb", 0, "/a/b", ""},
    {"/%25", 0, "/%", ""},
    {"/%252e%252e/", 0, "/%2e%2e/", ""},  // decoded once only
    {"/x.%2e", 0, "/x..", ""},
    // traversal attempts: refused, never clamped
    {"/..", 400, "", ""},
    {"/../x", 400, "", ""},
    {"/../../etc/passwd", 400, "", ""},
    {"/a/../..", 400, "", ""},
    {"/a/b/../../../etc/passwd", 400, "", ""},
    {"/a/b/c/../../../..", 400, "", ""},
    {"/%2e%2e/", 400, "", ""},
    {"/%2E%2E/etc/passwd", 400, "", ""},
    {"/.%2e", 400, "", ""},
    {"/%2e.", 400, "", ""},
    {"/..%2f", 400, "", ""},
    {"/..%2fetc", 400, "", ""},
    {"/..%2F..%2Fetc%2Fpasswd", 400, "", ""},
    {"/a/b%2f%2e%2e%2f%2e%2e%2f%2e%2e%2fetc", 400, "", ""},
    {"//..", 400, "", ""},
    {"/./..", 400, "", ""},
    // invalid escapes and NUL
    {"/a%", 400, "", ""},
    {"/a%4", 400, "", ""},
    {"/a%zz", 400, "", ""},
    {"/a%4g", 400, "", ""},
    {"/a%g4", 400, "", ""},
    {"/%00", 400, "", ""},
    {"/a%00b", 400, "", ""},
    {"/a/..%00", 400, "", ""},
    {"a/b", 400, "", ""},  // not a path
};
// clang-format on

TEST(NormalizePath, Table) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(testing::PrintToString(c.raw));
    std::vector<char> out;
    const auto got = normalize(c.raw, out);
    EXPECT_EQ(got.status, c.status) << got.path;
    if (c.status != 0) {
      EXPECT_STRNE(got.error, "");
      EXPECT_FALSE(got.ok());
      continue;
    }
    EXPECT_TRUE(got.ok());
    EXPECT_EQ(got.path, c.path);
    EXPECT_EQ(got.extension, c.extension);
    EXPECT_EQ(got.path.data(), out.data());  // written into the caller's buffer
  }
}

// merge_slashes off: empty segments stay, and ".." removes one as it would
// any other segment (nginx's answers for the same paths).
TEST(NormalizePath, SlashesKept) {
  const std::pair<const char*, const char*> cases[] = {
      {"/foo//../bar", "/foo/bar"},  {"/foo///../bar", "/foo//bar"}, {"//x", "//x"},
      {"/a//b///c", "/a//b///c"},    {"/a//", "/a//"},               {"//..", "/"},
      {"/a/%2F/b", "/a///b"},         {"/a/./b//", "/a/b//"},
  };
  for (const auto& [raw, want] : cases) {
    std::vector<char> out(normalized_path_capacity(raw));
    const NormalizedPath np = normalize_path(raw, out.data(), out.size(), false);
    EXPECT_TRUE(np.ok()) << raw;
    EXPECT_EQ(np.path, want) << raw;
  }
  std::vector<char> out(16);
  EXPECT_EQ(normalize_path("/..", out.data(), out.size(), false).status, 400);
}

TEST(NormalizePath, OutputBufferTooSmall) {
  char out[4];
  EXPECT_EQ(normalize_path("/abcd", out, sizeof out).status, 500);
  EXPECT_EQ(normalize_path("", out, 0).status, 500);
  EXPECT_EQ(normalize_path("/abc", out, sizeof out).path, "/abc");
  EXPECT_EQ(normalized_path_capacity(""), 1u);
  EXPECT_EQ(normalized_path_capacity("/a%20"), 5u);
}

// Whatever comes in, what comes out is a clean absolute path: no empty, "."
// or ".." segment, no NUL, never longer than the input.
TEST(NormalizePath, RandomPathsComeOutClean) {
  const char* atoms[] = {"/", ".", "..", "a", "%2e", "%2E", "%2f", "%2F", "%", "%0", "%00", "b.c"};
  std::mt19937 rng(7);
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string raw = "/";
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) raw += atoms[rng() % std::size(atoms)];
    std::vector<char> out;
    const auto got = normalize(raw, out);
    if (!got.ok()) continue;
    ++accepted;
    const std::string p(got.path);
    ASSERT_LE(p.size(), std::max<std::size_t>(raw.size(), 1)) << raw;
    ASSERT_EQ(p.front(), '/') << raw;
    ASSERT_EQ(p.find("//"), std::string::npos) << raw << " -> " << p;
    ASSERT_EQ(p.find('\0'), std::string::npos) << raw;
    ASSERT_EQ(p.find("/./"), std::string::npos) << raw << " -> " << p;
    ASSERT_EQ(p.find("/../"), std::string::npos) << raw << " -> " << p;
    ASSERT_FALSE(p.ends_with("/.") || p.ends_with("/..")) << raw << " -> " << p;
    // Normalizing again changes nothing.
    std::vector<char> again;
    const auto twice = normalize(p, again);
    ASSERT_TRUE(twice.ok()) << p;
    if (p.find('%') == std::string::npos) {
      ASSERT_EQ(twice.path, p);
    }
  }
  EXPECT_GT(accepted, 1000);
}

}  // namespace
}  // namespace vigil::http
