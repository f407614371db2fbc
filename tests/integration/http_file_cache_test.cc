// open_file_cache through the real vigil binary (run on epoll and io_uring):
// a file renamed over or deleted is seen once open_file_cache_valid has
// passed (and not before, where that is deterministic), errors are cached or
// not as open_file_cache_errors says, max=N evicts the least recently used
// entry (counted in /metrics), a large file sent to a slow reader arrives
// intact while its entry is evicted and the file replaced, Range and
// conditional requests use the cached size and mtime, directory redirects and
// index files, disable_symlinks still refuses links, a location with
// "open_file_cache off" under a cache of the http level opens its files each
// time, and a reload starts with new tables.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <csignal>
#include <regex>
#include <string>

#include "http_harness.h"

namespace vigil {
namespace {

using test::get;
using test::simple_get;
using test::VigilServer;
using test::wait_until;

std::string conf(int port, const std::string& http_level, const std::string& server_body) {
  return "access_log off;\n" + http_level +
         "\nserver {\n  listen 127.0.0.1:" + std::to_string(port) +
         ";\n  root html;\n  location = /metrics { metrics; }\n" + server_body + "\n}\n";
}

// Writes `rel` as a new file and renames it over the old one (a new inode,
// as a deploy does).
void replace(VigilServer& s, const std::string& rel, const std::string& content) {
  s.write(rel + ".new", content);
  ASSERT_EQ(::rename(s.path(rel + ".new").c_str(), s.path(rel).c_str()), 0);
}

std::string body_of(int port, const std::string& target) {
  test::Response r = get(port, simple_get(target));
  return r.status == 200 ? r.body : "status " + std::to_string(r.status);
}

int status_of(int port, const std::string& target) {
  return get(port, simple_get(target)).status;
}

std::uint64_t metric(int port, const std::string& name) {
  const std::string text = get(port, simple_get("/metrics")).body;
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\n" + name + " (\\d+)"))) return ~0ull;
  return std::stoull(m[1]);
}

TEST(HttpFileCache, RenamedOverIsServedNewOnceValidHasPassed) {
  VigilServer s;
  s.write("html/v1/f.txt", "old one\n");
  s.write("html/v60/f.txt", "old sixty\n");
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf(port, "open_file_cache max=100;",
                           "location /v1/ { open_file_cache_valid 1s; }\n"
                           "location /v60/ { open_file_cache_valid 60s; }\n")))
      << s.output();
  EXPECT_EQ(body_of(port, "/v1/f.txt"), "old one\n");
  EXPECT_EQ(body_of(port, "/v60/f.txt"), "old sixty\n");
  replace(s, "html/v1/f.txt", "new one, longer\n");
  replace(s, "html/v60/f.txt", "new sixty, longer\n");
  // 60 s cannot pass here: the cached descriptor, the old file.
  EXPECT_EQ(body_of(port, "/v60/f.txt"), "old sixty\n");
  EXPECT_TRUE(wait_until([&] { return body_of(port, "/v1/f.txt") == "new one, longer\n"; }, 5000))
      << body_of(port, "/v1/f.txt");
  EXPECT_EQ(body_of(port, "/v60/f.txt"), "old sixty\n");
  EXPECT_GE(metric(port, "vigil_http_open_file_cache_hits_total"), 2u);
}

TEST(HttpFileCache, InheritedFromHttpUnlessALocationTurnsItOff) {
  VigilServer s;
  s.write("html/c/f.txt", "old\n");
  s.write("html/n/f.txt", "old\n");
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf(port, "open_file_cache max=10;",
                           "open_file_cache_valid 60s;\n"
                           "location /n/ { open_file_cache off; }\n")))
      << s.output();
  EXPECT_EQ(body_of(port, "/c/f.txt"), "old\n");
  EXPECT_EQ(body_of(port, "/n/f.txt"), "old\n");
  replace(s, "html/c/f.txt", "new, longer\n");
  replace(s, "html/n/f.txt", "new, longer\n");
  EXPECT_EQ(body_of(port, "/c/f.txt"), "old\n") << "the server level caches (the http level's)";
  EXPECT_EQ(body_of(port, "/n/f.txt"), "new, longer\n") << "off: opened again";
}

TEST(HttpFileCache, DeletedFileAndErrorsCachedOrNot) {
  VigilServer s;
  s.write("html/v1/d.txt", "doomed\n");
  s.write("html/e/.keep", "");
  s.write("html/n/.keep", "");
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf(port, "open_file_cache max=100;",
                           "location /v1/ { open_file_cache_valid 1s; }\n"
                           "location /e/ { open_file_cache_errors on; }\n"
                           "location /n/ { open_file_cache_errors off; }\n")))
      << s.output();
  EXPECT_EQ(body_of(port, "/v1/d.txt"), "doomed\n");
  ASSERT_EQ(::unlink(s.path("html/v1/d.txt").c_str()), 0);
  EXPECT_TRUE(wait_until([&] { return status_of(port, "/v1/d.txt") == 404; }, 5000));

  // Errors cached (valid 60 s): a file created after the 404 stays 404.
  EXPECT_EQ(status_of(port, "/e/late.txt"), 404);
  s.write("html/e/late.txt", "late\n");
  EXPECT_EQ(status_of(port, "/e/late.txt"), 404);
  // Not cached: found at once.
  EXPECT_EQ(status_of(port, "/n/late.txt"), 404);
  s.write("html/n/late.txt", "late\n");
  EXPECT_EQ(body_of(port, "/n/late.txt"), "late\n");
}

TEST(HttpFileCache, MaxEntriesEvictsTheLeastRecentlyUsed) {
  VigilServer s;
  for (const char* f : {"a", "b", "c"}) s.write(std::string("html/") + f, std::string(f) + "\n");
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf(port, "open_file_cache max=2;", ""))) << s.output();
  for (int round = 0; round < 2; ++round) {
    for (const char* f : {"a", "b", "c"}) {
      EXPECT_EQ(body_of(port, std::string("/") + f), std::string(f) + "\n") << f << round;
    }
  }
  // Three names round-robin through two entries: every lookup missed.
  EXPECT_EQ(metric(port, "vigil_http_open_file_cache_misses_total"), 6u);
  EXPECT_EQ(metric(port, "vigil_http_open_file_cache_hits_total"), 0u);
  EXPECT_EQ(body_of(port, "/c"), "c\n");
  EXPECT_EQ(body_of(port, "/b"), "b\n");
  EXPECT_EQ(metric(port, "vigil_http_open_file_cache_hits_total"), 2u);
  EXPECT_EQ(body_of(port, "/a"), "a\n");  // evicts c
  EXPECT_EQ(body_of(port, "/c"), "c\n");
  EXPECT_EQ(metric(port, "vigil_http_open_file_cache_misses_total"), 8u);
}

std::string pattern(std::size_t n, char seed) {
  std::string out(n, '\0');
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<char>(seed + (i * 131 + i / 4096) % 61);
  return out;
}

TEST(HttpFileCache, LargeFileToASlowReaderSurvivesEvictionAndReplacement) {
  VigilServer s;
  const std::string old_big = pattern(8 << 20, 'A');
  const std::string new_big = pattern((8 << 20) + 100, 'a');
  s.write("html/big.bin", old_big);
  s.write("html/other.txt", "other\n");
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf(port,
                           "open_file_cache max=1 inactive=1s;\nopen_file_cache_valid 1s;\n"
                           "sendfile on;",
                           "")))
      << s.output();
  // A reader with a small receive buffer that reads nothing for now: the
  // response stays in flight, its descriptor referenced.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_NE(fd, -1);
  int small = 4096;
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_TRUE(test::send_all(fd, simple_get("/big.bin")));
  ASSERT_TRUE(test::readable(fd, 5000));

  // The only entry is in use: another file is served without it, and the
  // big file replaced on disk is served new once valid has passed.
  EXPECT_EQ(body_of(port, "/other.txt"), "other\n");
  replace(s, "html/big.bin", new_big);
  EXPECT_TRUE(wait_until(
      [&] {
        return get(port, "HEAD /big.bin HTTP/1.1\r\nHost: x\r\n\r\n", true)
                   .header("content-length") == std::to_string(new_big.size());
      },
      5000));
  test::Response fresh = get(port, simple_get("/big.bin"));
  EXPECT_EQ(fresh.body.size(), new_big.size());
  EXPECT_TRUE(fresh.body == new_big);

  // The slow reader gets every byte of the file it asked for.
  std::string all;
  while (all.find("\r\n\r\n") == std::string::npos) {
    std::string more = test::read_n(fd, 1, 5000);
    if (more.empty()) break;
    all += more;
  }
  const std::size_t end = all.find("\r\n\r\n");
  ASSERT_NE(end, std::string::npos) << all;
  EXPECT_NE(all.find("Content-Length: " + std::to_string(old_big.size())), std::string::npos);
  all += test::read_n(fd, old_big.size() - (all.size() - end - 4), 20000);
  ::close(fd);
  const std::string body = all.substr(end + 4);
  EXPECT_EQ(body.size(), old_big.size());
  EXPECT_TRUE(body == old_big) << "the old file, intact";
  // And the file is served (and cached) normally afterwards.
  EXPECT_EQ(body_of(port, "/other.txt"), "other\n");
}

TEST(HttpFileCache, RangeAndConditionalRequestsUseTheCachedFile) {
  VigilServer s;
  s.write("html/r.txt", "0123456789");
  struct timeval times[2] = {{1600000000, 0}, {1600000000, 0}};
  ASSERT_EQ(::utimes(s.path("html/r.txt").c_str(), times), 0);
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf(port, "open_file_cache max=10;\nopen_file_cache_valid 1s;", "")))
      << s.output();
  test::Response first = get(port, simple_get("/r.txt"));
  ASSERT_EQ(first.status, 200);
  const std::string etag = first.header("etag");
  const std::string lm = first.header("last-modified");
  EXPECT_EQ(lm, "Sun, 13 Sep 2020 12:26:40 GMT");
  for (int i = 0; i < 2; ++i) {
    test::Response part = get(port, simple_get("/r.txt", "x", "Range: bytes=2-5\r\n"));
    EXPECT_EQ(part.status, 206);
    EXPECT_EQ(part.body, "2345");
    EXPECT_EQ(part.header("content-range"), "bytes 2-5/10");
    EXPECT_EQ(get(port, simple_get("/r.txt", "x", "If-Modified-Since: " + lm + "\r\n")).status,
              304);
    EXPECT_EQ(get(port, simple_get("/r.txt", "x", "If-None-Match: " + etag + "\r\n")).status, 304);
    test::Response head = get(port, "HEAD /r.txt HTTP/1.1\r\nHost: x\r\n\r\n", true);
    EXPECT_EQ(head.status, 200);
    EXPECT_EQ(head.header("content-length"), "10");
    EXPECT_EQ(head.header("etag"), etag);
  }
  EXPECT_GE(metric(port, "vigil_http_open_file_cache_hits_total"), 8u);

  // Changed in place (same inode), longer and newer: once checked again the
  // cached entry has the new size and mtime.
  s.write("html/r.txt", "abcdefghijklmnop");
  struct timeval later[2] = {{1700000000, 0}, {1700000000, 0}};
  ASSERT_EQ(::utimes(s.path("html/r.txt").c_str(), later), 0);
  EXPECT_TRUE(
      wait_until([&] { return get(port, simple_get("/r.txt")).header("etag") != etag; }, 5000));
  test::Response now = get(port, simple_get("/r.txt"));
  EXPECT_EQ(now.body, "abcdefghijklmnop");
  EXPECT_EQ(now.header("last-modified"), "Tue, 14 Nov 2023 22:13:20 GMT");
  EXPECT_EQ(get(port, simple_get("/r.txt", "x", "If-Modified-Since: " + lm + "\r\n")).status, 200);
  test::Response part = get(port, simple_get("/r.txt", "x", "Range: bytes=-3\r\n"));
  EXPECT_EQ(part.body, "nop");
  EXPECT_EQ(part.header("content-range"), "bytes 13-15/16");
}

TEST(HttpFileCache, DirectoryRedirectsAndIndexFiles) {
  VigilServer s;
  s.write("html/dir/index.html", "index\n");
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf(port, "open_file_cache max=10;\nopen_file_cache_valid 1s;", "")))
      << s.output();
  for (int i = 0; i < 2; ++i) {
    test::Response r = get(port, simple_get("/dir?q=1"));
    EXPECT_EQ(r.status, 301);
    EXPECT_NE(r.header("location").find("/dir/?q=1"), std::string::npos) << r.header("location");
    EXPECT_EQ(body_of(port, "/dir/"), "index\n");
    EXPECT_EQ(status_of(port, "/nodir/"), 404);
  }
  ASSERT_EQ(::unlink(s.path("html/dir/index.html").c_str()), 0);
  // The index file's entry is checked again after valid: the directory
  // has no index any more, which nginx forbids.
  EXPECT_TRUE(wait_until([&] { return status_of(port, "/dir/") == 403; }, 5000));
  EXPECT_TRUE(s.wait_output("directory index of")) << s.output();
}

TEST(HttpFileCache, SymlinkRulesHoldWithTheCache) {
  VigilServer s;
  s.write("html/real/f.txt", "real\n");
  s.write("html/on/plain.txt", "plain\n");
  s.write("html/off/plain.txt", "plain\n");
  for (const char* d : {"on", "off"}) {
    ASSERT_EQ(::symlink(s.path("html/real/f.txt").c_str(),
                        s.path(std::string("html/") + d + "/link.txt").c_str()),
              0);
  }
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf(port,
                           "open_file_cache max=10;\nopen_file_cache_valid 1s;\n"
                           "open_file_cache_errors on;",
                           "location /on/ { disable_symlinks on; }\n"
                           "location /off/ { disable_symlinks off; }\n")))
      << s.output();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(status_of(port, "/on/link.txt"), 403) << i;
    EXPECT_EQ(body_of(port, "/off/link.txt"), "real\n") << i;
    EXPECT_EQ(body_of(port, "/on/plain.txt"), "plain\n") << i;
  }
  // A cached plain file replaced by a link: refused once checked again.
  ASSERT_EQ(::symlink(s.path("html/real/f.txt").c_str(), s.path("html/on/new.lnk").c_str()), 0);
  ASSERT_EQ(::rename(s.path("html/on/new.lnk").c_str(), s.path("html/on/plain.txt").c_str()), 0);
  EXPECT_TRUE(wait_until([&] { return status_of(port, "/on/plain.txt") == 403; }, 5000));
  EXPECT_EQ(status_of(port, "/on/plain.txt"), 403);
}

TEST(HttpFileCache, ReloadStartsWithNewTables) {
  VigilServer s;
  s.write("html/f.txt", "before\n");
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf(port, "open_file_cache max=10;\nopen_file_cache_valid 60s;", ""),
                      "master_process on;\nworker_processes 1;"))
      << s.output();
  ASSERT_TRUE(wait_until([&] { return body_of(port, "/f.txt") == "before\n"; }, 5000));
  replace(s, "html/f.txt", "after\n");
  EXPECT_EQ(body_of(port, "/f.txt"), "before\n") << "cached for 60 s";
  s.signal(SIGHUP);
  // The new worker's table is empty: it opens the file as it is now (the
  // old table's 60 s cannot have passed).
  EXPECT_TRUE(wait_until([&] { return body_of(port, "/f.txt") == "after\n"; }, 8000)) << s.output();
}

}  // namespace
}  // namespace vigil
