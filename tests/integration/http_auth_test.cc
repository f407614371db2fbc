// The access modules through the real vigil binary: auth_basic against
// htpasswd files made here with `openssl passwd` (and the {PLAIN}, {SHA},
// {SSHA} forms), read per request; satisfy all|any with allow/deny; realip
// (X-Real-IP, X-Forwarded-For with and without recursion, any header) and
// what sees the replaced address (variables, allow/deny, limit_req keys,
// the access log); autoindex in its four formats, compared byte for byte
// with real nginx on the same directory.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "integration/http_harness.h"
#include "integration/nginx_diff.h"
#include "test_process.h"

namespace vigil::test {
namespace {

std::string b64(const std::string& s) {
  static constexpr char k[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(s[i]) << 16) |
                       (static_cast<unsigned char>(s[i + 1]) << 8) |
                       static_cast<unsigned char>(s[i + 2]);
    for (int sh : {18, 12, 6, 0}) out += k[(v >> sh) & 63];
  }
  if (i < s.size()) {
    unsigned v = static_cast<unsigned char>(s[i]) << 16;
    if (i + 1 < s.size()) v |= static_cast<unsigned char>(s[i + 1]) << 8;
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += i + 1 < s.size() ? k[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string auth(const std::string& user, const std::string& password) {
  return "Authorization: Basic " + b64(user + ":" + password) + "\r\n";
}

// `openssl passwd <args> secret`, without its newline ("" when it failed).
std::string openssl_passwd(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"openssl", "passwd"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("secret");
  auto [rc, out] = run(argv);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return rc == 0 ? out : "";
}

class Auth : public ::testing::Test {
 protected:
  bool start(const std::string& server_body, const std::string& http = "") {
    port_ = free_port();
    server_.write("html/index.html", "SEETHIS");
    server_.write("html/p/index.html", "SEETHIS");
    return server_.start("access_log off;\n" + http + "server { listen 127.0.0.1:" +
                         std::to_string(port_) + "; root html;\n" + server_body + "}\n");
  }
  Response req(const std::string& target, const std::string& extra = "") {
    return get(port_, simple_get(target, "localhost", extra));
  }

  VigilServer server_;
  int port_ = 0;
};

TEST_F(Auth, EveryHashFormatOfTheUserFile) {
  const std::string apr1 = openssl_passwd({"-apr1", "-salt", "abcdefgh"});
  const std::string md5 = openssl_passwd({"-1", "-salt", "saltsalt"});
  const std::string sha256 = openssl_passwd({"-5", "-salt", "saltsalt"});
  const std::string sha512 = openssl_passwd({"-6", "-salt", "saltsalt"});
  ASSERT_FALSE(apr1.empty() || md5.empty() || sha256.empty() || sha512.empty());
  server_.write("conf/htpasswd",
                "# users\n\n"
                "apr1:" +
                    apr1 + "\n" + "md5:" + md5 + "\n" + "sha256:" + sha256 + "\n" +
                    "sha512:" + sha512 + "\r\n" +
                    "plain:{PLAIN}secret\n"
                    "sha:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n"
                    "ssha:{SSHA}yI6cZwQadOA1e+/f+T+H3eCQQhRzYWx0\n"
                    "broken:{SHA}_____Mm5Pz8GgiULbPgzG37mj9g=\n"
                    "last:{PLAIN}secret");
  ASSERT_TRUE(start("location / { auth_basic \"closed site\"; auth_basic_user_file htpasswd; }\n"))
      << server_.output();
  for (const char* user : {"apr1", "md5", "sha256", "sha512", "plain", "sha", "last"}) {
    const Response ok = req("/", auth(user, "secret"));
    EXPECT_EQ(ok.status, 200) << user;
    EXPECT_EQ(ok.body, "SEETHIS") << user;
    const Response bad = req("/", auth(user, "wrong"));
    EXPECT_EQ(bad.status, 401) << user;
    EXPECT_EQ(bad.header("www-authenticate"), "Basic realm=\"closed site\"") << user;
  }
  EXPECT_EQ(req("/", auth("ssha", "password")).status, 200) << "nginx's {SSHA} test value";
  EXPECT_EQ(req("/", auth("broken", "1")).status, 401);
  EXPECT_TRUE(server_.wait_output("user \"sha\": password mismatch, client: 127.0.0.1"))
      << server_.output();

  const Response none = req("/");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.header("www-authenticate"), "Basic realm=\"closed site\"");
  EXPECT_TRUE(server_.wait_output("no user/password was provided for basic authentication"));
  EXPECT_EQ(req("/", "Authorization: Bearer xyz\r\n").status, 401);
  EXPECT_EQ(req("/", "Authorization: Basic !!!\r\n").status, 401);
  EXPECT_EQ(req("/", auth("nobody", "secret")).status, 401);
  EXPECT_TRUE(server_.wait_output("user \"nobody\" was not found in \"" +
                                  server_.path("conf/htpasswd") + "\""))
      << server_.output();
  EXPECT_EQ(req("/", auth("users", "secret")).status, 401) << "a comment is no entry";
  EXPECT_EQ(req("/", auth("plain", "secret") + auth("plain", "secret")).status, 400)
      << "two Authorization fields: which one counts is ambiguous";
  EXPECT_TRUE(server_.wait_output("client sent duplicate header line: \"Authorization: Basic "));
}

TEST_F(Auth, TheFileIsReadForEveryRequest) {
  server_.write("conf/htpasswd", "u:{PLAIN}one\n");
  ASSERT_TRUE(start("auth_basic \"r\"; auth_basic_user_file htpasswd;\n")) << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send(simple_get("/", "localhost", auth("u", "one"))));
  EXPECT_EQ(c.read_response().status, 200);
  server_.write("conf/htpasswd", "u:{PLAIN}two\n");
  ASSERT_TRUE(c.send(simple_get("/", "localhost", auth("u", "one"))));
  EXPECT_EQ(c.read_response().status, 401) << "an edit takes effect at once";
  ASSERT_TRUE(c.send(simple_get("/", "localhost", auth("u", "two"))));
  EXPECT_EQ(c.read_response().status, 200);
  // A long file: the user's line far past the first read.
  std::string big;
  for (int i = 0; i < 5000; ++i) big += "user" + std::to_string(i) + ":{PLAIN}x\n";
  server_.write("conf/htpasswd", big + "u:{PLAIN}three");
  ASSERT_TRUE(c.send(simple_get("/", "localhost", auth("u", "three"))));
  EXPECT_EQ(c.read_response().status, 200);
}

TEST_F(Auth, MissingOrUnreadableFileOffAndVariables) {
  server_.write("conf/htpasswd", "u:{PLAIN}p\n");
  ::mkdir(server_.path("conf/adir").c_str(), 0755);
  ASSERT_TRUE(
      start("location / {\n"
            "  auth_basic \"r\"; auth_basic_user_file htpasswd;\n"
            "  location /p/ { auth_basic off; }\n"
            "}\n"
            "location /missing/ { auth_basic \"r\"; auth_basic_user_file nothere; }\n"
            "location /dir/ { auth_basic \"r\"; auth_basic_user_file adir; }\n"
            "location /var/ { auth_basic \"$arg_realm\"; auth_basic_user_file $arg_f; }\n"))
      << server_.output();
  EXPECT_EQ(req("/p/").status, 200) << "auth_basic off in the inner location";
  EXPECT_EQ(req("/missing/", auth("u", "p")).status, 403) << "nginx: a missing file is 403";
  EXPECT_TRUE(server_.wait_output("open() \"" + server_.path("conf/nothere") + "\" failed"))
      << server_.output();
  EXPECT_EQ(req("/dir/", auth("u", "p")).status, 500);
  EXPECT_TRUE(server_.wait_output("pread() \"" + server_.path("conf/adir") + "\" failed"))
      << server_.output();
  EXPECT_EQ(req("/var/x?f=htpasswd&realm=v", auth("u", "p")).status, 404) << "passed: no file";
  const Response r = req("/var/x?f=htpasswd&realm=v", auth("u", "q"));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.header("www-authenticate"), "Basic realm=\"v\"");
  EXPECT_EQ(req("/var/x?f=nx", auth("u", "p")).status, 403);
  EXPECT_EQ(req("/var/x?f=htpasswd&realm=off").status, 404) << "a realm of \"off\" turns it off";
}

TEST_F(Auth, AnErrorPageKeepsTheChallengeAndTheLogHasTheUser) {
  server_.write("conf/htpasswd", "alice:{PLAIN}p\n");
  server_.write("html/denied.html", "DENIED");
  port_ = free_port();
  ASSERT_TRUE(
      server_.start("log_format u \"$remote_user|$status\";\n"
                    "server { listen 127.0.0.1:" +
                    std::to_string(port_) +
                    "; root html;\n"
                    "  access_log logs/user.log u; access_log logs/combined.log;\n"
                    "  error_page 401 /denied.html;\n"
                    "  location / { auth_basic \"r\"; auth_basic_user_file htpasswd; }\n"
                    "  location = /denied.html { }\n"
                    "}\n"))
      << server_.output();
  const Response r = get(port_, simple_get("/"));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body, "DENIED");
  EXPECT_EQ(r.header("www-authenticate"), "Basic realm=\"r\"");
  EXPECT_EQ(get(port_, simple_get("/", "localhost", auth("alice", "p"))).status, 403)
      << "html/ has no index: the directory is forbidden";
  EXPECT_TRUE(wait_until(
      [&] {
        return server_.read("logs/user.log").find("alice|403\n") != std::string::npos &&
               server_.read("logs/combined.log").find("127.0.0.1 - alice [") != std::string::npos;
      },
      5000))
      << server_.read("logs/user.log") << server_.read("logs/combined.log");
  EXPECT_NE(server_.read("logs/user.log").find("-|401\n"), std::string::npos);
}

TEST_F(Auth, SatisfyAnyOrAll) {
  server_.write("conf/htpasswd", "u:{PLAIN}p\n");
  ASSERT_TRUE(
      start("auth_basic \"r\"; auth_basic_user_file htpasswd;\n"
            "location /any-deny/ { satisfy any; deny all; }\n"
            "location /any-allow/ { satisfy any; allow 127.0.0.1; deny all; }\n"
            "location /any-nomatch/ { satisfy any; allow 10.0.0.1; auth_basic off; }\n"
            "location /any-only-deny/ { satisfy any; deny all; auth_basic off; }\n"
            "location /all/ { satisfy all; allow 127.0.0.1; }\n"
            "location /all-deny/ { deny all; }\n"))
      << server_.output();
  const Response d = req("/any-deny/");
  EXPECT_EQ(d.status, 401) << "any: a 401 wins over a 403";
  EXPECT_EQ(d.header("www-authenticate"), "Basic realm=\"r\"");
  EXPECT_EQ(req("/any-deny/", auth("u", "p")).status, 404) << "the password lets it in";
  EXPECT_EQ(req("/any-allow/").status, 404) << "the address lets it in";
  EXPECT_EQ(req("/any-nomatch/").status, 404) << "no rule matched, auth off: nothing refuses";
  EXPECT_EQ(req("/any-only-deny/").status, 403);
  EXPECT_TRUE(server_.wait_output("access forbidden by rule, client: 127.0.0.1"))
      << server_.output();
  EXPECT_EQ(req("/all/").status, 401) << "all: the address is not enough";
  EXPECT_EQ(req("/all/", auth("u", "p")).status, 404);
  EXPECT_EQ(req("/all-deny/", auth("u", "p")).status, 403) << "all: allow/deny answers first";
}

class RealIp : public Auth {};

TEST_F(RealIp, TheHeaderNamesTheClientOfATrustedProxy) {
  ASSERT_TRUE(
      start("add_header X-IP $remote_addr always;\n"
            "add_header X-Port $remote_port always;\n"
            "add_header X-RIP $realip_remote_addr always;\n"
            "add_header X-RPort $realip_remote_port always;\n"
            "location / { }\n"
            "location /custom { real_ip_header X-Real-IP-Custom; }\n"
            "location /1 { real_ip_header X-Forwarded-For; real_ip_recursive off; }\n"
            "location /2 { real_ip_header X-Forwarded-For; real_ip_recursive on; }\n"
            "",
            "set_real_ip_from 127.0.0.1/32;\nset_real_ip_from 10.0.1.0/24;\n"))
      << server_.output();
  auto ip = [&](const std::string& target, const std::string& extra) {
    return req(target, extra).header("x-ip");
  };
  EXPECT_EQ(ip("/", "X-Real-IP: 192.0.2.1\r\n"), "192.0.2.1");
  EXPECT_EQ(ip("/", ""), "127.0.0.1");
  EXPECT_EQ(ip("/", "X-Real-IP: not-an-address\r\n"), "127.0.0.1");
  EXPECT_EQ(ip("/custom", "X-Real-IP-Custom: 192.0.2.1\r\n"), "192.0.2.1");
  EXPECT_EQ(ip("/1", "X-Forwarded-For: 10.0.0.1, 192.0.2.1\r\n"), "192.0.2.1");
  EXPECT_EQ(ip("/1", "X-Forwarded-For: 192.0.2.1, 10.0.1.1, 127.0.0.1\r\n"), "127.0.0.1");
  EXPECT_EQ(ip("/2", "X-Forwarded-For: 10.0.1.1, 192.0.2.1, 127.0.0.1\r\n"), "192.0.2.1");
  EXPECT_EQ(ip("/1", "X-Forwarded-For: 192.0.2.1\r\nX-Forwarded-For: 127.0.0.1, 10.0.1.1\r\n"),
            "10.0.1.1");
  EXPECT_EQ(ip("/2",
               "X-Forwarded-For: 10.0.1.1\r\nX-Forwarded-For: 192.0.2.1\r\n"
               "X-Forwarded-For: 127.0.0.1\r\n"),
            "192.0.2.1");

  const Response r = req("/2", "X-Forwarded-For: [2001:db8::1]:55\r\n");
  EXPECT_EQ(r.header("x-ip"), "2001:db8::1");
  EXPECT_EQ(r.header("x-port"), "55");
  EXPECT_EQ(r.header("x-rip"), "127.0.0.1");
  EXPECT_NE(r.header("x-rport"), "");
  EXPECT_NE(r.header("x-rport"), "55");

  // The next request of a kept-alive connection starts from the proxy again.
  Client c(port_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send(simple_get("/", "localhost", "X-Real-IP: 192.0.2.7\r\n")));
  EXPECT_EQ(c.read_response().header("x-ip"), "192.0.2.7");
  ASSERT_TRUE(c.send(simple_get("/")));
  EXPECT_EQ(c.read_response().header("x-ip"), "127.0.0.1");
}

TEST_F(RealIp, AccessLimitsAndTheLogSeeTheRealAddress) {
  port_ = free_port();
  const int pp_port = free_port();
  ASSERT_TRUE(
      server_.start("limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;\n"
                    "set_real_ip_from 127.0.0.1;\n"
                    "server { listen 127.0.0.1:" +
                    std::to_string(port_) +
                    "; root html;\n"
                    "  access_log logs/access.log;\n"
                    "  location /deny/ { deny 192.0.2.1; }\n"
                    "  location /limit/ { limit_req zone=one; }\n"
                    "}\n"
                    "server { listen 127.0.0.1:" +
                    std::to_string(pp_port) +
                    "; root html;\n"
                    "  real_ip_header proxy_protocol; deny 127.0.0.1;\n"
                    "}\n"))
      << server_.output();
  auto status = [&](const std::string& target, const std::string& ip) {
    return get(port_, simple_get(target, "localhost", "X-Real-IP: " + ip + "\r\n")).status;
  };
  EXPECT_EQ(status("/deny/", "192.0.2.1"), 403);
  EXPECT_TRUE(server_.wait_output("access forbidden by rule, client: 192.0.2.1"))
      << server_.output();
  EXPECT_EQ(status("/deny/", "192.0.2.2"), 404);
  EXPECT_EQ(status("/limit/", "192.0.2.10"), 404);
  EXPECT_EQ(status("/limit/", "192.0.2.10"), 503) << "the same client: limited";
  EXPECT_EQ(status("/limit/", "192.0.2.11"), 404) << "another client: its own key";
  EXPECT_EQ(get(pp_port, simple_get("/", "localhost", "X-Real-IP: 192.0.2.1\r\n")).status, 403)
      << "no PROXY protocol data: nothing changes";
  EXPECT_TRUE(wait_until(
      [&] { return server_.read("logs/access.log").find("192.0.2.11 - - [") != std::string::npos; },
      5000))
      << server_.read("logs/access.log");
}

TEST(AccessModulesConf, ErrorsNameTheFileAndLine) {
  VigilServer server;
  for (const char* bad : {"set_real_ip_from 1.2.3.4/40;", "set_real_ip_from no.such.host.invalid;",
                          "satisfy some;", "autoindex_format yaml;"}) {
    server.write("conf/t.conf", std::string("events {}\nhttp {\nserver {\n") + bad + "\n}\n}\n");
    auto [rc, out] = run({kVigil, "-p", server.dir(), "-c", "conf/t.conf", "-t"});
    EXPECT_NE(rc, 0) << bad;
    EXPECT_NE(out.find("t.conf:4"), std::string::npos) << bad << ": " << out;
  }
}

// autoindex against real nginx on the same directory: the listings' bytes.
class Autoindex : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vigil_autoindex_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ::chmod(root_.c_str(), 0755);
    const std::string d = root_ + "/d";
    for (const std::string& sub : {std::string(""), std::string("/sub"), std::string("/a b"),
                                   "/" + std::string(60, 'D'), std::string("/<&>")}) {
      ASSERT_EQ(::mkdir((d + sub).c_str(), 0755), 0) << sub;
    }
    auto file = [&](const std::string& name, const std::string& content) {
      std::ofstream(d + "/" + name, std::ios::binary) << content;
    };
    file("f.txt", std::string(42, 'x'));
    file("big", std::string(20000, 'b'));
    file("q\"<&>.txt", "");
    file("it's !*()~_-.x", "");
    file("co:lon", "");
    file(".hidden", "");
    file(std::string(60, 'l'), "");
    file("tab\there", "");
    file("u\xd1\x84\xd1\x84", "");
    ASSERT_EQ(::symlink("f.txt", (d + "/link").c_str()), 0);
    ASSERT_EQ(::symlink("nowhere", (d + "/broken").c_str()), 0);
    ::mkdir((root_ + "/withindex").c_str(), 0755);
    std::ofstream(root_ + "/withindex/index.html") << "INDEX";
  }
  void TearDown() override {
    if (!root_.empty()) run({"rm", "-rf", root_});
  }

  std::string locations() const {
    return "autoindex on;\n"
           "location /x/ { alias " +
           root_ +
           "/d/; autoindex_format xml; }\n"
           "location /j/ { alias " +
           root_ +
           "/d/; autoindex_format json; }\n"
           "location /p/ { alias " +
           root_ +
           "/d/; autoindex_format jsonp; }\n"
           "location /e/ { alias " +
           root_ +
           "/d/; autoindex_exact_size off; }\n"
           "location /off/ { alias " +
           root_ + "/d/; autoindex off; }\n";
  }

  std::string root_;
};

TEST_F(Autoindex, ListingsAreNginxsByteForByte) {
  NginxServer nginx;
  ASSERT_TRUE(nginx.start("access_log off;\nserver { listen 127.0.0.1:PORT; root " + root_ + ";\n" +
                          locations() + "}\n"))
      << nginx.error();
  // Vigil has no alias: the same directories through symbolic links.
  for (const char* l : {"x", "j", "p", "e", "off"}) {
    ASSERT_EQ(::symlink("d", (root_ + "/" + l).c_str()), 0);
  }
  VigilServer vigil;
  const int port = free_port();
  ASSERT_TRUE(vigil.start("access_log off;\nserver { listen 127.0.0.1:" + std::to_string(port) +
                          "; root " + root_ +
                          ";\nautoindex on;\n"
                          "location /x/ { autoindex_format xml; }\n"
                          "location /j/ { autoindex_format json; }\n"
                          "location /p/ { autoindex_format jsonp; }\n"
                          "location /e/ { autoindex_exact_size off; }\n"
                          "location /off/ { autoindex off; }\n}\n"))
      << vigil.output();
  for (const char* target : {"/d/", "/d/sub/", "/d/%3C&%3E/", "/x/", "/j/", "/p/?callback=cb.x_1",
                             "/p/?callback=", "/p/sub/?callback=f", "/e/", "/withindex/"}) {
    const Response n = get(nginx.port(), simple_get(target));
    const Response v = get(port, simple_get(target));
    EXPECT_EQ(n.status, 200) << target;
    EXPECT_FALSE(n.body.empty()) << target;
    EXPECT_EQ(v.status, n.status) << target;
    EXPECT_EQ(v.header("content-type"), n.header("content-type")) << target;
    EXPECT_EQ(v.body, n.body) << target;
  }
  EXPECT_EQ(get(port, simple_get("/p/?callback=a-b")).status, 400);
  EXPECT_TRUE(vigil.wait_output("client sent invalid callback name: \"a-b\"")) << vigil.output();
  EXPECT_EQ(get(port, simple_get("/off/")).status, 403);
  EXPECT_EQ(get(port, simple_get("/withindex/")).body, "INDEX") << "an index file comes first";
  const Response head = get(port, "HEAD /d/ HTTP/1.1\r\nHost: x\r\n\r\n", true);
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("content-type"), "text/html");
}

}  // namespace
}  // namespace vigil::test
