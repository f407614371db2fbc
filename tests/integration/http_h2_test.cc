// HTTP/2 through the real vigil binary: ALPN over TLS and prior knowledge in
// clear (curl, and Python's h2 for what curl does not do), every request
// through the same phases and modules as HTTP/1 (static files, return,
// variables, the proxy to an HTTP/1.1 backend with request bodies), many
// streams on one connection, flow control, and resets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proxy_backend.h"
#include "test_util.h"
#include "tls_harness.h"

namespace vigil {
namespace {

using test::TlsServer;

std::pair<int, std::string> h2peer(std::vector<std::string> args) {
  args.insert(args.begin(), {"/usr/bin/python3",
                             std::string(VIGIL_SOURCE_DIR) + "/tests/integration/h2_peer.py"});
  return test::run(args);
}

// curl over TLS with ALPN: the body, then "|<HTTP version>|<status>".
std::string curl_tls(TlsServer& s, int port, const std::string& path,
                     std::vector<std::string> extra = {"--http2"}) {
  std::vector<std::string> argv = {"curl",      "-sS",
                                   "--cacert",  s.ca(),
                                   "--resolve", "localhost:" + std::to_string(port) + ":127.0.0.1",
                                   "-w",        "|%{http_version}|%{http_code}"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("https://localhost:" + std::to_string(port) + path);
  return test::run(argv).second;
}

std::string curl_plain(int port, const std::string& path, std::vector<std::string> extra) {
  std::vector<std::string> argv = {"curl", "-sS", "-w", "|%{http_version}|%{http_code}"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("http://127.0.0.1:" + std::to_string(port) + path);
  return test::run(argv).second;
}

std::string md5_of(const std::string& text) {
  TlsServer tmp;
  tmp.write("x", text);
  auto [rc, out] = test::run({"md5sum", tmp.path("x")});
  return rc == 0 ? out.substr(0, 32) : "";
}

std::string tls_block(int port, const std::string& listen_flags, const std::string& extra) {
  return "server {\n  listen 127.0.0.1:" + std::to_string(port) + " ssl" + listen_flags +
         ";\n  server_name localhost;\n  root html;\n  ssl_certificate ../server.crt;\n"
         "  ssl_certificate_key ../server.key;\n" +
         extra + "\n}\n";
}

void start_tls(TlsServer& s, int port, const std::string& listen_flags, const std::string& extra,
               const std::string& more = "") {
  ASSERT_TRUE(s.pki_ok());
  s.write("html/index.html", "hello h2\n");
  ASSERT_TRUE(s.start("access_log off;\n" + tls_block(port, listen_flags, extra) + more))
      << s.output();
}

void start_plain(TlsServer& s, int port, const std::string& extra, const std::string& more = "") {
  s.write("html/index.html", "hello h2\n");
  ASSERT_TRUE(s.start("access_log off;\nserver {\n  listen 127.0.0.1:" + std::to_string(port) +
                      ";\n  http2 on;\n  root html;\n" + extra + "\n}\n" + more))
      << s.output();
}

TEST(Http2, AlpnChoosesH2WhereTheServerHasHttp2On) {
  TlsServer s;
  const int port = test::free_port();
  start_tls(s, port, "", "http2 on;");
  EXPECT_EQ(curl_tls(s, port, "/"), "hello h2\n|2|200");
  // A client that offers only HTTP/1.1 still gets it.
  EXPECT_EQ(curl_tls(s, port, "/", {"--http1.1"}), "hello h2\n|1.1|200");
}

TEST(Http2, ListenHttp2TurnsItOnForTheAddress) {
  TlsServer s;
  const int port = test::free_port();
  start_tls(s, port, " http2", "");
  EXPECT_EQ(curl_tls(s, port, "/"), "hello h2\n|2|200");
}

TEST(Http2, WithoutHttp2TheServerOffersOnlyHttp11) {
  TlsServer s;
  const int port = test::free_port();
  start_tls(s, port, "", "");
  EXPECT_EQ(curl_tls(s, port, "/"), "hello h2\n|1.1|200");
}

TEST(Http2, PriorKnowledgeInClearAndHttp11OnTheSamePort) {
  TlsServer s;
  const int port = test::free_port();
  start_plain(s, port, "");
  EXPECT_EQ(curl_plain(port, "/", {"--http2-prior-knowledge"}), "hello h2\n|2|200");
  EXPECT_EQ(curl_plain(port, "/", {}), "hello h2\n|1.1|200");
}

TEST(Http2, PriorKnowledgeIsRefusedWithoutHttp2) {
  TlsServer s;
  const int port = test::free_port();
  s.write("html/index.html", "hello h2\n");
  ASSERT_TRUE(s.start("access_log off;\nserver { listen 127.0.0.1:" + std::to_string(port) +
                      "; root html; }\n"))
      << s.output();
  // The preface is not an HTTP/1 request.
  const std::string out = curl_plain(port, "/", {"--http2-prior-knowledge"});
  EXPECT_EQ(out.find("hello h2"), std::string::npos) << out;
}

TEST(Http2, VariablesSayTheProtocol) {
  TlsServer s;
  const int port = test::free_port();
  start_tls(s, port, "",
            "http2 on;\nlocation /v { return 200 \"$http2 $server_protocol $request\\n\"; }");
  EXPECT_EQ(curl_tls(s, port, "/v?a=1"), "h2 HTTP/2.0 GET /v?a=1 HTTP/2.0\n|2|200");
  EXPECT_EQ(curl_tls(s, port, "/v", {"--http1.1"}), " HTTP/1.1 GET /v HTTP/1.1\n|1.1|200");

  TlsServer p;
  const int pport = test::free_port();
  start_plain(p, pport, "location /v { return 200 \"$http2 $server_protocol\\n\"; }");
  EXPECT_EQ(curl_plain(pport, "/v", {"--http2-prior-knowledge"}), "h2c HTTP/2.0\n|2|200");
}

TEST(Http2, ManyStreamsOnOneConnection) {
  TlsServer s;
  const int port = test::free_port();
  std::string big;
  for (int i = 0; big.size() < 1500000; ++i) big += "line " + std::to_string(i) + "\n";
  s.write("html/big.txt", big);
  start_tls(s, port, " http2", "");
  std::vector<std::string> args = {std::to_string(port), "--tls", s.ca(), "get"};
  for (int i = 0; i < 20; ++i) args.push_back(i % 4 == 0 ? "/big.txt" : "/index.html");
  args.push_back("/missing");
  auto [rc, out] = h2peer(args);
  ASSERT_EQ(rc, 0) << out;
  const std::string big_line = "/big.txt 200 " + std::to_string(big.size()) + " " + md5_of(big);
  const std::string small_line = "/index.html 200 9 " + md5_of("hello h2\n");
  std::size_t bigs = 0;
  std::size_t smalls = 0;
  for (std::size_t at = out.find(big_line); at != std::string::npos;
       at = out.find(big_line, at + 1))
    ++bigs;
  for (std::size_t at = out.find(small_line); at != std::string::npos;
       at = out.find(small_line, at + 1))
    ++smalls;
  EXPECT_EQ(bigs, 5u) << out;
  EXPECT_EQ(smalls, 15u) << out;
  EXPECT_NE(out.find("/missing 404 "), std::string::npos) << out;
}

TEST(Http2, ASmallWindowGetsTheWholeFile) {
  TlsServer s;
  const int port = test::free_port();
  std::string big(300000, 'x');
  for (std::size_t i = 0; i < big.size(); i += 7) big[i] = static_cast<char>('a' + i % 26);
  s.write("html/big.bin", big);
  start_plain(s, port, "");
  // A 1 KiB window: DATA goes out only as the client opens it.
  auto [rc, out] = h2peer({std::to_string(port), "--window", "1024", "get", "/big.bin"});
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "/big.bin 200 300000 " + md5_of(big) + "\n");
}

TEST(Http2, HeadAndNotModified) {
  TlsServer s;
  const int port = test::free_port();
  start_plain(s, port, "");
  auto [rc, out] = h2peer({std::to_string(port), "--headers", "head", "/index.html"});
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("h content-length: 9\n"), std::string::npos) << out;
  EXPECT_NE(out.find("/index.html 200 0 "), std::string::npos) << out;
  // No connection-specific field in an HTTP/2 head (RFC 9113 §8.2.2).
  EXPECT_EQ(out.find("h connection:"), std::string::npos) << out;
  EXPECT_EQ(out.find("h keep-alive:"), std::string::npos) << out;
}

TEST(Http2, CookieFieldsAreJoinedForHttp11) {
  TlsServer s;
  const int port = test::free_port();
  test::Backend b;
  start_plain(s, port,
              "location / { proxy_pass http://" + b.address() + "; proxy_set_header Host $host; }");
  auto [rc, out] = h2peer({std::to_string(port), "cookies", "/c"});
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("/c 200 "), std::string::npos) << out;
  EXPECT_EQ(b.last().header("cookie"), "a=1; b=2");
  EXPECT_EQ(b.last().target, "/c");
  EXPECT_EQ(b.last().header("host"), "localhost");
}

TEST(Http2, RequestBodiesReachAnHttp11Backend) {
  TlsServer s;
  const int port = test::free_port();
  test::Backend b([](test::BackendConn& c, const test::BackendRequest& r) {
    return c.send(test::backend_response(200, "got " + std::to_string(r.body.size())));
  });
  start_plain(s, port,
              "client_max_body_size 10m;\n"
              "location /buffered { proxy_pass http://" +
                  b.address() +
                  "; }\n"
                  "location /streamed { proxy_pass http://" +
                  b.address() +
                  "; proxy_request_buffering off; proxy_http_version 1.1; }\n"
                  "location /small { client_max_body_size 1k; proxy_pass http://" +
                  b.address() + "; }");
  std::string expect;
  const std::string pattern = "abcdefghijklmnopqrstuvwxyz";
  while (expect.size() < 1000000) expect += pattern;
  expect.resize(1000000);
  for (const std::string& path : std::vector<std::string>{"/buffered", "/streamed"}) {
    for (const bool length : {true, false}) {
      std::vector<std::string> args = {std::to_string(port), "post", path, "1000000"};
      if (!length) args.push_back("--no-length");
      auto [rc, out] = h2peer(args);
      ASSERT_EQ(rc, 0) << path << " " << length << ": " << out;
      EXPECT_EQ(out.substr(0, path.size() + 5), path + " 200 ") << out;
      const test::BackendRequest seen = b.last();
      EXPECT_EQ(seen.target, path);
      EXPECT_EQ(seen.body.size(), expect.size()) << path << " " << length;
      EXPECT_TRUE(seen.body == expect) << path << " " << length;
    }
  }
  auto [rc, out] = h2peer({std::to_string(port), "post", "/small", "2000"});
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out.substr(0, 11), "/small 413 ") << out;
}

TEST(Http2, RapidResetIsStoppedAndTheWorkerKeepsServing) {
  TlsServer s;
  const int port = test::free_port();
  test::Backend b;
  start_plain(s, port,
              "keepalive_requests 100000;\nlocation /p { proxy_pass http://" + b.address() + "; }");
  // A few streams opened and reset: a client navigating away. The
  // connection goes on.
  auto [rc, out] = h2peer({std::to_string(port), "reset-flood", "100", "/index.html"});
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("/index.html 200 9 "), std::string::npos) << out;
  EXPECT_EQ(out.find("goaway"), std::string::npos) << out;
  // CVE-2023-44487: a thousand at once, to a proxied location. The
  // connection is told to calm down (GOAWAY ENHANCE_YOUR_CALM, 0xb) and
  // closed; the worker serves the next one.
  auto [rc2, out2] = h2peer({std::to_string(port), "reset-flood", "1000", "/p"});
  ASSERT_EQ(rc2, 0) << out2;
  EXPECT_NE(out2.find("goaway 11"), std::string::npos) << out2;
  // "client sent too many streams at once", or, when the backend split the
  // input over more than a millisecond, "client caused too many stream resets".
  EXPECT_TRUE(s.wait_output("client sent too many stream") ||
              s.wait_output("client caused too many stream resets"))
      << s.output();
  // The same spread over rounds the server reads one by one: the reset
  // budget (500, then 100 a second) runs out instead.
  auto [rc3, out3] = h2peer({std::to_string(port), "reset-batches", "8", "100", "/index.html"});
  ASSERT_EQ(rc3, 0) << out3;
  EXPECT_NE(out3.find("goaway 11"), std::string::npos) << out3;
  EXPECT_TRUE(s.wait_output("client caused too many stream resets")) << s.output();
  EXPECT_EQ(curl_plain(port, "/", {"--http2-prior-knowledge"}), "hello h2\n|2|200");
  EXPECT_EQ(s.count("[alert]"), 0u) << s.output();
}

// Each attack on its own connection; afterwards a new connection is served.
TEST(Http2, FloodsCloseTheConnectionAndTheWorkerKeepsServing) {
  TlsServer s;
  const int port = test::free_port();
  start_plain(s, port, "");
  struct Case {
    const char* attack;
    const char* count;
    const char* answer;
  };
  for (const Case& c :
       {Case{"ping-flood", "100000", "closed"}, Case{"settings-flood", "100000", "closed"},
        // CVE-2024-27316's family: a header block never ended.
        Case{"continuation-flood", "10000", "closed"},
        // An HPACK bomb: a 4 KB table entry referenced 12,000
        // times is a head far over the limit (nginx's answer: the
        // connection ends with ENHANCE_YOUR_CALM).
        Case{"headers-bomb", "12000", "goaway 11"}}) {
    auto [rc, out] = h2peer({std::to_string(port), c.attack, c.count, "/index.html"});
    ASSERT_EQ(rc, 0) << c.attack << ": " << out;
    EXPECT_EQ(out, std::string(c.answer) + "\nserved\n") << c.attack;
  }
  EXPECT_EQ(s.count("[alert]"), 0u) << s.output();
}

TEST(Http2, AStalledReaderIsTimedOut) {
  TlsServer s;
  const int port = test::free_port();
  s.write("html/big.bin", std::string(200000, 'b'));
  start_plain(s, port, "send_timeout 1s;");
  // A zero window: the response cannot move, and send_timeout ends the
  // stream (RST_STREAM PROTOCOL_ERROR, nginx's code for a stream that
  // timed out) rather than hold it.
  auto [rc, out] = h2peer({std::to_string(port), "stall", "/big.bin", "10"});
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "reset /big.bin 1\n") << out;
  EXPECT_TRUE(s.wait_output("client timed out")) << s.output();
  EXPECT_EQ(curl_plain(port, "/", {"--http2-prior-knowledge"}), "hello h2\n|2|200");
}

// RFC 9113 §3.4: the preface MUST be followed by a SETTINGS frame, and an
// invalid preface is a connection error (nginx takes a request after a
// SETTINGS acknowledgement alone; docs/compatibility.md).
TEST(Http2, APrefaceWithoutSettingsIsAProtocolError) {
  TlsServer s;
  const int port = test::free_port();
  start_plain(s, port, "");
  auto [rc, out] = h2peer({std::to_string(port), "bad-preface"});
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "goaway 1\n");
  EXPECT_EQ(curl_plain(port, "/", {"--http2-prior-knowledge"}), "hello h2\n|2|200");
}

// /metrics counts HTTP/2: connections, streams, resets both ways, GOAWAYs.
TEST(Http2, MetricsCountConnectionsStreamsAndResets) {
  TlsServer s;
  const int port = test::free_port();
  start_plain(s, port, "keepalive_requests 3;\nlocation = /metrics { metrics; }");
  auto [rc, out] = h2peer({std::to_string(port), "get", "/", "/", "/"});
  ASSERT_EQ(rc, 0) << out;
  auto [rc2, out2] = h2peer({std::to_string(port), "reset-flood", "2", "/index.html"});
  ASSERT_EQ(rc2, 0) << out2;
  const std::string m = curl_plain(port, "/metrics", {});
  auto value = [&m](const std::string& name) {
    const std::size_t at = m.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stoll(m.substr(at + name.size() + 2));
  };
  EXPECT_EQ(value("vigil_http2_connections_total"), 2) << m;
  EXPECT_EQ(value("vigil_http2_streams_total"), 6) << m;
  EXPECT_EQ(value("vigil_http2_resets_received_total"), 2) << m;
  // keepalive_requests 3: each connection is ended by a GOAWAY.
  EXPECT_EQ(value("vigil_http2_goaways_sent_total"), 2) << m;
  EXPECT_GE(value("vigil_http2_resets_sent_total"), 0) << m;
}

TEST(Http2, ConfigurationErrors) {
  TlsServer s;
  for (const char* bad : {"http2 maybe;", "http2_body_preread_size x;", "http2_chunk_size 0;"}) {
    auto [rc, out] = test::check_http_conf(s, bad);
    EXPECT_NE(rc, 0) << bad;
    EXPECT_NE(out.find("[emerg]"), std::string::npos) << bad << ": " << out;
    EXPECT_NE(out.find("t.conf:3"), std::string::npos) << bad << ": " << out;
  }
  auto [rc, out] = test::check_http_conf(
      s,
      "http2 on; http2_max_concurrent_streams 64; http2_chunk_size 16k; "
      "http2_body_preread_size 128k; http2_recv_buffer_size 64k; http2_idle_timeout 3m;");
  EXPECT_EQ(rc, 0) << out;
}

}  // namespace
}  // namespace vigil
