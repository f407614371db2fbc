// HTTPS through the real vigil binary: versions with curl, openssl s_client
// and our own client, ALPN, SNI, certificate choice, keep-alive and
// pipelining, plain text and garbage on the TLS port, the handshake timeout,
// resets, and a large file to a slow reader.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "test_util.h"
#include "tls_harness.h"

namespace vigil {
namespace {

using test::Response;
using test::TlsClient;
using test::TlsOptions;
using test::TlsServer;

void start(TlsServer& s, int port, const std::string& extra = "", const std::string& more = "") {
  ASSERT_TRUE(s.pki_ok());
  s.write("html/index.html", "hello tls\n");
  ASSERT_TRUE(s.start("access_log off;\n" + test::tls_server_block(port, extra) + more))
      << s.output();
}

Response get_over_tls(int port, const TlsOptions& o = {}, const std::string& host = "localhost") {
  TlsClient c(port, o);
  if (!c.handshake()) return {};
  if (!c.send(test::simple_get("/", host))) return {};
  return c.read_response();
}

TEST(Tls, CurlTls12AndTls13VerifyTheChain) {
  TlsServer s;
  int port = test::free_port();
  start(s, port);
  const std::string url = "https://localhost:" + std::to_string(port) + "/";
  const std::string resolve = "localhost:" + std::to_string(port) + ":127.0.0.1";
  for (const char* v : {"--tlsv1.3", "--tls-max"}) {
    std::vector<std::string> argv = {"curl", "-sS", "--cacert", s.ca(), "--resolve", resolve, v};
    if (std::string(v) == "--tls-max") argv.push_back("1.2");
    argv.insert(argv.end(), {"-w", "|%{http_code}|%{ssl_verify_result}", url});
    auto [rc, out] = test::run(argv);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(out, "hello tls\n|200|0") << v;
  }
}

TEST(Tls, OpensslSClientTls12AndTls13) {
  TlsServer s;
  int port = test::free_port();
  start(s, port);
  for (const std::string v : {"-tls1_2", "-tls1_3"}) {
    auto [rc, out] = test::run(
        {"sh", "-c",
         "printf 'GET / HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' | openssl s_client -brief "
         "-ign_eof -connect 127.0.0.1:" +
             std::to_string(port) + " -servername localhost -CAfile " + s.ca() + " " + v +
             " 2>&1"});
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find(v == "-tls1_2" ? "Protocol version: TLSv1.2" : "Protocol version: TLSv1.3"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("Verification: OK"), std::string::npos) << out;
    EXPECT_NE(out.find("HTTP/1.1 200 OK"), std::string::npos) << out;
    EXPECT_NE(out.find("hello tls"), std::string::npos) << out;
  }
}

TEST(Tls, Tls11AndDisabledVersionsAreRefused) {
  TlsServer s;
  int port = test::free_port();
  start(s, port);
  TlsClient old(port, {.min_version = TLS1_VERSION, .max_version = TLS1_1_VERSION});
  EXPECT_FALSE(old.handshake());
  EXPECT_TRUE(s.wait_output("SSL_do_handshake() failed")) << s.output();
  // The server keeps serving.
  EXPECT_EQ(get_over_tls(port).body, "hello tls\n");
  s.stop();

  TlsServer only13;
  int port13 = test::free_port();
  start(only13, port13, "ssl_protocols TLSv1.3;");
  TlsClient v12(port13, {.max_version = TLS1_2_VERSION});
  EXPECT_FALSE(v12.handshake());
  TlsClient v13(port13);
  ASSERT_TRUE(v13.handshake()) << v13.error();
  EXPECT_EQ(v13.version(), "TLSv1.3");
}

TEST(Tls, AlpnChoosesHttp11AndRefusesOnlyH2) {
  TlsServer s;
  int port = test::free_port();
  start(s, port);
  TlsClient both(port, {.alpn = {"h2", "http/1.1"}});
  ASSERT_TRUE(both.handshake()) << both.error();
  EXPECT_EQ(both.alpn(), "http/1.1");
  TlsClient h2(port, {.alpn = {"h2"}});
  EXPECT_FALSE(h2.handshake());
  EXPECT_NE(h2.error().find("no application protocol"), std::string::npos) << h2.error();
  TlsClient none(port);
  ASSERT_TRUE(none.handshake());
  EXPECT_EQ(none.alpn(), "");
}

TEST(Tls, SniChoosesTheServerBlockAndItsCertificate) {
  TlsServer s;
  ASSERT_TRUE(test::make_cert(s.dir(), "other", "other.test", "ca"));
  s.write("html2/index.html", "other site\n");
  int port = test::free_port();
  const std::string other =
      "server {\n  listen 127.0.0.1:" + std::to_string(port) +
      " ssl;\n  server_name other.test *.wild.test;\n  root html2;\n"
      "  ssl_certificate ../other.crt;\n  ssl_certificate_key ../other.key;\n}\n";
  start(s, port, "", other);

  TlsClient a(port, {.sni = "other.test", .ca_file = s.ca()});
  ASSERT_TRUE(a.handshake()) << a.error();
  EXPECT_EQ(a.peer_cn(), "other.test");
  ASSERT_TRUE(a.send(test::simple_get("/", "other.test")));
  EXPECT_EQ(a.read_response().body, "other site\n");

  TlsClient w(port, {.sni = "x.wild.test"});
  ASSERT_TRUE(w.handshake()) << w.error();
  EXPECT_EQ(w.peer_cn(), "other.test") << "a wildcard server_name chooses the block too";

  TlsClient b(port, {.sni = "localhost", .ca_file = s.ca()});
  ASSERT_TRUE(b.handshake()) << b.error();
  EXPECT_EQ(b.peer_cn(), "localhost");

  TlsClient none(port);  // no SNI: the default server
  ASSERT_TRUE(none.handshake()) << none.error();
  EXPECT_EQ(none.peer_cn(), "localhost");
}

TEST(Tls, RsaAndEcdsaCertificatesChosenByTheClient) {
  TlsServer s;
  ASSERT_TRUE(test::make_cert(s.dir(), "rsa", "localhost", "ca", /*rsa=*/true));
  int port = test::free_port();
  start(s, port, "ssl_certificate ../rsa.crt;\n  ssl_certificate_key ../rsa.key;");
  for (int max : {TLS1_2_VERSION, TLS1_3_VERSION}) {
    TlsClient ec(port, {.max_version = max, .ca_file = s.ca()});
    ASSERT_TRUE(ec.handshake()) << ec.error();
    EXPECT_EQ(ec.peer_key_type(), "EC");
    TlsClient rsa(
        port,
        {.max_version = max, .ca_file = s.ca(), .sigalgs = "rsa_pss_rsae_sha256:rsa_pkcs1_sha256"});
    ASSERT_TRUE(rsa.handshake()) << rsa.error();
    EXPECT_EQ(rsa.peer_key_type(), "RSA");
  }
}

TEST(Tls, KeepAliveAndPipeliningThroughOpensslBuffers) {
  TlsServer s;
  int port = test::free_port();
  // A 1k header buffer: one TLS record of pipelined requests is decrypted
  // into OpenSSL's buffer and read 1k at a time; the rest never raises a
  // readiness event (posted_next and the ready flag carry it).
  start(s, port, "client_header_buffer_size 1k;");
  TlsClient c(port);
  ASSERT_TRUE(c.handshake()) << c.error();
  std::string batch;
  const int kRequests = 60;
  for (int i = 0; i < kRequests; ++i) batch += test::simple_get("/?n=" + std::to_string(i));
  ASSERT_GT(batch.size(), 2048u);
  ASSERT_TRUE(c.send(batch));
  for (int i = 0; i < kRequests; ++i) {
    Response r = c.read_response();
    ASSERT_TRUE(r.complete) << "response " << i;
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "hello tls\n");
  }
  // And the connection stays usable for one more.
  ASSERT_TRUE(c.send(test::simple_get("/")));
  EXPECT_EQ(c.read_response().body, "hello tls\n");
}

TEST(Tls, PlainHttpOnTheTlsPortGetsNginx400) {
  TlsServer s;
  int port = test::free_port();
  start(s, port);
  test::Client plain(port);
  ASSERT_TRUE(plain.send(test::simple_get("/")));
  Response r = plain.read_response();
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("The plain HTTP request was sent to HTTPS port"), std::string::npos)
      << r.body;
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(plain.closed_within(2000));
  EXPECT_TRUE(s.wait_output("client sent plain HTTP request to HTTPS port"));
}

TEST(Tls, GarbageAfterARecordHeaderEndsTheConnectionWithAnInfoLine) {
  TlsServer s;
  int port = test::free_port();
  start(s, port);
  test::Client g(port);
  // A handshake record header followed by bytes that are no ClientHello.
  std::string junk = "\x16\x03\x01\x00\x20";
  junk += std::string(32, 'x');
  ASSERT_TRUE(g.send(junk));
  EXPECT_TRUE(g.closed_within(2000));
  EXPECT_TRUE(s.wait_output("[info]")) << s.output();
  EXPECT_NE(s.output().find("while SSL handshaking"), std::string::npos) << s.output();
  EXPECT_EQ(get_over_tls(port).body, "hello tls\n");
}

TEST(Tls, StalledHalfClientHelloIsClosedByTheHandshakeTimeout) {
  TlsServer s;
  int port = test::free_port();
  start(s, port, "ssl_handshake_timeout 300ms;");
  test::Client half(port);
  ASSERT_TRUE(half.send(std::string("\x16\x03\x01\x01\x00\x01\x00\x00\xfc\x03\x03", 11)));
  EXPECT_TRUE(half.closed_within(3000));
  EXPECT_TRUE(s.wait_output("client timed out in SSL handshake")) << s.output();
  EXPECT_EQ(get_over_tls(port).body, "hello tls\n");
}

// Without ssl_handshake_timeout the handshake is bounded by the server's
// client_header_timeout, as nginx bounds it (ngx_http_ssl_handshake): a
// client that connects and says nothing, or stalls inside its ClientHello,
// is closed then, not after 60 s.
TEST(Tls, HandshakeWithoutItsOwnTimeoutEndsAtClientHeaderTimeout) {
  TlsServer s;
  int port = test::free_port();
  start(s, port, "client_header_timeout 1s;");
  test::Client silent(port);
  test::Client half(port);
  ASSERT_TRUE(half.send(std::string("\x16\x03\x01\x01\x00\x01\x00\x00\xfc\x03\x03", 11)));
  // Generous bounds, well under the 60 s a wrong default would give.
  EXPECT_TRUE(silent.closed_within(15000)) << s.output();
  EXPECT_TRUE(half.closed_within(15000)) << s.output();
  EXPECT_TRUE(s.wait_output("client timed out in SSL handshake")) << s.output();
  EXPECT_EQ(get_over_tls(port).body, "hello tls\n");
}

void reset(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

TEST(Tls, ResetsMidHandshakeAndMidResponseLeaveTheServerServing) {
  TlsServer s;
  int port = test::free_port();
  std::string big(4 << 20, 'b');
  s.write("html/big.bin", big);
  start(s, port, "sendfile on;");
  {
    test::Client half(port);
    ASSERT_TRUE(half.send(std::string("\x16\x03\x01\x01\x00\x01\x00", 7)));
    reset(half.fd());
  }
  for (int i = 0; i < 3; ++i) {
    TlsClient c(port);
    ASSERT_TRUE(c.handshake()) << c.error();
    ASSERT_TRUE(c.send(test::simple_get("/big.bin")));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    ASSERT_TRUE(c.fill(deadline));
    reset(c.fd());
  }
  EXPECT_EQ(get_over_tls(port).body, "hello tls\n");
  const std::string out = s.output();
  EXPECT_EQ(out.find("[alert]"), std::string::npos) << out;
  EXPECT_EQ(out.find("[crit]"), std::string::npos) << out;
}

std::uint64_t metric_value(const std::string& text, const std::string& name) {
  const std::size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? ~0ull : std::stoull(text.substr(at + name.size() + 2));
}

TEST(Tls, MetricsCountHandshakesFailuresAndResumptions) {
  TlsServer s;
  int port = test::free_port();
  start(s, port, "location = /metrics { metrics; }");
  {
    test::Client g(port);
    ASSERT_TRUE(g.send(std::string("\x16\x03\x01\x00\x05hello", 10)));
    ASSERT_TRUE(g.closed_within(2000));
  }
  SSL_SESSION* sess = nullptr;
  {
    TlsClient a(port);
    ASSERT_TRUE(a.handshake());
    ASSERT_TRUE(a.send(test::simple_get("/")));
    ASSERT_TRUE(a.read_response().complete);
    sess = a.session();
  }
  {
    TlsClient b(port, {.session = sess});
    ASSERT_TRUE(b.handshake());
    EXPECT_TRUE(b.reused());
  }
  SSL_SESSION_free(sess);
  TlsClient m(port);
  ASSERT_TRUE(m.handshake());
  ASSERT_TRUE(m.send(test::simple_get("/metrics")));
  Response r = m.read_response();
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(metric_value(r.body, "vigil_tls_handshakes_total"), 3u) << r.body;
  EXPECT_EQ(metric_value(r.body, "vigil_tls_handshakes_failed_total"), 1u) << r.body;
  EXPECT_EQ(metric_value(r.body, "vigil_tls_sessions_reused_total"), 1u) << r.body;
}

class TlsBackends : public ::testing::TestWithParam<std::string> {};

// Handshakes, keep-alive and a file through each level-triggered backend
// too (they register and delete events where epoll keeps them).
TEST_P(TlsBackends, HandshakeKeepAliveAndAFile) {
  TlsServer s;
  ASSERT_TRUE(s.pki_ok());
  int port = test::free_port();
  std::string big(2 << 20, 'q');
  s.write("html/index.html", "hello tls\n");
  s.write("html/big.bin", big);
  ASSERT_TRUE(s.start("access_log off;\n" + test::tls_server_block(port, "sendfile on;"), "",
                      "use " + GetParam() + ";"))
      << s.output();
  for (int v : {TLS1_2_VERSION, TLS1_3_VERSION}) {
    TlsClient c(port, {.max_version = v});
    ASSERT_TRUE(c.handshake()) << c.error();
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(c.send(test::simple_get("/")));
      EXPECT_EQ(c.read_response().body, "hello tls\n");
    }
    ASSERT_TRUE(c.send(test::simple_get("/big.bin")));
    Response r = c.read_response(false, 20000);
    EXPECT_TRUE(r.complete);
    EXPECT_EQ(r.body.size(), big.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Level, TlsBackends, ::testing::Values("poll", "select"),
                         [](const auto& p) { return p.param; });
// io_uring: OpenSSL reads the socket itself, so a TLS connection is watched
// for readiness rather than received into the ring.
INSTANTIATE_TEST_SUITE_P(Completion, TlsBackends, ::testing::Values("io_uring"),
                         [](const auto& p) { return p.param; });

class TlsLargeFile : public ::testing::TestWithParam<bool> {};

TEST_P(TlsLargeFile, SixteenMebibytesToASlowReaderArriveIntact) {
  TlsServer s;
  int port = test::free_port();
  std::string big(16 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) {
    big[i] = static_cast<char>((i * 2654435761u) >> 13);
  }
  s.write("html/big.bin", big);
  start(s, port, GetParam() ? "sendfile on;" : "sendfile off;");
  TlsClient c(port);
  ASSERT_TRUE(c.handshake()) << c.error();
  ASSERT_TRUE(c.send(test::simple_get("/big.bin")));
  // Slow: let the server fill the socket and wait for writability first,
  // then take the body in small reads.
  ::usleep(300000);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::string& buf = c.buffer();
  std::size_t head_end = std::string::npos;
  while (head_end == std::string::npos && c.fill(deadline, 4096)) head_end = buf.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  EXPECT_EQ(buf.rfind("HTTP/1.1 200 OK", 0), 0u);
  const std::size_t want = head_end + 4 + big.size();
  while (buf.size() < want && c.fill(deadline, 16384)) {
  }
  ASSERT_EQ(buf.size(), want);
  EXPECT_TRUE(buf.compare(head_end + 4, big.size(), big) == 0) << "the body differs";
}

// A worker has one file buffer for TLS: slow readers of different files take
// turns with it, each stopping with part of its piece not yet encrypted, and
// every body must still arrive as it is on disk.
TEST(Tls, SlowReadersOfDifferentFilesShareTheWorkersFileBuffer) {
  TlsServer s;
  int port = test::free_port();
  constexpr int kReaders = 3;
  std::string files[kReaders];
  for (int f = 0; f < kReaders; ++f) {
    files[f].resize(8 << 20);
    for (std::size_t i = 0; i < files[f].size(); ++i) {
      files[f][i] = static_cast<char>(((i + 977 * f) * 2654435761u) >> (11 + f));
    }
    s.write("html/f" + std::to_string(f) + ".bin", files[f]);
  }
  start(s, port, "sendfile on;");
  // Small receive windows; files larger than what the kernel buffers on the
  // way, so the worker finds each socket full many times, mid-piece.
  std::vector<std::unique_ptr<TlsClient>> clients;
  for (int f = 0; f < kReaders; ++f) {
    clients.push_back(std::make_unique<TlsClient>(port));
    const int rcvbuf = 16384;
    ASSERT_EQ(::setsockopt(clients[f]->fd(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf), 0);
    ASSERT_TRUE(clients[f]->handshake()) << clients[f]->error();
    ASSERT_TRUE(clients[f]->send(test::simple_get("/f" + std::to_string(f) + ".bin")));
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::size_t body_at[kReaders] = {};
  bool done[kReaders] = {};
  for (int left = kReaders; left > 0;) {
    for (int f = 0; f < kReaders; ++f) {
      if (done[f]) continue;
      std::string& buf = clients[f]->buffer();
      ASSERT_TRUE(clients[f]->fill(deadline, 8192)) << "reader " << f << " at " << buf.size();
      if (body_at[f] == 0) {
        const std::size_t end = buf.find("\r\n\r\n");
        if (end != std::string::npos) body_at[f] = end + 4;
      }
      if (body_at[f] != 0 && buf.size() >= body_at[f] + files[f].size()) {
        done[f] = true;
        --left;
      }
    }
  }
  for (int f = 0; f < kReaders; ++f) {
    const std::string& buf = clients[f]->buffer();
    ASSERT_EQ(buf.size(), body_at[f] + files[f].size()) << "reader " << f;
    EXPECT_TRUE(buf.compare(body_at[f], files[f].size(), files[f]) == 0) << "reader " << f;
  }
}

// "ssl_conf_command Options KTLS" asks OpenSSL for kernel TLS; on a kernel
// without the "tls" ULP (as here) OpenSSL stays in user space, the
// connection reports no kTLS and files go through the bounded buffer.
TEST(Tls, KtlsRequestedFallsBackWithoutTheKernelModule) {
  TlsServer s;
  int port = test::free_port();
  std::string big(1 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i % 251);
  s.write("html/big.bin", big);
  start(s, port, "sendfile on;\n  ssl_conf_command Options KTLS;");
  TlsClient c(port);
  ASSERT_TRUE(c.handshake()) << c.error();
  ASSERT_TRUE(c.send(test::simple_get("/big.bin")));
  Response r = c.read_response(false, 20000);
  ASSERT_TRUE(r.complete);
  EXPECT_TRUE(r.body == big);
}

INSTANTIATE_TEST_SUITE_P(Sendfile, TlsLargeFile, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "sendfile_on" : "sendfile_off"; });

}  // namespace
}  // namespace vigil

namespace vigil {
namespace {

TEST(Tls, SslVariablesReachTheAccessLog) {
  TlsServer s;
  int port = test::free_port();
  start(s, port, "access_log logs/tls.log tlsvars;",
        "log_format tlsvars '$scheme|$ssl_protocol|$ssl_cipher|$ssl_server_name|"
        "$ssl_session_reused';\n");
  Response r = get_over_tls(port, {.sni = "localhost", .ca_file = s.ca()});
  ASSERT_EQ(r.status, 200);
  const std::string path = s.dir() + "/logs/tls.log";
  ASSERT_TRUE(test::wait_for([&] { return test::read_file(path).find('\n') != std::string::npos; }))
      << test::read_file(path);
  const std::string line = test::read_file(path);
  EXPECT_EQ(line.rfind("https|TLSv1.3|TLS_", 0), 0u) << line;
  EXPECT_NE(line.find("|localhost|.\n"), std::string::npos) << line;
}

// A small response goes out as one TLS record, head and body together (as
// nginx's 16k ssl buffer makes it): one SSL_read has all of it, and a
// client that reads once and shuts down finds no data after close_notify.
TEST(Tls, SmallResponseIsOneRecord) {
  TlsServer s;
  int port = test::free_port();
  start(s, port);
  for (const char* path : {"/", "/missing"}) {
    TlsClient c(port);
    ASSERT_TRUE(c.handshake()) << c.error();
    ASSERT_TRUE(c.send(test::simple_get(path)));
    ASSERT_TRUE(c.fill(std::chrono::steady_clock::now() + std::chrono::seconds(5)));
    const std::string& got = c.buffer();  // one SSL_read: one record
    const auto end = got.find("\r\n\r\n");
    ASSERT_NE(end, std::string::npos) << got;
    if (std::string(path) == "/") {
      EXPECT_EQ(got.substr(end + 4), "hello tls\n");
    } else {
      EXPECT_NE(got.find("</html>", end), std::string::npos) << got;
    }
  }
}

// ssl_reject_handshake: a default server that refuses handshakes (it needs
// no certificate) answers a ClientHello without SNI, or naming it, with the
// unrecognized_name alert; a name another server has goes through. A
// non-default server without a certificate hands its clients the default's.
TEST(Tls, RejectHandshakeAndServersWithoutCertificates) {
  TlsServer s;
  ASSERT_TRUE(s.pki_ok());
  const int a = test::free_port();
  const int b = test::free_port();
  const std::string pa = std::to_string(a), pb = std::to_string(b);
  ASSERT_TRUE(s.start(
      "access_log off;\n"
      "server { listen 127.0.0.1:" + pa + " ssl; server_name refuse; ssl_reject_handshake on; }\n"
      "server { listen 127.0.0.1:" + pa + " ssl; server_name virtual; "
      "ssl_certificate ../server.crt; ssl_certificate_key ../server.key; "
      "location / { return 200 $server_name; } }\n"
      "server { listen 127.0.0.1:" + pb + " ssl; server_name localhost; "
      "ssl_certificate ../server.crt; ssl_certificate_key ../server.key; "
      "location / { return 200 $server_name; } }\n"
      "server { listen 127.0.0.1:" + pb + " ssl; server_name nocert; "
      "ssl_verify_client on; location / { return 200 $server_name; } }\n"
      "server { listen 127.0.0.1:" + pb + " ssl; server_name gone; ssl_reject_handshake on; }\n"))
      << s.output();
  auto hello = [](int port, const std::string& sni) {
    TlsOptions o;
    o.sni = sni;
    TlsClient c(port, o);
    if (!c.handshake()) return "refused: " + c.error();
    if (!c.send(test::simple_get("/", sni.empty() ? "x" : sni))) return std::string("no send");
    return c.read_response().body;
  };
  for (const char* sni : {"", "refuse", "other"}) {
    const std::string r = hello(a, sni);
    EXPECT_NE(r.find("refused:"), std::string::npos) << sni << ": " << r;
    EXPECT_NE(r.find("unrecognized name"), std::string::npos) << sni << ": " << r;
  }
  EXPECT_EQ(hello(a, "virtual"), "virtual");
  EXPECT_EQ(hello(b, ""), "localhost");
  EXPECT_EQ(hello(b, "localhost"), "localhost");
  EXPECT_NE(hello(b, "gone").find("unrecognized name"), std::string::npos);
}

}  // namespace
}  // namespace vigil
