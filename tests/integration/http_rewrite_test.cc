// Regular-expression locations and server names, the rewrite module
// (rewrite, set, if, break, return), named locations and alias over real
// sockets, with what nginx 1.22 answers for the same configuration.
#include <gtest/gtest.h>

#include <string>

#include "integration/http_harness.h"

namespace vigil::test {
namespace {

class HttpRewrite : public ::testing::Test {
 protected:
  bool start(const std::string& server_body, const std::string& http = "",
             const std::string& names = "localhost") {
    port_ = free_port();
    server_.write("html/index.html", "index\n");
    server_.write("html/file.txt", "file\n");
    server_.write("html/a/b.txt", "ab\n");
    server_.write("data/img/cat.png", "cat\n");
    server_.write("data/site/index.html", "site\n");
    server_.write("data/site/sub/f.txt", "sub\n");
    return server_.start(http + "\nserver { listen 127.0.0.1:" + std::to_string(port_) +
                         "; server_name " + names + "; root html; access_log off;\n" +
                         server_body + "\n}");
  }
  Response request(const std::string& target, const std::string& host = "localhost",
                   const std::string& extra = "") {
    return get(port_, simple_get(target, host, extra));
  }
  std::string body(const std::string& target, const std::string& host = "localhost") {
    Response r = request(target, host);
    EXPECT_TRUE(r.complete) << target;
    return std::to_string(r.status) + " " + r.body;
  }
  VigilServer server_;
  int port_ = 0;
};

TEST_F(HttpRewrite, RegexLocationsInNginxOrder) {
  ASSERT_TRUE(start(R"(
    location / { return 200 "prefix $uri\n"; }
    location = /exact.php { return 200 "exact\n"; }
    location ^~ /static/ { return 200 "static\n"; }
    location /app/ {
      location ~ \.js$ { return 200 "nested js\n"; }
      return 200 "app\n";
    }
    location ~ \.php$ { return 200 "php $uri\n"; }
    location ~* \.PNG$ { return 200 "png\n"; }
    location ~ ^/app/.*\.css$ { return 200 "app css\n"; }
    location ~ ^/img/(?<base>[a-z]+)\.(gif|jpg)$ { return 200 "img $1 $2 $base\n"; }
  )")) << server_.output();
  EXPECT_EQ(body("/x"), "200 prefix /x\n");
  EXPECT_EQ(body("/exact.php"), "200 exact\n");
  EXPECT_EQ(body("/other.php"), "200 php /other.php\n");
  EXPECT_EQ(body("/static/a.php"), "200 static\n");  // ^~: no regex after it
  EXPECT_EQ(body("/A.PnG"), "200 png\n");            // ~*: any case
  EXPECT_EQ(body("/app/a.js"), "200 nested js\n");   // the nested regex first
  EXPECT_EQ(body("/app/a.css"), "200 app css\n");    // then the server's, in order
  EXPECT_EQ(body("/app/a.txt"), "200 app\n");        // else the longest prefix
  EXPECT_EQ(body("/img/cat.gif"), "200 img cat gif cat\n");
  EXPECT_EQ(body("/img/Cat.gif"), "200 prefix /img/Cat.gif\n");  // ~ is case-sensitive
  // The regex sees the normalised path.
  EXPECT_EQ(body("/x/../y%2Ephp"), "200 php /y.php\n");
}

// $request_filename: the file the URI names under root or alias (nginx's
// ngx_http_map_uri_to_path), as `if (-f ...)` tests it.
TEST_F(HttpRewrite, RequestFilenameNamesTheUrisFile) {
  ASSERT_TRUE(start(R"(
    location /a/ {
      if (-f $request_filename) { return 200 "file $request_filename\n"; }
      return 200 "none $request_filename\n";
    }
    location /img/ {
      alias data/img/;
      if (-f $request_filename) { return 200 "file $request_filename\n"; }
      return 200 "none $request_filename\n";
    }
  )")) << server_.output();
  EXPECT_EQ(body("/a/b.txt"), "200 file " + server_.path("html/a/b.txt") + "\n");
  EXPECT_EQ(body("/a/nope"), "200 none " + server_.path("html/a/nope") + "\n");
  EXPECT_EQ(body("/img/cat.png"), "200 file " + server_.path("data/img/cat.png") + "\n");
}

TEST_F(HttpRewrite, RegexServerNames) {
  port_ = free_port();
  const std::string p = std::to_string(port_);
  ASSERT_TRUE(server_.start(
      "access_log off;\n"
      "server { listen 127.0.0.1:" + p + " default_server; return 200 \"default\\n\"; }\n"
      "server { listen 127.0.0.1:" + p + "; server_name *.wild.test;"
      " return 200 \"wildcard\\n\"; }\n"
      "server { listen 127.0.0.1:" + p + "; server_name ~^(?<sub>[a-z]+)\\.(wild|re)\\.test$;"
      " return 200 \"re $sub $2\\n\"; }\n"))
      << server_.output();
  EXPECT_EQ(body("/", "blog.re.test"), "200 re blog re\n");
  // Matched on the lower-cased name, as nginx's: groups are lower case.
  EXPECT_EQ(body("/", "Blog.RE.test"), "200 re blog re\n");
  EXPECT_EQ(body("/", "a.wild.test"), "200 wildcard\n");    // a wildcard before a regex
  EXPECT_EQ(body("/", "1.re.test"), "200 default\n");
}

// A request without a Host (HTTP/1.0) goes to the server named "" (or
// naming none), not the default one; $server_name drops a leading dot.
TEST_F(HttpRewrite, EmptyAndDotServerNames) {
  const std::string p = std::to_string(port_ = free_port());
  ASSERT_TRUE(server_.start(
      "server { listen 127.0.0.1:" + p + "; server_name first; return 200 \"first $server_name\\n\"; }\n"
      "server { listen 127.0.0.1:" + p + "; server_name \"\"; return 200 \"empty $server_name\\n\"; }\n"
      "server { listen 127.0.0.1:" + p + "; server_name .dot.test; return 200 \"dot $server_name\\n\"; }\n"))
      << server_.output();
  Response r = get(port_, "GET / HTTP/1.0\r\n\r\n");
  EXPECT_EQ(std::to_string(r.status) + " " + r.body, "200 empty \n");
  EXPECT_EQ(body("/", "other"), "200 first first\n");  // an unknown name: the default server
  EXPECT_EQ(body("/", "www.dot.test"), "200 dot dot.test\n");
  EXPECT_EQ(body("/", "dot.test"), "200 dot dot.test\n");
}

TEST_F(HttpRewrite, RewriteFlagsAndArguments) {
  ASSERT_TRUE(start(R"(
    rewrite ^/old/(.*)$ /new/$1 last;
    location / { return 200 "root $uri $args\n"; }
    location /new/ { return 200 "new $uri $args\n"; }
    location /chain/ {
      rewrite ^/chain/(\w+)$ /step/$1?s=1;
      rewrite ^/step/(\w+)$ /final/$1 last;
      return 200 "not reached\n";
    }
    location /final/ { return 200 "final $uri $args\n"; }
    location /noargs/ { rewrite ^ /final/x? last; }
    location /perm { rewrite ^/perm(.*)$ http://example.com/p$1 permanent; }
    location /red { rewrite ^/red(.*)$ /dest$1 redirect; }
    location /url { rewrite ^ https://example.com/u; }
    location /brk { rewrite ^/brk(.*)$ /file.txt break; return 200 "not reached\n"; }
    location /loop { rewrite ^ /loop last; }
    location /empty { rewrite ^ ""; }
  )")) << server_.output();
  EXPECT_EQ(body("/old/a?z=9"), "200 new /new/a z=9\n");  // server level, then the location
  EXPECT_EQ(body("/chain/abc"), "200 final /final/abc s=1\n");
  EXPECT_EQ(body("/chain/abc?k=2"), "200 final /final/abc s=1&k=2\n");  // theirs, then ours
  EXPECT_EQ(body("/noargs/?k=2"), "200 final /final/x \n");              // '?' drops them
  Response r = request("/perm/a?q=1");
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.header("location"), "http://example.com/p/a?q=1");
  r = request("/red/x");
  EXPECT_EQ(r.status, 302);
  EXPECT_EQ(r.header("location"), "http://localhost:" + std::to_string(port_) + "/dest/x");
  r = request("/url");
  EXPECT_EQ(r.status, 302);  // a URL replacement redirects whatever the flag
  EXPECT_EQ(r.header("location"), "https://example.com/u");
  EXPECT_EQ(body("/brk"), "200 file\n");  // break: the file of the new URI, no return
  r = request("/loop");
  EXPECT_EQ(r.status, 500);
  EXPECT_TRUE(server_.wait_output("rewrite or internal redirection cycle while processing \"/loop\""))
      << server_.output();
  EXPECT_EQ(request("/empty").status, 500);
  EXPECT_TRUE(server_.wait_output("the rewritten URI has a zero length")) << server_.output();
}

// nginx's encoding rules for a replacement: a capture in the new arguments
// is encoded as an argument when the client's path was percent-encoded; a
// redirect decodes what its variables bring (a URL passed as an argument)
// but not where that would make it unsafe; literal text stays as written.
TEST_F(HttpRewrite, ReplacementEncoding) {
  ASSERT_TRUE(start(R"(
    location /cap { rewrite ^(.*) $1?c=$1; return 200 "uri:$uri args:$args\n"; }
    location /to { rewrite ^ $arg_r? redirect; }
    location /lit { rewrite ^ http://example.com/a%20%3Fb redirect; }
    location /rc { rewrite ^/rc(.*) http://example.com$1 redirect; }
  )")) << server_.output();
  // "%25" decodes to "%" in $uri; in the arguments the capture is "%25" again.
  EXPECT_EQ(body("/cap/%25?a=b"), "200 uri:/cap/% args:c=/cap/%25&a=b\n");
  EXPECT_EQ(body("/cap/x?a=b"), "200 uri:/cap/x args:c=/cap/x&a=b\n");  // nothing to encode
  Response r = request("/to?r=http%3A%2F%2Fexample.com%2F%3Ffrom%3Dx");
  EXPECT_EQ(r.status, 302);
  EXPECT_EQ(r.header("location"), "http://example.com/?from%3Dx");  // decoding ends at '?'
  r = request("/to?r=http%3A%2F%2Fexample.com%0D%0ASet-Cookie:%20a");
  EXPECT_EQ(r.status, 302);
  EXPECT_EQ(r.header("location"), "http://example.com%0D%0ASet-Cookie:%20a");  // no header split
  r = request("/lit");
  EXPECT_EQ(r.header("location"), "http://example.com/a%20%3Fb");  // literal: as written
  r = request("/rc/a%23b%25c");
  EXPECT_EQ(r.header("location"), "http://example.com/a%23b%25c");  // '#', '%' re-encoded
}

TEST_F(HttpRewrite, SetIfAndBreak) {
  server_.write("html/exec.sh", "#!/bin/sh\n");
  ASSERT_TRUE(start(R"(
    location /if/ {
      set $a "no";
      if ($arg_q = yes) { set $a "yes"; }
      if ($arg_q != yes) { set $a "$a-not"; }
      if ($http_x_agent ~* ^(curl)/(?<ver>[0-9.]+)$) { return 200 "agent $1 $ver a=$a\n"; }
      if ($http_x_agent !~ ^bot) { return 200 "not a bot a=$a\n"; }
      return 200 "bot a=$a\n";
    }
    location /files/ {
      if (-f $document_root/file.txt) { set $f "file"; }
      if (!-f $document_root/a) { set $f "$f nofile"; }
      if (-d $document_root/a) { set $f "$f dir"; }
      if (!-e $document_root/nope) { set $f "$f noent"; }
      if (-x $document_root/exec.sh) { set $f "$f exec"; }
      return 200 "$f\n";
    }
    location /value/ {
      if ($arg_v) { return 200 "true\n"; }
      return 200 "false\n";
    }
    location /brk/ { set $x 1; break; set $x 2; return 200 "not reached\n"; }
    location /ifcontent/ {
      if ($arg_p) { root data; }
      rewrite ^/ifcontent/(.*)$ /$1 break;
    }
  )")) << server_.output();
  ::chmod(server_.path("html/exec.sh").c_str(), 0755);
  EXPECT_EQ(body("/if/?q=yes"), "200 not a bot a=yes\n");
  EXPECT_EQ(body("/if/?q=no"), "200 not a bot a=no-not\n");
  Response r = request("/if/", "localhost", "X-Agent: CURL/8.1\r\n");
  EXPECT_EQ(r.body, "agent CURL 8.1 a=no-not\n");
  r = request("/if/", "localhost", "X-Agent: bot/1\r\n");
  EXPECT_EQ(r.body, "bot a=no-not\n");
  EXPECT_EQ(body("/files/"), "200 file nofile dir noent exec\n");
  EXPECT_EQ(body("/value/?v=1"), "200 true\n");
  EXPECT_EQ(body("/value/?v=0"), "200 false\n");
  EXPECT_EQ(body("/value/"), "200 false\n");
  // break stops the module's directives: the static file of the location.
  EXPECT_EQ(request("/brk/").status, 404);
  // An if block's settings are the request's when it holds (nginx's "if").
  EXPECT_EQ(body("/ifcontent/file.txt"), "200 file\n");
  EXPECT_EQ(body("/ifcontent/img/cat.png?p=1"), "200 cat\n");
}

// `set $args` (nginx's one changeable built-in besides $limit_rate): the
// request's arguments from then on, and the URI an upstream gets is r.uri
// escaped with them ($request_uri stays the client's).
TEST_F(HttpRewrite, SetArgsChangesTheArgumentsUpstreamsGet) {
  const std::string up = std::to_string(free_port());
  ASSERT_TRUE(start(
      R"(
    location /a { set $args $arg_c; return 200 "[$args] [$is_args] [$arg_c] [$query_string] $request_uri\n"; }
    location /p/ { set $args "x=$arg_c"; proxy_pass http://127.0.0.1:)" +
          up + R"(; }
    location /e/ { set $ARGS ""; proxy_pass http://127.0.0.1:)" +
          up + R"(; }
  )",
      "server { listen 127.0.0.1:" + up + "; access_log off; return 200 \"up $request_uri\\n\"; }"))
      << server_.output();
  EXPECT_EQ(body("/a?c=1&d=2"), "200 [1] [?] [] [1] /a?c=1&d=2\n");
  EXPECT_EQ(body("/a?f"), "200 [] [] [] [] /a?f\n");
  EXPECT_EQ(body("/p/x?c=5"), "200 up /p/x?x=5\n");
  // An empty $args: no '?' (nginx sends the arguments when there are some).
  EXPECT_EQ(body("/e/y%20z?f"), "200 up /e/y%20z\n");
}

TEST_F(HttpRewrite, NamedLocationsForTryFiles) {
  ASSERT_TRUE(start(R"(
    location / { try_files $uri $uri/ @fallback; }
    location /missing/ { try_files $uri @nowhere; }
    location @fallback { return 200 "fallback $uri $args\n"; }
  )")) << server_.output();
  EXPECT_EQ(body("/file.txt"), "200 file\n");
  EXPECT_EQ(body("/nope?x=1"), "200 fallback /nope x=1\n");
  EXPECT_EQ(request("/missing/a").status, 500);
  EXPECT_TRUE(server_.wait_output("could not find named location \"@nowhere\"")) << server_.output();
}

TEST_F(HttpRewrite, Alias) {
  ASSERT_TRUE(start(R"(
    location /i/ { alias data/img/; }
    location ~ ^/pic/(.+\.png)$ { alias data/img/$1; }
    location /s/ { alias data/site/; try_files $uri $uri/ =404; }
    location /v/ { root $arg_d; }
  )")) << server_.output();
  EXPECT_EQ(body("/i/cat.png"), "200 cat\n");
  EXPECT_EQ(body("/pic/cat.png"), "200 cat\n");
  EXPECT_EQ(request("/pic/dog.png").status, 404);
  EXPECT_EQ(body("/s/"), "200 site\n");
  EXPECT_EQ(body("/s/sub/f.txt"), "200 sub\n");
  EXPECT_EQ(request("/s/none").status, 404);
  // A root with variables, relative to the prefix.
  EXPECT_EQ(request("/v/img/cat.png?d=data").status, 404);
  server_.write("data/v/img/cat.png", "vcat\n");
  EXPECT_EQ(body("/v/img/cat.png?d=data"), "200 vcat\n");
}

TEST_F(HttpRewrite, ErrorPagesRunThroughThePhases) {
  ASSERT_TRUE(start(R"(
    location /named { error_page 404 = @fb; return 404; }
    location @fb { return 200 "named $uri\n"; }
    location /rw { error_page 404 /to-rewrite; return 404; }
    location /to-rewrite { rewrite ^ /file.txt break; }
    location /var { error_page 404 /page?$arg_a; return 404; }
    location /page { return 200 "page $args\n"; }
    location /twice { error_page 404 /missing-too; return 404; }
    location /secret { internal; return 200 "secret $uri\n"; }
    location /to-secret { error_page 404 /secret; return 404; }
    location /rw-secret { rewrite ^ /secret last; }
  )")) << server_.output();
  // internal: a client's request for it is a 404, a redirect reaches it.
  EXPECT_EQ(request("/secret").status, 404);
  EXPECT_EQ(body("/to-secret"), "404 secret /secret\n");
  EXPECT_EQ(body("/rw-secret"), "200 secret /secret\n");
  EXPECT_EQ(body("/named"), "200 named /named\n");  // "=": the page's own status
  // The page's location runs its rewrites: a 404 with the file the rewrite names.
  EXPECT_EQ(body("/rw"), "404 file\n");
  EXPECT_EQ(body("/var?a=b"), "404 page b\n");
  // A page that fails itself: its own status, the built-in page, no loop.
  Response r = request("/twice");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("<h1>404 Not Found</h1>"), std::string::npos) << r.body;
}

TEST_F(HttpRewrite, IndexNamesTheFileAndLogNotFound) {
  server_.write("html/d/localhost.html", "by name\n");
  ASSERT_TRUE(start(R"(
    add_header X-URI $uri;
    location /d/ { index $server_name.html; }
    location /quiet/ { log_not_found off; }
  )")) << server_.output();
  Response r = request("/");
  EXPECT_EQ(r.body, "index\n");
  EXPECT_EQ(r.header("x-uri"), "/index.html");  // $uri is the index file's
  r = request("/d/");
  EXPECT_EQ(r.body, "by name\n");
  EXPECT_EQ(r.header("x-uri"), "/d/localhost.html");
  EXPECT_EQ(request("/quiet/nope").status, 404);
  EXPECT_EQ(request("/loud-nope").status, 404);
  EXPECT_TRUE(server_.wait_output("loud-nope\" failed")) << server_.output();
  EXPECT_EQ(server_.output().find("quiet/nope"), std::string::npos) << server_.output();
}

TEST_F(HttpRewrite, TryFilesUnderARegexAlias) {
  ASSERT_TRUE(start(R"(
    location ~ ^/re/ { alias data/site; try_files $uri =404; }
  )")) << server_.output();
  server_.write("data/site/re/x.txt", "re x\n");
  EXPECT_EQ(body("/re/x.txt"), "200 re x\n");  // the alias, then the URI (nginx's add_uri_to_alias)
  EXPECT_EQ(request("/re/none").status, 404);
}

TEST_F(HttpRewrite, MapComputesOncePerRequest) {
  server_.write("conf/more.map", "/extra from-include;\n");
  ASSERT_TRUE(start(R"(
    location / { return 200 "cu=$connection_upgrade m=$m h=$h c=$chained\n"; }
  )",
                    R"(
    map $http_upgrade $connection_upgrade { default upgrade; '' close; }
    map $arg_k $chained { default d; 1 $m; 2 $later; \default $later; }
    map $uri $m {
      default none;
      /a exact-a;
      ~^/re/(?<tail>.+)$ "re:$1:$tail";
      ~*\.PNG$ image;
      \default escaped;
      include more.map;
    }
    map $http_x_host $h { hostnames; default nohost; *.example.com wild; www.test.* pre; exact.org ex; }
    map $arg_k $later { default later; \default escaped; }
  )")) << server_.output();
  EXPECT_EQ(body("/a"), "200 cu=close m=exact-a h=nohost c=d\n");
  EXPECT_EQ(request("/A").body, "cu=close m=exact-a h=nohost c=d\n");  // keys ignore case
  Response r = request("/re/xyz?k=1", "localhost", "Upgrade: websocket\r\nX-Host: a.b.Example.com\r\n");
  EXPECT_EQ(r.body, "cu=upgrade m=re:xyz:xyz h=wild c=re:xyz:xyz\n");
  r = request("/x.png?k=2", "localhost", "X-Host: www.test.net\r\n");
  EXPECT_EQ(r.body, "cu=close m=image h=pre c=later\n");
  r = request("/default?k=2", "localhost", "X-Host: exact.org.\r\n");
  EXPECT_EQ(r.body, "cu=close m=none h=ex c=later\n");
  // "\default" is the key "default", not the default.
  EXPECT_EQ(request("/?k=default").body, "cu=close m=none h=nohost c=escaped\n");
  EXPECT_EQ(request("/extra").body, "cu=close m=from-include h=nohost c=d\n");
}

TEST(HttpMapConf, ErrorsNameTheFileAndLine) {
  VigilServer server;
  const auto fails = [&](const std::string& http, const std::string& what) {
    const auto [rc, out] = check_http_conf(server, http);
    EXPECT_NE(rc, 0) << http;
    EXPECT_NE(out.find(what), std::string::npos) << out;
  };
  fails("map $uri $a { ~( x; }", "pcre2_compile() failed");
  fails("map $uri $a { default x; default y; }", "duplicate default map parameter");
  fails("map $uri $a { k v; K w; }", "conflicting parameter \"K\"");
  fails("map $uri $a { k v w; }", "invalid number of the map parameters");
  fails("map $uri $a { k $nosuch; }", "unknown \"nosuch\" variable in ");
  fails("map $uri $uri { }", "the duplicate \"uri\" variable");
  fails("map $nosuch $a { }", "unknown \"nosuch\" variable");
}

TEST_F(HttpRewrite, SplitClientsByHash) {
  ASSERT_TRUE(start(R"(
    location / { return 200 "$variant\n"; }
  )",
                    R"(
    split_clients $arg_id $variant { 50% a; 25.5% b; * c; }
  )")) << server_.output();
  // MurmurHash2 of the source decides, the same every time.
  int a = 0, b = 0, c = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string v = request("/?id=" + std::to_string(i)).body;
    EXPECT_EQ(request("/?id=" + std::to_string(i)).body, v);
    a += v == "a\n";
    b += v == "b\n";
    c += v == "c\n";
  }
  EXPECT_EQ(a + b + c, 200);
  EXPECT_GT(a, 70);  // about 100
  EXPECT_LT(a, 130);
  EXPECT_GT(b, 25);  // about 51
  EXPECT_GT(c, 25);  // about 49
}

TEST(HttpSplitClientsConf, Errors) {
  VigilServer server;
  const auto fails = [&](const std::string& http, const std::string& what) {
    EXPECT_FALSE(server.start(http + "\nserver { listen 127.0.0.1:" + std::to_string(free_port()) +
                              "; }"));
    EXPECT_NE(server.output().find(what), std::string::npos) << server.output();
  };
  fails("split_clients $uri $s { 60% a; 50% b; }", "percent total is greater than 100%");
  fails("split_clients $uri $s { 6x% a; }", "invalid percent value \"6x%\"");
  fails("split_clients $uri $s { 10% a b; }", "invalid number of arguments");
  fails("split_clients $uri $uri { * a; }", "the duplicate \"uri\" variable");
}

}  // namespace
}  // namespace vigil::test
