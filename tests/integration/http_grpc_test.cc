// grpc_pass through the real vigil binary to a real gRPC server (Debian's
// python3-grpcio, tests/integration/grpc_peer.py): gRPC clients over h2c
// and over TLS with ALPN h2, unary and streaming calls, a client stream
// larger than the backend's first flow-control window, error statuses in
// the trailers, a backend that is down, grpc_set_header, grpcs:// to the
// backend, the backend connection kept alive; and response trailers to
// HTTP/1.1 (chunked) and HTTP/2 clients.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "test_process.h"
#include "test_util.h"
#include "tls_harness.h"

namespace vigil {
namespace {

using test::Process;
using test::TlsServer;

const std::string kPeer = std::string(VIGIL_SOURCE_DIR) + "/tests/integration/grpc_peer.py";

// A gRPC server on an ephemeral port (with TLS when cert/key are given),
// killed when the object goes away.
class GrpcBackend {
 public:
  explicit GrpcBackend(const std::string& cert = "", const std::string& key = "") {
    std::vector<std::string> argv = {"/usr/bin/python3", kPeer, "server"};
    if (!cert.empty()) argv.insert(argv.end(), {"--tls", cert, key});
    proc_ = std::make_unique<Process>(argv);
    if (!proc_->wait_for_output("\n", 20000)) return;
    const std::string& out = proc_->output();
    const std::size_t at = out.find("port ");
    if (at != std::string::npos) port_ = std::stoi(out.substr(at + 5));
  }
  int port() const { return port_; }
  std::string output() const { return proc_->output(); }

 private:
  std::unique_ptr<Process> proc_;
  int port_ = 0;
};

// One call through `target`; the peer's JSON line.
std::string call(const std::string& target, const std::string& method,
                 std::vector<std::string> opts = {}) {
  std::vector<std::string> argv = {"/usr/bin/python3", kPeer, "client", target, method};
  argv.insert(argv.end(), opts.begin(), opts.end());
  return test::run(argv).second;
}

bool has(const std::string& out, const std::string& part) {
  return out.find(part) != std::string::npos;
}

// The "messages" of a call's JSON line.
std::string messages(const std::string& out) {
  const std::size_t at = out.find("\"messages\": [");
  if (at == std::string::npos) return "none: " + out;
  return out.substr(at, out.find(']', at) - at);
}

std::string h2c_server(int port, const std::string& locations) {
  return "access_log off;\nserver {\n  listen 127.0.0.1:" + std::to_string(port) +
         ";\n  http2 on;\n" + locations + "\n}\n";
}

class Grpc : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(test::run({"/usr/bin/python3", "-c", "import grpc"}).first, 0)
        << "python3-grpcio is not installed";
    backend_ = std::make_unique<GrpcBackend>();
    ASSERT_GT(backend_->port(), 0) << backend_->output();
  }
  std::string backend() const { return "127.0.0.1:" + std::to_string(backend_->port()); }
  void start(const std::string& locations, const std::string& more = "") {
    port_ = test::free_port();
    ASSERT_TRUE(s_.start(h2c_server(port_, locations) + more)) << s_.output();
  }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }

  std::unique_ptr<GrpcBackend> backend_;
  test::VigilServer s_;
  int port_ = 0;
};

TEST_F(Grpc, UnaryCallOverH2cWithTrailers) {
  start("location / { grpc_pass " + backend() + "; }");
  const std::string out = call(target(), "Unary", {"--payload", "ping"});
  EXPECT_TRUE(has(out, "\"code\": \"OK\"")) << out;
  EXPECT_TRUE(has(out, "\"messages\": [\"ping\"]")) << out;
  // The backend's trailing metadata reached the client as trailers.
  EXPECT_TRUE(has(out, "\"x-trailer\": \"end\"")) << out;
}

TEST_F(Grpc, GrpcSchemeAndSetHeaderReachTheBackend) {
  start("location / { grpc_pass grpc://" + backend() +
        "; grpc_set_header x-added $request_method; }");
  const std::string out = call(target(), "Unary", {"--meta", "x-client=one"});
  EXPECT_TRUE(has(out, "\"code\": \"OK\"")) << out;
  EXPECT_TRUE(has(out, "\"echo-x-added\": \"POST\"")) << out;
  EXPECT_TRUE(has(out, "\"echo-x-client\": \"one\"")) << out;
}

TEST_F(Grpc, PassWithVariables) {
  // The address comes with the request (metadata is a field): evaluated per
  // request, as nginx's; an upstream block by name too.
  start("location / { grpc_pass grpc://$http_x_backend; }",
        "upstream named { server " + backend() + "; }\n");
  const std::string out = call(target(), "Unary", {"--meta", "x-backend=" + backend()});
  EXPECT_TRUE(has(out, "\"code\": \"OK\"")) << out;
  EXPECT_TRUE(has(out, "\"x-trailer\": \"end\"")) << out;
  const std::string named =
      call(target(), "Stream", {"--payload", "2", "--meta", "x-backend=named"});
  EXPECT_TRUE(has(named, "[\"m0\", \"m1\"]")) << named;
  // No port: 500, logged as nginx does.
  const std::string bad = call(target(), "Unary", {"--meta", "x-backend=127.0.0.1"});
  EXPECT_TRUE(has(bad, "\"code\": \"INTERNAL\"") || has(bad, "\"code\": \"UNKNOWN\"")) << bad;
  EXPECT_TRUE(s_.wait_output("no port in upstream \"grpc://127.0.0.1\"")) << s_.output();
}

TEST_F(Grpc, ServerStreaming) {
  start("location / { grpc_pass " + backend() + "; }");
  const std::string out = call(target(), "Stream", {"--payload", "5"});
  EXPECT_TRUE(has(out, "\"code\": \"OK\"")) << out;
  EXPECT_TRUE(has(out, "[\"m0\", \"m1\", \"m2\", \"m3\", \"m4\"]")) << out;
}

TEST_F(Grpc, ClientStreamingPastTheBackendsWindow) {
  // 400000 bytes: more than the 64 KiB the backend's windows start with,
  // so the body waits for its WINDOW_UPDATE frames.
  start("location / { grpc_pass " + backend() + "; }");
  const std::string out = call(target(), "Collect", {"--chunks", "40", "10000"});
  EXPECT_TRUE(has(out, "\"code\": \"OK\"")) << out;
  EXPECT_TRUE(has(out, "[\"400000 40\"]")) << out;
  const std::string big = call(target(), "Collect", {"--chunks", "3", "200000"});
  EXPECT_TRUE(has(big, "[\"600000 3\"]")) << big;
}

TEST_F(Grpc, ErrorStatusReachesTheClient) {
  start("location / { grpc_pass " + backend() + "; }");
  const std::string out = call(target(), "Fail");
  EXPECT_TRUE(has(out, "\"code\": \"INVALID_ARGUMENT\"")) << out;
  EXPECT_TRUE(has(out, "\"details\": \"bad thing\"")) << out;
}

TEST_F(Grpc, BackendDownIsUnavailable) {
  test::ClosedPort closed;
  start("location / { grpc_pass 127.0.0.1:" + std::to_string(closed.port()) + "; }");
  const std::string out = call(target(), "Unary");
  // 502 from vigil: gRPC clients map it to UNAVAILABLE.
  EXPECT_TRUE(has(out, "\"code\": \"UNAVAILABLE\"")) << out;
  EXPECT_TRUE(s_.wait_output("connect() failed")) << s_.output();
}

// Calls over a kept connection to grpcio. Whether the next call finds the
// connection still kept is grpcio's choice: it may send a frame of its own
// (a BDP PING) after a response, and a kept connection that the backend
// speaks on is closed, as nginx closes it. Reuse itself is asserted with a
// backend that stays silent (KeepaliveReusesASilentBackendConnection).
TEST_F(Grpc, CallsOverAKeptConnection) {
  start("location / { grpc_pass grpc://kept; }",
        "upstream kept { server " + backend() + "; keepalive 4; }\n");
  for (int i = 0; i < 3; ++i) {
    const std::string out = call(target(), "Peer");
    EXPECT_TRUE(has(out, "\"code\": \"OK\"")) << i << out;
  }
  // A client stream on a kept connection (the backend's windows were left
  // where the last request put them).
  const std::string collect = call(target(), "Collect", {"--chunks", "10", "10000"});
  EXPECT_TRUE(has(collect, "[\"100000 10\"]")) << collect;
  EXPECT_TRUE(has(call(target(), "Collect", {"--chunks", "10", "10000"}), "[\"100000 10\"]"));
}

TEST_F(Grpc, WithoutKeepaliveEachCallConnects) {
  start("location / { grpc_pass " + backend() + "; }");
  const std::string first = call(target(), "Peer");
  const std::string second = call(target(), "Peer");
  EXPECT_TRUE(has(first, "\"code\": \"OK\"")) << first;
  EXPECT_NE(messages(first), messages(second));
}

TEST_F(Grpc, TrailersToAnHttp11ClientAreChunked) {
  start("location / { grpc_pass " + backend() + "; }");
  s_.write("req.bin", std::string("\0\0\0\0\x02hi", 7));
  auto [rc, out] = test::run({"curl", "-sS", "--raw", "-H", "content-type: application/grpc", "-H",
                              "te: trailers", "--data-binary", "@" + s_.path("req.bin"),
                              "http://" + target() + "/test.Echo/Unary"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(has(out, "\r\n0\r\ngrpc-status: 0\r\nx-trailer: end\r\n\r\n")) << out;
}

// $upstream_trailer_NAME (nginx 1.13.10): the backend's trailer fields, known
// once the response has ended (the log has them; the head had none yet).
TEST_F(Grpc, UpstreamTrailerVariables) {
  start("location / { grpc_pass " + backend() + "; access_log logs/t.log t buffer=0; }",
        "log_format t '[$upstream_trailer_grpc_status] [$upstream_trailer_x_trailer] "
        "[$upstream_trailer_none] [$upstream_http_content_type]';\n");
  const std::string out = call(target(), "Unary", {"--payload", "ping"});
  EXPECT_TRUE(has(out, "\"code\": \"OK\"")) << out;
  std::string log;
  test::wait_until(
      [&] {
        log = s_.read("logs/t.log");
        return !log.empty();
      },
      5000);
  EXPECT_EQ(log, "[0] [end] [-] [application/grpc]\n") << s_.output();
}

TEST_F(Grpc, AddTrailerOverHttp2) {
  // Not gRPC: add_trailer's field comes in a trailing HEADERS frame.
  start("location /t { add_trailer x-sum done; return 200 \"body\"; }");
  auto [rc, out] = test::run({"/usr/bin/python3",
                              std::string(VIGIL_SOURCE_DIR) + "/tests/integration/h2_peer.py",
                              std::to_string(port_), "--headers", "get", "/t"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(has(out, "t x-sum: done")) << out;
  EXPECT_TRUE(has(out, "/t 200 4 ")) << out;
}

TEST_F(Grpc, DirectivesAreCheckedAtLoad) {
  test::VigilServer s;
  auto [rc, out] = test::check_http_conf(s, "server { location / { grpc_pass http://x:1; } }");
  EXPECT_NE(rc, 0);
  auto [rc2, out2] = test::check_http_conf(
      s, "server { location / { grpc_pass 127.0.0.1:1; grpc_next_upstream bogus; } }");
  EXPECT_NE(rc2, 0);
  EXPECT_TRUE(has(out2, "invalid value \"bogus\"")) << out2;
  auto [rc3, out3] = test::check_http_conf(
      s,
      "grpc_connect_timeout 5s; grpc_read_timeout 1m; grpc_send_timeout 1m;\n"
      "grpc_buffer_size 8k; grpc_socket_keepalive on; grpc_intercept_errors on;\n"
      "grpc_hide_header x-a; grpc_pass_header server; grpc_ignore_headers X-Accel-Redirect;\n"
      "grpc_next_upstream error timeout http_502; grpc_next_upstream_tries 2;\n"
      "grpc_next_upstream_timeout 10s; grpc_bind 127.0.0.1; grpc_ssl_verify off;\n"
      "grpc_ssl_session_reuse on; grpc_ssl_protocols TLSv1.2 TLSv1.3;\n"
      "server { location / { grpc_pass grpcs://127.0.0.1:1; grpc_ssl_name x;\n"
      "  grpc_ssl_server_name on; grpc_ssl_ciphers DEFAULT; grpc_ssl_verify_depth 2; }\n"
      "  location /p { grpc_pass 127.0.0.1:1; grpc_set_header Host example.com; } }");
  EXPECT_EQ(rc3, 0) << out3;
}

// RFC 7541 §5.2: Huffman padding longer than 7 bits is a decoding error
// (nginx takes it; docs/compatibility.md). A bare HTTP/2 server answers with
// "content-type: application/grpc" padded right, then one byte too long.
TEST(GrpcHpack, HuffmanPaddingLongerThanSevenBitsIsADecodingError) {
  for (const std::string kind : {"good", "bad"}) {
    Process raw({"/usr/bin/python3", kPeer, "raw-server", kind});
    ASSERT_TRUE(raw.wait_for_output("\n", 20000)) << raw.output();
    const int backend = std::stoi(raw.output().substr(raw.output().find("port ") + 5));
    test::VigilServer s;
    const int port = test::free_port();
    ASSERT_TRUE(s.start("access_log off;\nserver {\n  listen 127.0.0.1:" + std::to_string(port) +
                        ";\n  location / { grpc_pass 127.0.0.1:" + std::to_string(backend) +
                        "; }\n}\n"))
        << s.output();
    auto [rc, out] = test::run({"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H",
                                "content-type: application/grpc",
                                "http://127.0.0.1:" + std::to_string(port) + "/x"});
    if (kind == "good") {
      EXPECT_EQ(out, "200");
    } else {
      EXPECT_EQ(out, "502");
      EXPECT_TRUE(s.wait_output("upstream sent invalid http2 table index")) << s.output();
    }
  }
}

// A bare HTTP/2 backend (grpc_peer.py raw-server MODE...) and Vigil in
// front of it with `location / { grpc_pass ...; MORE }`.
class GrpcRaw {
 public:
  explicit GrpcRaw(std::vector<std::string> mode) {
    std::vector<std::string> argv = {"/usr/bin/python3", kPeer, "raw-server"};
    argv.insert(argv.end(), mode.begin(), mode.end());
    raw_ = std::make_unique<Process>(argv);
  }
  bool start(const std::string& more = "") {
    if (!raw_->wait_for_output("\n", 20000)) return false;
    const int backend = std::stoi(raw_->output().substr(raw_->output().find("port ") + 5));
    port_ = test::free_port();
    return s_.start("access_log off;\nserver {\n  listen 127.0.0.1:" + std::to_string(port_) +
                    ";\n  http2 on;\n  location / { grpc_pass 127.0.0.1:" +
                    std::to_string(backend) + "; " + more + " }\n}\n");
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/x"; }
  Process& raw() { return *raw_; }
  test::VigilServer& vigil() { return s_; }

 private:
  std::unique_ptr<Process> raw_;
  test::VigilServer s_;
  int port_ = 0;
};

// grpc_set_header Host: nginx sends it as a "host" field, and no
// :authority; without it, :authority is the grpc_pass address.
TEST(GrpcRawBackend, SetHostGoesAsAHostFieldWithoutAuthority) {
  {
    GrpcRaw g({"record"});
    ASSERT_TRUE(g.start("grpc_set_header Host example.net;")) << g.vigil().output();
    auto [rc, out] = test::run({"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H",
                                "content-type: application/grpc", g.url()});
    EXPECT_EQ(out, "200");
    ASSERT_TRUE(g.raw().wait_for_output("h content-type:", 5000)) << g.raw().output();
    EXPECT_TRUE(has(g.raw().output(), "h host: example.net\n")) << g.raw().output();
    EXPECT_FALSE(has(g.raw().output(), "h :authority:")) << g.raw().output();
  }
  {
    GrpcRaw g({"record"});
    ASSERT_TRUE(g.start()) << g.vigil().output();
    auto [rc, out] = test::run({"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H",
                                "content-type: application/grpc", g.url()});
    EXPECT_EQ(out, "200");
    ASSERT_TRUE(g.raw().wait_for_output("h content-type:", 5000)) << g.raw().output();
    EXPECT_TRUE(has(g.raw().output(), "h :authority: 127.0.0.1:")) << g.raw().output();
    EXPECT_FALSE(has(g.raw().output(), "h host:")) << g.raw().output();
  }
}

const std::string kH2Peer = std::string(VIGIL_SOURCE_DIR) + "/tests/integration/h2_peer.py";

// The backend opens both its windows by 10 bytes after each DATA frame
// once the first 65535 bytes are in: the rest of the body goes on within
// what it opened, never past it, and all of it comes. (How the rest is cut
// depends on how much of the client's body had arrived when a window
// opened: 10 + 10 as nginx-tests' grpc.t sees it, or 1 + 19.)
TEST(GrpcRawBackend, DataFramesStayWithinTheOpenedWindow) {
  GrpcRaw g({"window"});
  ASSERT_TRUE(g.start()) << g.vigil().output();
  const std::string port = g.url().substr(17, g.url().rfind('/') - 17);
  auto [rc, out] = test::run({"/usr/bin/python3", kH2Peer, port, "post", "/x", "65555"});
  EXPECT_TRUE(has(out, "/x 200")) << out;
  ASSERT_TRUE(g.raw().wait_for_output("end\n", 10000)) << g.raw().output();
  const std::string& log = g.raw().output();
  long sum = 0;
  long window = 65535;  // the connection's and the stream's, opened alike
  for (std::size_t at = log.find("data "); at != std::string::npos;
       at = log.find("data ", at + 5)) {
    const long n = std::stol(log.substr(at + 5));
    EXPECT_LE(n, window) << log;
    window -= n;
    sum += n;
    if (sum >= 65535) window += 10;
  }
  EXPECT_EQ(sum, 65555) << log;
}

// A response body shorter or longer than the backend's content-length:
// the client's stream is reset (nginx: "upstream prematurely closed
// stream", "upstream sent response body larger than indicated content
// length").
TEST(GrpcRawBackend, BodyNotMatchingContentLengthResetsTheStream) {
  for (const std::string cl : {"42", "8"}) {
    GrpcRaw g({"length", cl});
    ASSERT_TRUE(g.start()) << g.vigil().output();
    const std::string port = g.url().substr(17, g.url().rfind('/') - 17);
    auto [rc, out] = test::run({"/usr/bin/python3", kH2Peer, port, "get", "/x"});
    EXPECT_TRUE(has(out, "reset /x")) << cl << ": " << out;
    EXPECT_TRUE(g.vigil().wait_output(cl == "42" ? "upstream prematurely closed stream"
                                                 : "larger than indicated content length"))
        << g.vigil().output();
  }
}

// After the trailers, in the same read: one RST_STREAM NO_ERROR is taken
// (the trailers reach the client), a second one or a CANCEL is an error and
// the client's stream is reset, as nginx does.
TEST(GrpcRawBackend, ResetsAfterTheEndOfTheStream) {
  struct Case {
    const char* code;
    const char* count;
    bool trailers;
  };
  for (const Case& k : {Case{"0", "1", true}, Case{"0", "3", false}, Case{"8", "1", false}}) {
    GrpcRaw g({"rst", k.code, k.count});
    ASSERT_TRUE(g.start()) << g.vigil().output();
    const std::string port = g.url().substr(17, g.url().rfind('/') - 17);
    auto [rc, out] = test::run({"/usr/bin/python3", kH2Peer, port, "--headers", "get", "/x"});
    const std::string what = std::string(k.code) + " x" + k.count + ": " + out;
    EXPECT_EQ(has(out, "t grpc-status: 0"), k.trailers) << what;
    EXPECT_EQ(has(out, "reset /x"), !k.trailers) << what;
  }
}

// upstream keepalive: three requests, one connection to a backend that
// sends nothing between responses (streams 1, 3 and 5 on it).
TEST(GrpcKeepalive, KeepaliveReusesASilentBackendConnection) {
  Process raw({"/usr/bin/python3", kPeer, "raw-server", "good"});
  ASSERT_TRUE(raw.wait_for_output("\n", 20000)) << raw.output();
  const int backend = std::stoi(raw.output().substr(raw.output().find("port ") + 5));
  test::VigilServer s;
  const int port = test::free_port();
  ASSERT_TRUE(
      s.start("access_log off;\nupstream kept { server 127.0.0.1:" + std::to_string(backend) +
              "; keepalive 4; }\nserver {\n  listen 127.0.0.1:" + std::to_string(port) +
              ";\n  location / { grpc_pass grpc://kept; }\n}\n"))
      << s.output();
  for (int i = 0; i < 3; ++i) {
    auto [rc, out] = test::run({"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H",
                                "content-type: application/grpc",
                                "http://127.0.0.1:" + std::to_string(port) + "/x"});
    EXPECT_EQ(out, "200") << i;
  }
  EXPECT_TRUE(raw.wait_for_output("connection 1", 5000)) << raw.output();
  EXPECT_EQ(raw.output().find("connection 2"), std::string::npos) << raw.output();
}

// grpcs:// to a TLS gRPC server, and TLS with ALPN h2 from the client.
class GrpcTls : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(test::run({"/usr/bin/python3", "-c", "import grpc"}).first, 0);
    ASSERT_TRUE(s_.pki_ok());
    backend_ = std::make_unique<GrpcBackend>(s_.path("server.crt"), s_.path("server.key"));
    ASSERT_GT(backend_->port(), 0) << backend_->output();
  }
  std::unique_ptr<GrpcBackend> backend_;
  TlsServer s_;
};

TEST_F(GrpcTls, GrpcsToTheBackendVerified) {
  const int port = test::free_port();
  ASSERT_TRUE(s_.start(h2c_server(
      port, "location / { grpc_pass grpcs://127.0.0.1:" + std::to_string(backend_->port()) +
                "; grpc_ssl_verify on; grpc_ssl_name localhost;"
                " grpc_ssl_trusted_certificate ../ca.crt; }")))
      << s_.output();
  const std::string out = call("127.0.0.1:" + std::to_string(port), "Unary");
  EXPECT_TRUE(has(out, "\"code\": \"OK\"")) << out;
  EXPECT_TRUE(has(out, "\"x-trailer\": \"end\"")) << out;
  const std::string stream =
      call("127.0.0.1:" + std::to_string(port), "Stream", {"--payload", "3"});
  EXPECT_TRUE(has(stream, "[\"m0\", \"m1\", \"m2\"]")) << stream;
}

TEST_F(GrpcTls, ClientOverTlsWithAlpnH2) {
  const int port = test::free_port();
  ASSERT_TRUE(
      s_.start("access_log off;\n" +
               test::tls_server_block(port, "http2 on;\nlocation / { grpc_pass grpcs://127.0.0.1:" +
                                                std::to_string(backend_->port()) + "; }")))
      << s_.output();
  const std::string out = call("127.0.0.1:" + std::to_string(port), "Collect",
                               {"--chunks", "20", "10000", "--ca", s_.ca(), "--name", "localhost"});
  EXPECT_TRUE(has(out, "\"code\": \"OK\"")) << out;
  EXPECT_TRUE(has(out, "[\"200000 20\"]")) << out;
  const std::string fail =
      call("127.0.0.1:" + std::to_string(port), "Fail", {"--ca", s_.ca(), "--name", "localhost"});
  EXPECT_TRUE(has(fail, "\"details\": \"bad thing\"")) << fail;
}

}  // namespace
}  // namespace vigil
