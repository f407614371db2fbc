// disable_symlinks through the real vigil binary: a symbolic link in the
// path is served with off, refused with 403 with on (a linked file and a
// linked directory), and with if_not_owner only when the link's owner differs
// from its target's; a rule of the server level holds in the locations that
// set none; rewrite's file tests (-f, -e...) see a refused link as missing;
// a name ending in '/' needs a directory; a from= part that is the whole
// name leaves nothing to check.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "http_harness.h"

namespace vigil {
namespace {

using test::get;
using test::simple_get;
using test::VigilServer;

std::string conf(int port, const std::string& locations) {
  return "access_log off;\nserver {\n  listen 127.0.0.1:" + std::to_string(port) +
         ";\n  root html;\n" + locations + "\n}\n";
}

void make_links(VigilServer& s) {
  s.write("html/real/f.txt", "real\n");
  for (const char* loc : {"off", "on", "owner", "from"}) {
    const std::string dir = std::string("html/") + loc;
    s.write(dir + "/plain.txt", "plain\n");
    ASSERT_EQ(::symlink(s.path("html/real/f.txt").c_str(), s.path(dir + "/link.txt").c_str()), 0);
    ASSERT_EQ(::symlink(s.path("html/real").c_str(), s.path(dir + "/dir").c_str()), 0);
  }
}

int status_of(int port, const std::string& path) {
  return get(port, simple_get(path)).status;
}

TEST(HttpSymlinks, OffFollowsOnRefuses) {
  VigilServer s;
  make_links(s);
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf(port,
                           "location /off/ { disable_symlinks off; }\n"
                           "location /on/ { disable_symlinks on; }\n"
                           "location /from/ { disable_symlinks on from=$document_root; }\n")))
      << s.output();
  EXPECT_EQ(get(port, simple_get("/off/link.txt")).body, "real\n");
  EXPECT_EQ(status_of(port, "/off/dir/f.txt"), 200);
  EXPECT_EQ(status_of(port, "/on/plain.txt"), 200);
  EXPECT_EQ(status_of(port, "/on/link.txt"), 403);
  EXPECT_EQ(status_of(port, "/on/dir/f.txt"), 403);
  EXPECT_EQ(status_of(port, "/on/missing.txt"), 404);
  EXPECT_EQ(status_of(port, "/from/plain.txt"), 200);
  EXPECT_EQ(status_of(port, "/from/link.txt"), 403);
  EXPECT_TRUE(s.wait_output("link.txt\" failed (40: ")) << s.output();
}

TEST(HttpSymlinks, TheServersRuleIsInheritedUnlessALocationSetsOne) {
  VigilServer s;
  make_links(s);
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf(port,
                           "disable_symlinks on;\n"
                           "location /on/ { location /on/dir/ { } }\n"
                           "location /off/ { disable_symlinks off; }\n")))
      << s.output();
  EXPECT_EQ(status_of(port, "/on/plain.txt"), 200);
  EXPECT_EQ(status_of(port, "/on/link.txt"), 403) << "the server's rule in a location";
  EXPECT_EQ(status_of(port, "/on/dir/f.txt"), 403) << "and in the location nested in it";
  EXPECT_EQ(status_of(port, "/owner/link.txt"), 403) << "and at the server level itself";
  EXPECT_EQ(get(port, simple_get("/off/link.txt")).body, "real\n");
  EXPECT_EQ(status_of(port, "/off/dir/f.txt"), 200);
}

TEST(HttpSymlinks, FromSkipsTheCheckOfItsPart) {
  // The prefix itself reached through a link: refused when checked from
  // "/", served when from= covers it.
  VigilServer s;
  s.write("html/real/f.txt", "real\n");
  ASSERT_EQ(::symlink(s.path("html/real").c_str(), s.path("html/linked").c_str()), 0);
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf(port,
                           "location /a/ { root html/linked; disable_symlinks on; }\n"
                           "location /b/ { root html/linked; disable_symlinks on "
                           "from=$document_root; }\n")))
      << s.output();
  // Real directories and files below the linked root.
  ASSERT_EQ(::mkdir(s.path("html/real/a").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(s.path("html/real/b").c_str(), 0755), 0);
  s.write("html/real/a/g.txt", "g\n");
  s.write("html/real/b/g.txt", "g\n");
  EXPECT_EQ(status_of(port, "/b/g.txt"), 200);
  EXPECT_EQ(status_of(port, "/a/g.txt"), 403);
}

TEST(HttpSymlinks, IfNotOwnerComparesTheOwners) {
  VigilServer s;
  make_links(s);
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf(port, "location /owner/ { disable_symlinks if_not_owner; }\n")))
      << s.output();
  // Same owner (the test's user owns link and target): followed.
  EXPECT_EQ(status_of(port, "/owner/link.txt"), 200);
  EXPECT_EQ(status_of(port, "/owner/dir/f.txt"), 200);
  // A link owned by someone else than its target: refused. Changing a
  // link's owner needs root; as another user, link to a file root owns.
  if (::geteuid() == 0) {
    ASSERT_EQ(::lchown(s.path("html/owner/link.txt").c_str(), 65534, 65534), 0);
    EXPECT_EQ(status_of(port, "/owner/link.txt"), 403);
  } else {
    ASSERT_EQ(::symlink("/etc/hostname", s.path("html/owner/root.txt").c_str()), 0);
    EXPECT_EQ(status_of(port, "/owner/root.txt"), 403);
  }
}

TEST(HttpSymlinks, RewriteFileTestsApplyTheRule) {
  // As nginx: the file test opens by the location's rule, so a refused link
  // is not a file (-f false, !-e true) and the static handler answers 403.
  VigilServer s;
  make_links(s);
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf(port,
                           "location /on/ { disable_symlinks on;\n"
                           "  if (-f $request_filename) { return 204; } }\n"
                           "location /owner/ { disable_symlinks if_not_owner;\n"
                           "  if (-f $request_filename) { return 204; } }\n"
                           "location /from/ { disable_symlinks on;\n"
                           "  if (!-e $request_filename) { return 410; } }\n"
                           "location /off/ { if (-f $request_filename) { return 204; } }\n")))
      << s.output();
  EXPECT_EQ(status_of(port, "/on/plain.txt"), 204);
  EXPECT_EQ(status_of(port, "/on/link.txt"), 403);
  EXPECT_EQ(status_of(port, "/owner/link.txt"), 204) << "same owner: followed";
  EXPECT_EQ(status_of(port, "/from/link.txt"), 410);
  EXPECT_EQ(status_of(port, "/from/plain.txt"), 200);
  EXPECT_EQ(status_of(port, "/off/link.txt"), 204);
}

TEST(HttpSymlinks, ANameEndingInSlashMustBeADirectory) {
  // alias html/owner/link.txt/: the link names a file, so "link.txt/" is
  // not found (nginx: ENOTDIR, 404) under if_not_owner as when off.
  VigilServer s;
  make_links(s);
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf(port,
                           "location ~ ^/(.+/)tailowner$ { disable_symlinks if_not_owner;\n"
                           "  alias html/$1; }\n"
                           "location ~ ^/(.+/)tailoff$ { alias html/$1; }\n")))
      << s.output();
  EXPECT_EQ(status_of(port, "/owner/link.txt/tailoff"), 404);
  EXPECT_EQ(status_of(port, "/owner/link.txt/tailowner"), 404);
  EXPECT_EQ(status_of(port, "/owner/plain.txt/tailowner"), 404);
}

TEST(HttpSymlinks, FromTheWholeNameChecksNothing) {
  // from=$document_root where the alias names the file itself: the whole
  // path is the unchecked part, so a link there is followed.
  VigilServer s;
  make_links(s);
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf(port,
                           "location ~ ^/exact/(.+)$ { disable_symlinks on from=$document_root;\n"
                           "  alias html/$1; }\n")))
      << s.output();
  EXPECT_EQ(get(port, simple_get("/exact/on/link.txt")).body, "real\n");
  EXPECT_EQ(status_of(port, "/exact/on/plain.txt"), 200);
}

}  // namespace
}  // namespace vigil
