// try_files through the real vigil binary, as nginx answers the same
// configuration (checked against nginx 1.22): the first file that exists is
// served and becomes $uri, a name with '/' must be a directory (then the
// directory's redirect or index), the last argument is an internal redirect
// (locations matched again, arguments from its '?') or a status that
// error_page may answer; a redirect cycle is a logged 500; disable_symlinks
// applies to the files tried; a proxied location gets the client's URI
// after a file matched, the new one (escaped) after a redirect.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "integration/http_harness.h"
#include "integration/proxy_backend.h"

namespace vigil::test {
namespace {

class TryFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.write("html/a.txt", "a\n");
    server_.write("html/dir/index.html", "dir\n");
    server_.write("html/fallback.html", "fallback\n");
    server_.write("html/strict/s.txt", "s\n");
    server_.write("html/nf.html", "not here\n");
    server_.write("other/new/page.txt", "new page\n");
    server_.write("html/real.txt", "real\n");
  }
  bool start(const std::string& locations) {
    port_ = free_port();
    return server_.start(
        "log_format tf '$uri|$args|$status';\nserver { listen 127.0.0.1:" + std::to_string(port_) +
        "; root html; access_log logs/tf.log tf buffer=0;\n" + locations + "}\n");
  }
  // Waits for the access log to hold `lines` lines and returns it.
  std::string log(std::size_t lines) {
    std::string text;
    wait_until(
        [&] {
          text = server_.read("logs/tf.log");
          return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) >= lines;
        },
        3000);
    return text;
  }
  Response fetch(const std::string& target) { return get(port_, simple_get(target)); }

  VigilServer server_;
  int port_ = 0;
};

TEST_F(TryFiles, FirstThatExistsElseTheFallbackUri) {
  ASSERT_TRUE(start("location / { try_files $uri $uri/ /fallback.html?from=$uri; }\n"))
      << server_.output();
  Response r = fetch("/a.txt");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "a\n");
  // "$uri/" matched the directory: the URI stays /dir, which the static
  // handler redirects to /dir/.
  r = fetch("/dir");
  EXPECT_EQ(r.status, 301);
  EXPECT_TRUE(r.header("location").ends_with("/dir/")) << r.header("location");
  r = fetch("/dir/");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "dir\n");
  // Nothing exists: the fallback, with the arguments it gives.
  r = fetch("/missing?x=1");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "fallback\n");
  const std::string text = log(4);
  EXPECT_NE(text.find("/a.txt|-|200\n"), std::string::npos) << text;
  EXPECT_NE(text.find("/dir|-|301\n"), std::string::npos) << text;
  EXPECT_NE(text.find("/fallback.html|from=/missing|200\n"), std::string::npos) << text;
}

TEST_F(TryFiles, ARedirectWithoutArgumentsDropsThem) {
  ASSERT_TRUE(start("location / { try_files $uri /fallback.html; }\n")) << server_.output();
  Response r = fetch("/missing?keep=no");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "fallback\n");
  EXPECT_EQ(log(1), "/fallback.html|-|200\n");
}

TEST_F(TryFiles, CodeWhenNothingMatchesAndErrorPageAnswersIt) {
  ASSERT_TRUE(
      start("location /strict/ { try_files $uri =404; }\n"
            "location /paged/ { try_files $uri =404; error_page 404 /nf.html; }\n"))
      << server_.output();
  EXPECT_EQ(fetch("/strict/s.txt").body, "s\n");
  EXPECT_EQ(fetch("/strict/none").status, 404);
  EXPECT_EQ(fetch("/strict/").status, 404) << "a directory is not a file";
  Response r = fetch("/paged/none");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "not here\n");
}

TEST_F(TryFiles, TheRedirectMatchesLocationsAgain) {
  ASSERT_TRUE(
      start("location /old/ { try_files $uri /new/page.txt; }\n"
            "location /new/ { root other; }\n"))
      << server_.output();
  Response r = fetch("/old/anything");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "new page\n");
  EXPECT_EQ(log(1), "/new/page.txt|-|200\n");
}

TEST_F(TryFiles, ARedirectCycleIsALogged500) {
  ASSERT_TRUE(start("location /loop/ { try_files $uri /loop/again; }\n")) << server_.output();
  EXPECT_EQ(fetch("/loop/x").status, 500);
  EXPECT_TRUE(server_.wait_output(
      "rewrite or internal redirection cycle while internally redirecting to \"/loop/again\""))
      << server_.output();
  // The server goes on serving.
  EXPECT_EQ(fetch("/a.txt").status, 200);
}

TEST_F(TryFiles, DisableSymlinksAppliesToTheFilesTried) {
  server_.write("html/l/plain.txt", "plain\n");
  server_.write("html/f/plain.txt", "plain\n");
  ASSERT_EQ(
      ::symlink(server_.path("html/real.txt").c_str(), server_.path("html/l/link.txt").c_str()), 0);
  ASSERT_EQ(
      ::symlink(server_.path("html/real.txt").c_str(), server_.path("html/f/link.txt").c_str()), 0);
  ASSERT_TRUE(
      start("location /l/ { disable_symlinks on; try_files $uri /fallback.html; }\n"
            "location /f/ { try_files $uri /fallback.html; }\n"))
      << server_.output();
  EXPECT_EQ(fetch("/l/plain.txt").body, "plain\n");
  EXPECT_EQ(fetch("/l/link.txt").body, "fallback\n");
  EXPECT_EQ(fetch("/f/link.txt").body, "real\n");
}

TEST_F(TryFiles, ThroughTheOpenFileCache) {
  // With open_file_cache_errors the miss is remembered for
  // open_file_cache_valid: a file created after it is not seen yet.
  ASSERT_TRUE(
      start("location /c/ { open_file_cache max=10; open_file_cache_errors on;\n"
            "  open_file_cache_valid 60s; try_files $uri =404; }\n"
            "location /n/ { try_files $uri =404; }\n"))
      << server_.output();
  EXPECT_EQ(fetch("/c/late.txt").status, 404);
  EXPECT_EQ(fetch("/n/late.txt").status, 404);
  server_.write("html/c/late.txt", "late\n");
  server_.write("html/n/late.txt", "late\n");
  EXPECT_EQ(fetch("/c/late.txt").status, 404);
  EXPECT_EQ(fetch("/n/late.txt").body, "late\n");
}

TEST_F(TryFiles, ProxyPassGetsTheRedirectedUri) {
  Backend backend;
  ASSERT_NE(backend.port(), 0);
  const std::string pass = "proxy_pass http://" + backend.address();
  const std::string conf =
      "location /old/ { try_files $uri /new/x%20y?z=1; }\n"
      "location /new/ { " +
      pass +
      "; }\n"
      "location /p/ { try_files /a.txt =404; " +
      pass +
      "; }\n"
      "location /q/ { try_files /nothing /p2/b; }\n"
      "location /p2/ { " +
      pass + "/base/; }\n";
  ASSERT_TRUE(start(conf)) << server_.output();
  // What nginx 1.22 sends for each.
  EXPECT_EQ(fetch("/old/a?b=1").body, "backend GET /new/x%2520y?z=1");
  EXPECT_EQ(fetch("/p/%41?c=2").body, "backend GET /p/%41?c=2");
  EXPECT_EQ(fetch("/q/zz?d").body, "backend GET /base/b");
}

}  // namespace
}  // namespace vigil::test
