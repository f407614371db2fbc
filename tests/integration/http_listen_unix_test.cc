// "listen unix:path" in http and stream: a real vigil on unix-domain
// sockets, the address variables such a connection has, set_real_ip_from
// "unix:", keep-alive (no TCP options on the socket), the socket file's mode,
// and the file's life: kept across a reload that still names it, removed by
// one that does not and when the server stops.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "integration/http_harness.h"
#include "test_process.h"
#include "test_util.h"

namespace vigil::test {
namespace {

bool exists(const std::string& path) {
  struct stat st{};
  return ::lstat(path.c_str(), &st) == 0;
}

const char* kShow =
    "    add_header X-IP $remote_addr;\n"
    "    add_header X-SA $server_addr;\n"
    "    add_header X-Ports \"[$server_port][$remote_port]\";\n";

TEST(HttpListenUnix, ServesWithTheAddressesOfAUnixConnection) {
  VigilServer s;
  s.write("html/index.html", "hello\n");
  const std::string sock = s.path("h.sock");
  ASSERT_TRUE(s.start("access_log off;\nserver {\n  listen unix:" + sock +
                      ";\n  listen 127.0.0.1:0;\n  location / {\n" + kShow + "  }\n}\n"))
      << s.output();
  struct stat st{};
  ASSERT_EQ(::stat(sock.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0666u);  // workers running as another user can use it

  // Two requests on one connection: keep-alive sets no TCP option on it.
  Client c(sock);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(c.send(simple_get("/")));
    Response r = c.read_response();
    ASSERT_EQ(r.status, 200) << s.output();
    EXPECT_EQ(r.body, "hello\n");
    EXPECT_EQ(r.headers["x-ip"], "unix:");
    EXPECT_EQ(r.headers["x-sa"], "unix:" + sock);
    EXPECT_EQ(r.headers["x-ports"], "[][]");
  }
  EXPECT_EQ(s.output().find("TCP_NODELAY"), std::string::npos) << s.output();

  // The same server on TCP has its ports.
  Response t = get(s.port_of("127.0.0.1"), simple_get("/"));
  ASSERT_EQ(t.status, 200);
  EXPECT_EQ(t.headers["x-ip"], "127.0.0.1");
  EXPECT_NE(t.headers["x-ports"], "[][]");
  EXPECT_EQ(t.headers["x-ports"].find("[]"), std::string::npos);

  EXPECT_EQ(s.stop(), 0);
  EXPECT_FALSE(exists(sock)) << "the socket file outlived the server";
}

TEST(HttpListenUnix, RealIpTrustsUnixPeers) {
  VigilServer s;
  s.write("html/t/index.html", "t\n");
  const std::string sock = s.path("r.sock");
  ASSERT_TRUE(s.start("access_log off;\nserver {\n  listen unix:" + sock +
                      ";\n  listen 127.0.0.1:0;\n  location /t/ {\n"
                      "    set_real_ip_from unix:;\n    add_header X-IP $remote_addr;\n  }\n}\n"))
      << s.output();
  const std::string req = "GET /t/ HTTP/1.1\r\nHost: x\r\nX-Real-IP: 192.0.2.1\r\n\r\n";
  Client c(sock);
  ASSERT_TRUE(c.ok() && c.send(req));
  Response r = c.read_response();
  ASSERT_EQ(r.status, 200) << s.output();
  EXPECT_EQ(r.headers["x-ip"], "192.0.2.1");
  // A TCP peer is not in the list: its own address stays.
  Response t = get(s.port_of("127.0.0.1"), req);
  ASSERT_EQ(t.status, 200);
  EXPECT_EQ(t.headers["x-ip"], "127.0.0.1");
}

TEST(HttpListenUnix, ReloadKeepsTheSocketItNamesAndRemovesTheOthers) {
  VigilServer s;
  s.write("html/index.html", "hello\n");
  const std::string a = s.path("a.sock");
  const std::string b = s.path("b.sock");
  auto conf = [&](bool with_b) {
    return "daemon off;\nmaster_process on;\nworker_processes 1;\nerror_log stderr info;\n"
           "pid logs/vigil.pid;\nevents {" +
           with_test_backend("") + "\n}\nhttp {\n  access_log off;\n  server {\n    listen unix:" +
           a + ";\n" + (with_b ? "    listen unix:" + b + ";\n" : "") + "  }\n}\n";
  };
  ASSERT_TRUE(s.start_raw(conf(true), "running:")) << s.output();
  ino_t inode_a = 0;
  {
    struct stat st{};
    ASSERT_EQ(::stat(a.c_str(), &st), 0);
    inode_a = st.st_ino;
    ASSERT_TRUE(exists(b));
  }

  s.write_conf(conf(false));
  s.signal(SIGHUP);
  ASSERT_TRUE(s.wait_output_count("running:", 2)) << s.output();
  EXPECT_TRUE(wait_for([&] { return !exists(b); }, 5000)) << "b.sock outlived its listen";
  struct stat st{};
  ASSERT_EQ(::stat(a.c_str(), &st), 0);
  EXPECT_EQ(st.st_ino, inode_a) << "a.sock was not kept across the reload";
  Client c(a);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send(simple_get("/")));
  EXPECT_EQ(c.read_response().body, "hello\n") << s.output();

  EXPECT_EQ(s.stop(), 0);
  EXPECT_FALSE(exists(a));
}

TEST(HttpListenUnix, StreamListensAndTrustsUnixPeers) {
  VigilServer s;
  const std::string plain = s.path("s1.sock");
  const std::string pp = s.path("s2.sock");
  const int p1 = free_port();
  const int p2 = free_port();
  ASSERT_TRUE(s.start_raw(
      "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
      "events {" + with_test_backend("") + "\n}\nstream {\n"
      "  server { listen unix:" + plain + "; return \"[$remote_addr]\"; }\n"
      "  server { listen unix:" + pp + " proxy_protocol; set_real_ip_from unix:;\n"
      "           return \"[$remote_addr][$proxy_protocol_addr]\"; }\n"
      "  server { listen 127.0.0.1:" + std::to_string(p1) + "; proxy_pass unix:" + plain + "; }\n"
      "  server { listen 127.0.0.1:" + std::to_string(p2) + "; proxy_pass unix:" + pp +
      "; proxy_protocol on; }\n}\n"))
      << s.output();
  const int direct = connect_unix(plain);
  ASSERT_NE(direct, -1);
  EXPECT_EQ(read_n(direct, 64), "[unix:]");
  ::close(direct);
  const int via = connect_loopback(p1);
  ASSERT_NE(via, -1);
  EXPECT_EQ(read_n(via, 64), "[unix:]") << s.output();
  ::close(via);
  // Through the proxy with a PROXY header: the trusted unix peer's header
  // names the client.
  const int trusted = connect_loopback(p2);
  ASSERT_NE(trusted, -1);
  EXPECT_EQ(read_n(trusted, 64), "[127.0.0.1][127.0.0.1]") << s.output();
  ::close(trusted);
  EXPECT_EQ(s.stop(), 0);
  EXPECT_FALSE(exists(plain));
  EXPECT_FALSE(exists(pp));
}

TEST(HttpListenUnix, ConfigurationErrors) {
  VigilServer s;
  const std::string long_path = "/tmp/" + std::string(120, 'x') + ".sock";
  auto [rc, out] = check_http_conf(s, "server { listen unix:" + long_path + "; }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("too long path in the unix domain socket"), std::string::npos) << out;
  EXPECT_NE(out.find("t.conf:3"), std::string::npos) << out;

  std::tie(rc, out) = check_http_conf(s, "server { listen unix:" + s.path("x.sock") + " reuseport; }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("reuseport is not supported for the unix domain socket"), std::string::npos)
      << out;
  EXPECT_NE(out.find("t.conf:3"), std::string::npos) << out;
}

}  // namespace
}  // namespace vigil::test
