// Debian's stock configuration, as the nginx package installs it
// (/etc/nginx/nginx.conf with sites-available/default; .ci/run installs
// nginx-light): it loads and serves, with only what a test must change —
// the module include taken out, logs, pid and the listen port moved into
// the test's directory, and the document root pointed at a page of ours.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "integration/http_harness.h"

namespace vigil::test {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `text` with every line that contains `needle` replaced by `with`, but for
// comments (the stock files carry commented examples).
std::string replace_lines(const std::string& text, const std::string& needle,
                          const std::string& with) {
  std::istringstream in(text);
  std::string out;
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(" \t");
    const bool comment = first != std::string::npos && line[first] == '#';
    out += (!comment && line.find(needle) != std::string::npos ? with : line) + "\n";
  }
  return out;
}

TEST(HttpDebianConf, TheStockConfigurationLoadsAndServes) {
  const std::string stock = read_text("/etc/nginx/nginx.conf");
  const std::string site = read_text("/etc/nginx/sites-available/default");
  ASSERT_NE(stock.find("http {"), std::string::npos) << "Debian's nginx package is not installed";
  ASSERT_NE(site.find("server {"), std::string::npos);
  ASSERT_NE(stock.find("gzip on;"), std::string::npos);  // the point: it compresses

  VigilServer server;
  const int port = free_port();
  const std::string dir = server.dir();
  server.write("www/index.html", std::string(4000, 'a') + "\n");
  std::string s = replace_lines(site, "listen 80", "listen 127.0.0.1:" + std::to_string(port) + " default_server;");
  s = replace_lines(s, "listen [::]:80", "");
  s = replace_lines(s, "root /var/www/html", "root " + dir + "/www;");
  server.write("sites-enabled/default", s);

  std::string conf = replace_lines(stock, "modules-enabled", "");
  conf = replace_lines(conf, "include /etc/nginx/sites-enabled/", "include " + dir + "/sites-enabled/*;");
  conf = replace_lines(conf, "access_log", "access_log " + dir + "/logs/access.log;");
  conf = replace_lines(conf, "error_log", "error_log stderr info;");
  conf = replace_lines(conf, "pid ", "pid " + dir + "/logs/vigil.pid;");
  conf = replace_lines(conf, "user ", "");
  conf = "daemon off;\nmaster_process off;\n" + conf;
  ASSERT_TRUE(server.start_raw(conf)) << server.output();

  Response r = get(port, simple_get("/", "localhost"));
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "text/html");  // /etc/nginx/mime.types
  EXPECT_EQ(r.body.size(), 4001u);
  r = get(port, simple_get("/", "localhost", "Accept-Encoding: gzip\r\n"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-encoding"), "gzip");
  EXPECT_LT(r.body.size(), 200u);
  // try_files $uri $uri/ =404
  EXPECT_EQ(get(port, simple_get("/nope", "localhost")).status, 404);
}

}  // namespace
}  // namespace vigil::test
