// The http { server { location } } configuration: defaults, inheritance,
// the server tables, location lookup, and the errors nginx would report.
#include <gtest/gtest.h>

#include <string>

#include "http/log/access_log.h"
#include "http/core/conf.h"
#include "http/core/request.h"
#include "http/core/servers.h"
#include "http/core/types.h"
#include "server/modules.h"
#include "unit/http/http_conf_fixture.h"

namespace vigil::http {
namespace {

using HttpConf = testing::HttpConfTest;

TEST_F(HttpConf, NoHttpBlockNoServers) {
  auto r = load("events {}\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(http_servers(*r.value()), nullptr);
}

TEST_F(HttpConf, NginxDefaults) {
  const HttpServers* s = servers("server { listen 127.0.0.1:8080; }");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->servers.size(), 1u);
  const HttpSrvConf& srv = *s->servers[0];
  EXPECT_EQ(srv.client_header_timeout, 60000u);
  EXPECT_EQ(srv.client_header_buffer_size, 1024u);
  EXPECT_EQ(srv.large_buffers_num, 4u);
  EXPECT_EQ(srv.large_buffers_size, 8192u);
  const HttpLocConf& loc = *srv.loc;
  EXPECT_EQ(loc.root, "html");
  EXPECT_EQ(loc.index, std::vector<std::string>{"index.html"});
  EXPECT_FALSE(loc.sendfile);
  EXPECT_FALSE(loc.tcp_nopush);
  EXPECT_TRUE(loc.tcp_nodelay);
  EXPECT_EQ(loc.keepalive_timeout, 75000u);
  EXPECT_EQ(loc.keepalive_requests, 1000u);
  EXPECT_EQ(loc.client_max_body_size, 1024u * 1024u);
  EXPECT_EQ(loc.send_timeout, 60000u);
  EXPECT_EQ(loc.default_type, "text/plain");
  EXPECT_EQ(loc.types, nullptr);  // the built-in map
  ASSERT_EQ(loc.access_logs.size(), 1u);
  EXPECT_EQ(loc.access_logs[0]->path, "logs/access.log");
  EXPECT_EQ(loc.lingering_close, Lingering::kOn);
  EXPECT_EQ(loc.lingering_time, 30000u);
  EXPECT_EQ(loc.lingering_timeout, 5000u);
  ASSERT_EQ(s->addresses.size(), 1u);
  EXPECT_EQ(s->addresses[0]->listen.addr_text, "127.0.0.1:8080");
  EXPECT_EQ(s->addresses[0]->listen.backlog, 511);
}

TEST_F(HttpConf, InheritanceFromHttpToServerToLocation) {
  const HttpServers* s = servers(
      "sendfile on; keepalive_timeout 5s 4; root /srv; types { text/x-a a; } default_type x/y;\n"
      "client_header_timeout 3s;\n"
      "server { listen 127.0.0.1:1; tcp_nopush on;\n"
      "  location /a/ { root /other; sendfile off; }\n"
      "  location /b/ { }\n"
      "}\n");
  ASSERT_NE(s, nullptr);
  const HttpSrvConf& srv = *s->servers[0];
  EXPECT_EQ(srv.client_header_timeout, 3000u);
  EXPECT_TRUE(srv.loc->sendfile);
  EXPECT_TRUE(srv.loc->tcp_nopush);
  EXPECT_EQ(srv.loc->keepalive_timeout, 5000u);
  EXPECT_EQ(srv.loc->keepalive_header, 4000u);
  const HttpLocConf& a = find_location(srv, "/a/x");
  EXPECT_EQ(a.name, "/a/");
  EXPECT_EQ(a.root_path, "/other");
  EXPECT_FALSE(a.sendfile);
  EXPECT_TRUE(a.tcp_nopush);
  const HttpLocConf& b = find_location(srv, "/b/");
  EXPECT_EQ(b.root_path, "/srv");
  ASSERT_NE(b.types, nullptr);
  EXPECT_EQ(b.types->find("A"), "text/x-a");
  EXPECT_EQ(b.default_type, "x/y");
  EXPECT_EQ(b.keepalive_header, 4000u);
}

TEST_F(HttpConf, LocationLookupExactPrefixNested) {
  const HttpServers* s = servers(
      "server { listen 127.0.0.1:1;\n"
      "  location / { }\n"
      "  location /img/ { location /img/big/ { } location = /img/x { } }\n"
      "  location = / { }\n"
      "  location ^~ /static/ { }\n"
      "  location =/exact { }\n"
      "}\n");
  ASSERT_NE(s, nullptr);
  const HttpSrvConf& srv = *s->servers[0];
  EXPECT_TRUE(find_location(srv, "/").exact);
  EXPECT_EQ(find_location(srv, "/index.html").name, "/");
  EXPECT_EQ(find_location(srv, "/img/a.png").name, "/img/");
  EXPECT_EQ(find_location(srv, "/img/big/a.png").name, "/img/big/");
  EXPECT_TRUE(find_location(srv, "/img/x").exact);
  EXPECT_EQ(find_location(srv, "/img/xy").name, "/img/");
  EXPECT_EQ(find_location(srv, "/static/a").name, "/static/");
  EXPECT_TRUE(find_location(srv, "/exact").exact);
  EXPECT_EQ(find_location(srv, "/exactly").name, "/");
  // No "location /": the server level.
  const HttpServers* s2 = servers("server { listen 127.0.0.1:1; location /a { } }");
  ASSERT_NE(s2, nullptr);
  EXPECT_EQ(&find_location(*s2->servers[0], "/b"), s2->servers[0]->loc);
}

TEST_F(HttpConf, ServersGroupedByAddressWithDefaultAndNames) {
  const HttpServers* s = servers(
      "server { listen 127.0.0.1:1; server_name a.example; }\n"
      "server { listen 127.0.0.1:1 default_server; listen 127.0.0.1:2; server_name B.example; }\n"
      "server { listen 127.0.0.1:1; server_name *.wild.example www.tail.*; }\n"
      "server { listen 127.0.0.1:1; server_name .dot.example; }\n");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->addresses.size(), 2u);
  const HttpAddress& a1 = *s->addresses[0];
  EXPECT_EQ(a1.servers.size(), 4u);
  EXPECT_EQ(a1.default_server, s->servers[1]);
  EXPECT_EQ(&a1.find_server("a.example"), s->servers[0]);
  EXPECT_EQ(&a1.find_server("A.EXAMPLE"), s->servers[0]);
  EXPECT_EQ(&a1.find_server("b.example"), s->servers[1]);
  EXPECT_EQ(&a1.find_server("x.wild.example"), s->servers[2]);
  EXPECT_EQ(&a1.find_server("wild.example"), s->servers[1]);  // "*." needs a label
  EXPECT_EQ(&a1.find_server("www.tail.org"), s->servers[2]);
  EXPECT_EQ(&a1.find_server("dot.example"), s->servers[3]);
  EXPECT_EQ(&a1.find_server("a.dot.example"), s->servers[3]);
  EXPECT_EQ(&a1.find_server("unknown"), s->servers[1]);
  EXPECT_EQ(&a1.find_server(""), s->servers[1]);
  const HttpAddress& a2 = *s->addresses[1];
  EXPECT_EQ(a2.default_server, s->servers[1]);
}

TEST_F(HttpConf, FirstServerIsTheDefaultWithoutDefaultServer) {
  const HttpServers* s = servers("server { listen 127.0.0.1:1; } server { listen 127.0.0.1:1; }");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->addresses[0]->default_server, s->servers[0]);
}

TEST_F(HttpConf, ListenOptions) {
  const HttpServers* s = servers("server { listen 127.0.0.1:1 reuseport backlog=77 deferred; }");
  ASSERT_NE(s, nullptr);
  const ListenConf& l = s->addresses[0]->listen;
  EXPECT_TRUE(l.reuseport);
  EXPECT_TRUE(l.deferred);
  EXPECT_EQ(l.backlog, 77);
}

TEST_F(HttpConf, ErrorsAsNginxReportsThem) {
  EXPECT_NE(error("server { listen 127.0.0.1:1 default_server; }\n"
                  "server { listen 127.0.0.1:1 default_server; }")
                .find("a duplicate default server for 127.0.0.1:1 in conf/vigil.conf:4"),
            std::string::npos)
      << error(
             "server { listen 127.0.0.1:1 default_server; } server { listen 127.0.0.1:1 "
             "default_server; }");
  EXPECT_NE(
      error("server { listen 127.0.0.1:1 backlog=5; }\nserver { listen 127.0.0.1:1 reuseport; }")
          .find("duplicate listen options for 127.0.0.1:1"),
      std::string::npos);
  EXPECT_NE(error("server { listen 127.0.0.1:1; listen 127.0.0.1:1; }").find("a duplicate listen"),
            std::string::npos);
  EXPECT_NE(error("server { listen 127.0.0.1:1 bogus; }").find("invalid parameter \"bogus\""),
            std::string::npos);
  EXPECT_NE(error("server { listen nowhere; }").find("listen"), std::string::npos);
  EXPECT_NE(error("server { location ~ \\.php($ { } }")
                .find("pcre2_compile() failed: missing closing parenthesis in \"\\.php($\""),
            std::string::npos)
      << error("server { location ~ \\.php($ { } }");
  EXPECT_NE(error("server { location /a/ { location /b/ { } } }")
                .find("location \"/b/\" is outside location \"/a/\""),
            std::string::npos);
  EXPECT_NE(error("server { location /a { } location /a { } }").find("duplicate location \"/a\""),
            std::string::npos);
  EXPECT_NE(error("server { location a { } }").find("must start with \"/\""), std::string::npos);
  EXPECT_NE(error("location / { }").find("\"location\" directive is not allowed here"),
            std::string::npos);
  EXPECT_NE(error("server { server_name ~^(re$; }").find("pcre2_compile() failed"),
            std::string::npos);
  EXPECT_NE(error("access_log logs/a.log main;").find("unknown log format \"main\""),
            std::string::npos);
  EXPECT_NE(error("error_page 99 /x;").find("must be between 300 and 599"), std::string::npos);
  EXPECT_NE(error("index /a.html b.html;")
                .find("only the last index in \"index\" directive should be absolute"),
            std::string::npos);
  EXPECT_NE(servers("index a.html /b.html;"), nullptr);
  EXPECT_NE(error("error_page 404 example;").find("error_page \"example\" must be a path"),
            std::string::npos);
  EXPECT_NE(servers("error_page 404 =301 https://example.com/x;"), nullptr);
  EXPECT_NE(error("sendfile maybe;").find("it must be \"on\" or \"off\""), std::string::npos);
  EXPECT_NE(error("large_client_header_buffers 4 0;").find("invalid value \"0\""),
            std::string::npos);
  // As nginx: the large buffers are at least connection_pool_size (512).
  EXPECT_NE(error("server { listen 127.0.0.1:1; large_client_header_buffers 4 256; }")
                .find("the \"large_client_header_buffers\" size must be equal to or greater "
                      "than \"connection_pool_size\""),
            std::string::npos);
  EXPECT_NE(servers("connection_pool_size 128; client_header_buffer_size 128;\n"
                    "server { listen 127.0.0.1:1; large_client_header_buffers 5 256; }"),
            nullptr);
  EXPECT_NE(error("types { text/html; }").find("invalid number of arguments"), std::string::npos);
  EXPECT_NE(error("sendfile on; sendfile off;").find("\"sendfile\" directive is duplicate"),
            std::string::npos);
  EXPECT_EQ(error("server { listen 127.0.0.1:1; } server { listen *:1; }").find("(loaded)"),
            std::string::npos);
}

TEST_F(HttpConf, AccessLogsAreSharedByPath) {
  const HttpServers* s = servers(
      "access_log logs/a.log combined buffer=8k flush=2s;\n"
      "server { listen 127.0.0.1:1; location /x/ { access_log logs/b.log; } "
      "location /y/ { access_log off; } location /z/ { access_log logs/a.log; } }");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->access_logs.size(), 2u);
  EXPECT_EQ(s->access_logs[0]->path, "logs/a.log");
  EXPECT_EQ(s->access_logs[0]->buffer, 8192u);
  EXPECT_EQ(s->access_logs[0]->flush, 2000u);
  const HttpSrvConf& srv = *s->servers[0];
  auto indices = [](const HttpLocConf& loc) {
    std::vector<int> out;
    for (const auto& log : loc.access_logs) out.push_back(log->index);
    return out;
  };
  EXPECT_EQ(indices(*srv.loc), std::vector<int>{0});
  EXPECT_EQ(indices(find_location(srv, "/x/")), std::vector<int>{1});
  EXPECT_EQ(indices(find_location(srv, "/y/")), std::vector<int>{});
  EXPECT_EQ(indices(find_location(srv, "/z/")), std::vector<int>{0});
}

TEST_F(HttpConf, ErrorPagesAndHandlers) {
  const HttpServers* s = servers(
      "error_page 404 /404.html; error_page 500 502 =200 /oops.html;\n"
      "server { listen 127.0.0.1:1; location = /s { stub_status; } location = /m { metrics; }"
      " location /e/ { error_page 403 /f.html; } }");
  ASSERT_NE(s, nullptr);
  const HttpSrvConf& srv = *s->servers[0];
  ASSERT_NE(srv.loc->find_error_page(404), nullptr);
  EXPECT_EQ(srv.loc->find_error_page(502)->overwrite, 200);
  EXPECT_EQ(srv.loc->find_error_page(502)->uri, "/oops.html");
  // A level that sets error_page replaces the inherited list, as in nginx.
  EXPECT_EQ(find_location(srv, "/e/").find_error_page(404), nullptr);
  EXPECT_NE(find_location(srv, "/e/").find_error_page(403), nullptr);
  EXPECT_EQ(find_location(srv, "/s").content, &kStubStatusContent);
  EXPECT_EQ(find_location(srv, "/m").content, &kMetricsContent);
  EXPECT_EQ(srv.loc->content, nullptr);  // the content phase: static files
}

TEST_F(HttpConf, EmbeddedConfigurationServesHtmlWithItsMimeTypes) {
  // Under a prefix with no conf/mime.types the compiled-in copy is used.
  ConfLoadOptions o = server_load_options();
  auto r = Configuration::load(o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE(r.value()->used_embedded());
  bool embedded_types = false;
  for (const auto& src : r.value()->sources()) {
    if (src.path == "conf/mime.types (embedded)") embedded_types = true;
  }
  EXPECT_TRUE(embedded_types);
  const HttpServers* s = http_servers(*r.value());
  ASSERT_NE(s, nullptr);
  const HttpSrvConf& srv = *s->servers[0];
  EXPECT_EQ(s->addresses[0]->listen.addr_text, "127.0.0.1:8080");
  EXPECT_EQ(srv.loc->root_path, "html");
  ASSERT_NE(srv.loc->types, nullptr);
  EXPECT_EQ(srv.loc->types->find("css"), "text/css");
  EXPECT_EQ(find_location(srv, "/status").content, &kStubStatusContent);
  EXPECT_EQ(find_location(srv, "/metrics").content, &kMetricsContent);
  // A real file wins over the compiled-in copy.
  write("conf/mime.types", "types { x/y css; }\n");
  auto r2 = Configuration::load(o);
  ASSERT_TRUE(r2) << r2.status().message();
  EXPECT_EQ(http_servers(*r2.value())->servers[0]->loc->types->find("css"), "x/y");
}

TEST(HttpTypes, BuiltinAndCaseInsensitive) {
  EXPECT_EQ(TypesMap::builtin().find("html"), "text/html");
  EXPECT_EQ(TypesMap::builtin().find("HTML"), "text/html");
  EXPECT_EQ(TypesMap::builtin().find("nope"), "");
  EXPECT_EQ(TypesMap::builtin().find(""), "");
  TypesMap m;
  m.add("Txt", "text/plain");
  m.add("txt", "text/x-later");  // later wins
  m.finish();
  EXPECT_EQ(m.find("TXT"), "text/x-later");
  EXPECT_EQ(m.size(), 1u);
}

TEST(HttpAccessLog, EscapesAsNginx) {
  char out[64];
  std::string_view in("a\"b\\c\x01\xff ok", 10);
  char* end = escape_log_value(in, out);
  EXPECT_EQ(std::string(out, end), "a\\x22b\\x5Cc\\x01\\xFF ok");
}

// Accepted with nginx's checks; they size nothing.
TEST_F(HttpConf, PoolSizes) {
  EXPECT_NE(servers("connection_pool_size 512; request_pool_size 4k;\n"
                    "server { listen 127.0.0.1:1; connection_pool_size 1k; request_pool_size 8k; }"),
            nullptr);
  const std::pair<const char*, const char*> cases[] = {
      {"connection_pool_size 64;", "the pool size must be no less than 112"},
      {"request_pool_size 1000;", "the pool size must be a multiple of 16"},
      {"request_pool_size big;", "invalid value"},
      {"request_pool_size 4k; request_pool_size 8k;", "is duplicate"},
  };
  for (const auto& [text, what] : cases) {
    const std::string e = error(std::string("server { listen 127.0.0.1:1;\n") + text + " }");
    EXPECT_NE(e.find(what), std::string::npos) << text << " got: " << e;
    EXPECT_NE(e.find("vigil.conf:4"), std::string::npos) << text << " got: " << e;
  }
}

// The directives of the redirect and header reading rules, and their merge.
TEST_F(HttpConf, RedirectAndHeaderDirectives) {
  const HttpSrvConf* srv = server(
      "absolute_redirect off; ignore_invalid_headers off; keepalive_time 10s;\n"
      "server { listen 127.0.0.1:1; underscores_in_headers on; merge_slashes off;\n"
      " location /a { absolute_redirect on; server_name_in_redirect on; port_in_redirect off;"
      " keepalive_disable none; }\n"
      " location /b { keepalive_disable msie6 safari; } }");
  ASSERT_NE(srv, nullptr);
  EXPECT_FALSE(srv->ignore_invalid_headers);
  EXPECT_TRUE(srv->underscores_in_headers);
  EXPECT_FALSE(srv->merge_slashes);
  EXPECT_FALSE(srv->loc->absolute_redirect);
  EXPECT_EQ(srv->loc->keepalive_time, 10000u);
  EXPECT_EQ(srv->loc->keepalive_disable, HttpLocConf::kDisableMsie6);
  const HttpLocConf& a = find_location(*srv, "/a");
  EXPECT_TRUE(a.absolute_redirect);
  EXPECT_TRUE(a.server_name_in_redirect);
  EXPECT_FALSE(a.port_in_redirect);
  EXPECT_EQ(a.keepalive_disable, 0);
  EXPECT_EQ(a.keepalive_time, 10000u);
  EXPECT_EQ(find_location(*srv, "/b").keepalive_disable,
            HttpLocConf::kDisableMsie6 | HttpLocConf::kDisableSafari);
  EXPECT_NE(error("server { listen 127.0.0.1:1; keepalive_disable opera; }")
                .find("invalid value \"opera\""),
            std::string::npos);
}

// listen's port ranges and socket options (event/listen_conf.cc, shared by
// stream and mail).
TEST_F(HttpConf, ListenRangesAndSocketOptions) {
  const HttpServers* s = servers(
      "server { listen 127.0.0.1:8182-8184 sndbuf=32k rcvbuf=64k so_keepalive=on bind;"
      " listen [::1]:9000 ipv6only=off; }");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->addresses.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    const ListenConf& l = s->addresses[static_cast<std::size_t>(i)]->listen;
    EXPECT_EQ(l.addr_text, "127.0.0.1:" + std::to_string(8182 + i));
    EXPECT_EQ(l.sndbuf, 32768);
    EXPECT_EQ(l.rcvbuf, 65536);
    EXPECT_TRUE(l.so_keepalive);
  }
  EXPECT_EQ(s->addresses[3]->listen.addr_text, "[::1]:9000");
  EXPECT_FALSE(s->addresses[3]->listen.ipv6only);
  const std::pair<const char*, const char*> cases[] = {
      {"listen 127.0.0.1:9-8;", "invalid port range"},
      {"listen 127.0.0.1:0-8;", "invalid port range"},
      {"listen 127.0.0.1:1-70000;", "invalid port range"},
      {"listen 127.0.0.1:1 sndbuf=x;", "invalid sndbuf \"x\""},
      {"listen 127.0.0.1:1 rcvbuf=0;", "invalid rcvbuf \"0\""},
      {"listen 127.0.0.1:1 ipv6only=maybe;", "invalid ipv6only flags"},
      {"listen 127.0.0.1:1 so_keepalive=30m::10;", "invalid so_keepalive value"},
  };
  for (const auto& [text, what] : cases) {
    const std::string e = error(std::string("server {\n") + text + " }");
    EXPECT_NE(e.find(what), std::string::npos) << text << " got: " << e;
    EXPECT_NE(e.find("vigil.conf:4"), std::string::npos) << text << " got: " << e;
  }
}

}  // namespace
}  // namespace vigil::http
