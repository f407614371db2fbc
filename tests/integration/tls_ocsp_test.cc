// OCSP: stapling (ssl_stapling, ssl_stapling_file, ssl_stapling_responder,
// ssl_stapling_verify) and client certificates checked with ssl_ocsp,
// against `openssl ocsp` as the real responder, with a PKI made by
// `openssl ca` as nginx's own tests make theirs: a root, an intermediate
// whose certificates name the responder in their AIA, RSA and ECDSA end
// certificates, one of them revoked.
#include <gtest/gtest.h>
#include <openssl/ocsp.h>

#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "test_process.h"
#include "tls_harness.h"

namespace vigil {
namespace {

using test::Process;
using test::Response;
using test::TlsClient;
using test::TlsOptions;
using test::TlsServer;

const std::string kDnsServer = std::string(VIGIL_SOURCE_DIR) + "/tests/integration/dns_server.py";

class Ocsp : public ::testing::Test {
 protected:
  void SetUp() override {
    ocsp_port_ = test::free_port();
    dead_port_ = test::free_port();
    const std::string& d = s_.dir();
    std::ofstream(d + "/openssl.conf")
        << "[ req ]\ndefault_bits = 2048\nencrypt_key = no\n"
           "distinguished_name = req_distinguished_name\nx509_extensions = myca_extensions\n"
           "[ req_distinguished_name ]\n[ myca_extensions ]\n"
           "basicConstraints = critical,CA:TRUE\n";
    write_ca_conf("ca.conf", "http://127.0.0.1:" + std::to_string(ocsp_port_));
    write_ca_conf("ca-dead.conf", "http://127.0.0.1:" + std::to_string(dead_port_));
    std::ofstream(d + "/certserial") << "1000\n";
    std::ofstream(d + "/certindex");
    ASSERT_TRUE(cli({"req", "-x509", "-new", "-config", "openssl.conf", "-subj", "/CN=root/",
                     "-out", "root.crt", "-keyout", "root.key"}));
    for (const char* name : {"int", "end", "revoked", "dead"}) {
      ASSERT_TRUE(
          cli({"req", "-new", "-config", "openssl.conf", "-subj", std::string("/CN=") + name + "/",
               "-out", std::string(name) + ".csr", "-keyout", std::string(name) + ".key"}));
    }
    ASSERT_TRUE(cli({"ecparam", "-genkey", "-name", "prime256v1", "-out", "ec-end.key"}));
    ASSERT_TRUE(cli({"req", "-new", "-key", "ec-end.key", "-config", "openssl.conf", "-subj",
                     "/CN=ec-end/", "-out", "ec-end.csr"}));
    ASSERT_TRUE(sign("ca.conf", "root", "int"));
    ASSERT_TRUE(sign("ca.conf", "int", "end"));
    ASSERT_TRUE(sign("ca.conf", "int", "ec-end"));
    ASSERT_TRUE(sign("ca.conf", "int", "revoked"));
    ASSERT_TRUE(sign("ca-dead.conf", "int", "dead"));
    ASSERT_TRUE(cli({"ca", "-config", "ca.conf", "-revoke", "revoked.crt", "-keyfile", "int.key",
                     "-cert", "int.crt"}));
    for (const char* name : {"end", "ec-end", "revoked", "dead"}) {
      concat(std::string(name) + "-int.crt", {std::string(name) + ".crt", "int.crt"});
    }
    concat("trusted.crt", {"int.crt", "root.crt"});
    s_.write("html/index.html", "ok\n");
  }

  void write_ca_conf(const std::string& file, const std::string& aia) {
    std::ofstream(s_.dir() + "/" + file)
        << "[ ca ]\ndefault_ca = myca\n[ myca ]\nnew_certs_dir = " << s_.dir()
        << "\ndatabase = " << s_.dir() << "/certindex\ndefault_md = sha256\n"
        << "policy = myca_policy\nserial = " << s_.dir()
        << "/certserial\ndefault_days = 1\nx509_extensions = myca_extensions\n"
           "[ myca_policy ]\ncommonName = supplied\n[ myca_extensions ]\n"
           "basicConstraints = critical,CA:TRUE\nauthorityInfoAccess = OCSP;URI:"
        << aia << "\n";
  }
  bool cli(std::vector<std::string> args) { return test::openssl_cli(s_.dir(), std::move(args)); }
  bool sign(const std::string& conf, const std::string& ca, const std::string& name) {
    return cli({"ca", "-batch", "-config", conf, "-keyfile", ca + ".key", "-cert", ca + ".crt",
                "-subj", "/CN=" + name + "/", "-in", name + ".csr", "-out", name + ".crt"});
  }
  void concat(const std::string& out, const std::vector<std::string>& parts) {
    std::string all;
    for (const auto& p : parts) {
      std::ifstream in(s_.dir() + "/" + p);
      all += std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    }
    std::ofstream(s_.dir() + "/" + out) << all;
  }

  // `openssl ocsp` answering for the intermediate's certificates, signed by
  // `signer` (the intermediate itself, or the root: a signer the client of
  // the response cannot tie to the issuer).
  void start_responder(const std::string& signer = "int") {
    responder_ = std::make_unique<Process>(
        std::vector<std::string>{"openssl", "ocsp", "-index", "certindex", "-port",
                                 std::to_string(ocsp_port_), "-rsigner", signer + ".crt", "-rkey",
                                 signer + ".key", "-CA", "int.crt", "-ndays", "1", "-ignore_err"},
        s_.dir());
    // Ready when it says so: a connection made only to probe it would
    // hold the responder (it serves one connection at a time and spins on
    // one closed before a request).
    ASSERT_TRUE(responder_->wait_for_output("waiting for OCSP client connections", 10000))
        << responder_->output();
  }

  // The staple a handshake got: "" without one, else the certificate's
  // status in it ("good", "revoked", "unknown") or "unreadable".
  std::string staple(int port, const std::string& sigalgs = "") {
    TlsOptions o;
    o.sigalgs = sigalgs;
    TlsClient c(port, o);
    SSL_set_tlsext_status_type(c.ssl(), TLSEXT_STATUSTYPE_ocsp);
    if (!c.handshake()) return "handshake failed: " + c.error();
    const unsigned char* p = nullptr;
    const long len = SSL_get_tlsext_status_ocsp_resp(c.ssl(), &p);
    if (len <= 0 || p == nullptr) return "";
    OCSP_RESPONSE* resp = d2i_OCSP_RESPONSE(nullptr, &p, len);
    OCSP_BASICRESP* basic = resp != nullptr ? OCSP_response_get1_basic(resp) : nullptr;
    std::string out = "unreadable";
    if (basic != nullptr && OCSP_resp_count(basic) == 1) {
      OCSP_SINGLERESP* single = OCSP_resp_get0(basic, 0);
      const int st = OCSP_single_get0_status(single, nullptr, nullptr, nullptr, nullptr);
      out = OCSP_cert_status_str(st);
    }
    OCSP_BASICRESP_free(basic);
    OCSP_RESPONSE_free(resp);
    return out;
  }
  // Handshakes until one gets a staple (the first ones go without while
  // the server fetches it).
  std::string wait_staple(int port, const std::string& sigalgs = "") {
    std::string got;
    test::wait_until(
        [&] {
          got = staple(port, sigalgs);
          return !got.empty();
        },
        10000);
    return got;
  }

  std::string server_block(int port, const std::string& extra) {
    return "server {\n  listen 127.0.0.1:" + std::to_string(port) +
           " ssl;\n  server_name localhost;\n  root html;\n" + extra + "\n}\n";
  }

  TlsServer s_;
  std::unique_ptr<Process> responder_;
  int ocsp_port_ = 0;
  int dead_port_ = 0;
};

const char kRsa[] = "RSA-PSS+SHA256:RSA+SHA256";
const char kEcdsa[] = "ECDSA+SHA256";

// The server fetches the status of its certificate from the responder its
// AIA names, and staples it from then on; each certificate (RSA, ECDSA)
// has its own.
TEST_F(Ocsp, StaplesTheResponseItFetched) {
  start_responder();
  const int port = test::free_port();
  ASSERT_TRUE(s_.start("access_log off;\n" +
                       server_block(port,
                                    "ssl_stapling on;\n ssl_certificate ../ec-end-int.crt;\n"
                                    " ssl_certificate_key ../ec-end.key;\n"
                                    " ssl_certificate ../end-int.crt;\n"
                                    " ssl_certificate_key ../end.key;")))
      << s_.output();
  EXPECT_EQ(wait_staple(port, kEcdsa), "good") << s_.output();
  EXPECT_EQ(wait_staple(port, kRsa), "good") << s_.output();
  // A client that does not ask gets none and still connects.
  TlsClient plain(port);
  EXPECT_TRUE(plain.handshake());
}

// A revoked certificate is not stapled (nginx staples only "good"), and the
// log says why.
TEST_F(Ocsp, ARevokedStatusIsNotStapled) {
  start_responder();
  const int port = test::free_port();
  ASSERT_TRUE(s_.start(server_block(port,
                                    "ssl_stapling on;\n ssl_certificate ../revoked-int.crt;\n"
                                    " ssl_certificate_key ../revoked.key;")))
      << s_.output();
  EXPECT_EQ(staple(port), "");
  EXPECT_TRUE(s_.wait_output("certificate status \"revoked\" in the OCSP response", 10000))
      << s_.output();
  EXPECT_EQ(staple(port), "");
}

// ssl_stapling_file: the response of the file, from the first handshake on,
// whatever it says; nothing is fetched.
TEST_F(Ocsp, StaplingFileIsSentAsItIs) {
  ASSERT_TRUE(cli({"ocsp", "-issuer", "int.crt", "-cert", "revoked.crt", "-reqout", "req.der"}));
  ASSERT_TRUE(cli({"ocsp", "-index", "certindex", "-CA", "int.crt", "-rsigner", "int.crt", "-rkey",
                   "int.key", "-reqin", "req.der", "-respout", "resp.der", "-ndays", "1"}));
  const int port = test::free_port();
  ASSERT_TRUE(s_.start(server_block(port,
                                    "ssl_stapling on;\n ssl_stapling_file ../resp.der;\n"
                                    " ssl_certificate ../revoked-int.crt;\n"
                                    " ssl_certificate_key ../revoked.key;")))
      << s_.output();
  EXPECT_EQ(staple(port), "revoked");
}

// ssl_stapling_responder replaces the AIA's responder (here one nobody
// listens on).
TEST_F(Ocsp, StaplingResponderOverridesTheAia) {
  start_responder();
  const int port = test::free_port();
  ASSERT_TRUE(s_.start(server_block(
      port,
      "ssl_stapling on;\n ssl_stapling_responder http://127.0.0.1:" + std::to_string(ocsp_port_) +
          "/;\n ssl_certificate ../dead-int.crt;\n ssl_certificate_key ../dead.key;")))
      << s_.output();
  EXPECT_EQ(wait_staple(port), "good") << s_.output();
}

// A responder that cannot be reached: no staple, the handshakes go on, the
// log names the responder and the certificate.
TEST_F(Ocsp, AnUnreachableResponderLeavesTheHandshakeAlone) {
  const int port = test::free_port();
  ASSERT_TRUE(s_.start(server_block(port,
                                    "ssl_stapling on;\n ssl_certificate ../dead-int.crt;\n"
                                    " ssl_certificate_key ../dead.key;")))
      << s_.output();
  EXPECT_EQ(staple(port), "");
  EXPECT_TRUE(s_.wait_output("while requesting certificate status, responder: 127.0.0.1", 10000))
      << s_.output();
  EXPECT_EQ(staple(port), "");
}

// ssl_stapling_verify on: a response signed by a certificate that is not
// the issuer's (the root signs for the intermediate's certificates) is
// refused; without it the same response is stapled.
TEST_F(Ocsp, StaplingVerifyRefusesAnUntrustedSigner) {
  start_responder("root");
  const int verify = test::free_port();
  const int trusting = test::free_port();
  const std::string cert =
      " ssl_certificate ../end-int.crt;\n ssl_certificate_key ../end.key;\n"
      " ssl_trusted_certificate ../trusted.crt;\n ssl_stapling on;\n";
  ASSERT_TRUE(s_.start(server_block(verify, cert + " ssl_stapling_verify on;") +
                       server_block(trusting, cert)))
      << s_.output();
  EXPECT_EQ(wait_staple(trusting), "good") << s_.output();
  EXPECT_EQ(staple(verify), "");
  EXPECT_TRUE(s_.wait_output("OCSP_basic_verify() failed", 10000)) << s_.output();
  EXPECT_EQ(staple(verify), "");
}

// The issuer from ssl_trusted_certificate when the certificate comes
// without its chain; without either, stapling is off for it, with a warning.
TEST_F(Ocsp, TheIssuerMayComeFromTheTrustedCertificates) {
  start_responder();
  const int with = test::free_port();
  const int without = test::free_port();
  const std::string cert =
      " ssl_stapling on;\n ssl_certificate ../end.crt;\n ssl_certificate_key ../end.key;\n";
  ASSERT_TRUE(s_.start(server_block(with, cert + " ssl_trusted_certificate ../trusted.crt;") +
                       server_block(without, cert)))
      << s_.output();
  EXPECT_EQ(wait_staple(with), "good") << s_.output();
  EXPECT_NE(s_.output().find("\"ssl_stapling\" ignored, issuer certificate not found for "
                             "certificate \"" +
                             s_.dir() + "/conf/../end.crt\""),
            std::string::npos)
      << s_.output();
  EXPECT_EQ(staple(without), "");
}

// A responder named by a host name is resolved by the resolver at run time
// (the name must also resolve when the configuration is loaded, as in
// nginx); this DNS server knows no "localhost", so the fetch fails there.
TEST_F(Ocsp, AResponderNameGoesThroughTheResolver) {
  Process dns({"python3", kDnsServer});
  ASSERT_TRUE(dns.wait_for_output("DNS ", 15000)) << dns.output();
  std::smatch m;
  const std::string out = dns.output();
  ASSERT_TRUE(std::regex_search(out, m, std::regex("DNS (\\d+)"))) << out;
  start_responder();
  const int port = test::free_port();
  ASSERT_TRUE(
      s_.start("resolver 127.0.0.1:" + m[1].str() + " ipv6=off;\n" +
               server_block(port, "ssl_stapling on;\n ssl_stapling_responder http://localhost:" +
                                      std::to_string(ocsp_port_) +
                                      ";\n ssl_certificate ../dead-int.crt;\n"
                                      " ssl_certificate_key ../dead.key;")))
      << s_.output();
  EXPECT_EQ(staple(port), "");
  EXPECT_TRUE(dns.wait_for_output("Q udp localhost A", 5000)) << dns.output();
  EXPECT_TRUE(s_.wait_output("localhost could not be resolved (3: Host not found)", 5000))
      << s_.output();
}

// Something that is not an OCSP responder (an HTTP server answering 404
// with text/html) gives no staple.
TEST_F(Ocsp, AnswersThatAreNotOcspAreRefused) {
  const int port = test::free_port();
  const int web = test::free_port();
  ASSERT_TRUE(
      s_.start("server {\n listen 127.0.0.1:" + std::to_string(web) + ";\n}\n" +
               server_block(port, "ssl_stapling on;\n ssl_stapling_responder http://127.0.0.1:" +
                                      std::to_string(web) +
                                      "/;\n ssl_certificate ../end-int.crt;\n"
                                      " ssl_certificate_key ../end.key;")))
      << s_.output();
  EXPECT_EQ(staple(port), "");
  EXPECT_TRUE(
      s_.wait_output("OCSP responder sent invalid \"Content-Type\" header: \"text/html\"", 10000))
      << s_.output();
}

TEST_F(Ocsp, StaplingDirectivesAreChecked) {
  auto [rc, out] = test::check_http_conf(s_, "ssl_stapling maybe;");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("invalid value \"maybe\""), std::string::npos) << out;
  std::tie(rc, out) = test::check_http_conf(
      s_, "ssl_stapling on;\nssl_stapling_file missing.der;\n" +
              server_block(test::free_port(),
                           " ssl_certificate ../end-int.crt;\n ssl_certificate_key ../end.key;"));
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("BIO_new_file(\"" + s_.dir() + "/conf/missing.der\") failed"),
            std::string::npos)
      << out;
}

// ---- ssl_ocsp: client certificates ------------------------------------------

class ClientOcsp : public Ocsp {
 protected:
  bool start_verify(const std::string& extra) {
    port_ = test::free_port();
    return s_.start(
        "access_log off;\n" +
        server_block(port_,
                     " ssl_certificate ../end-int.crt;\n ssl_certificate_key ../end.key;\n"
                     " ssl_verify_client on;\n ssl_verify_depth 2;\n"
                     " ssl_client_certificate ../trusted.crt;\n"
                     " add_header X-Verify $ssl_client_verify always;\n" +
                         extra));
  }
  Response get_as(const std::string& who) {
    TlsOptions o;
    o.cert = s_.path(who + ".crt");
    o.key = s_.path(who + ".key");
    TlsClient c(port_, o);
    if (!c.handshake()) return {};
    if (!c.send(test::simple_get("/"))) return {};
    return c.read_response();
  }
  int port_ = 0;
};

TEST_F(ClientOcsp, AGoodCertificateIsAccepted) {
  start_responder();
  ASSERT_TRUE(start_verify(" ssl_ocsp leaf;")) << s_.output();
  Response r = get_as("end");
  EXPECT_EQ(r.status, 200) << r.head << s_.output();
  EXPECT_EQ(r.header("x-verify"), "SUCCESS");
}

TEST_F(ClientOcsp, ARevokedCertificateIsRefused) {
  start_responder();
  ASSERT_TRUE(start_verify(" ssl_ocsp leaf;")) << s_.output();
  Response r = get_as("revoked");
  EXPECT_EQ(r.status, 400) << r.head << s_.output();
  EXPECT_EQ(r.header("x-verify"), "FAILED:certificate revoked");
  EXPECT_TRUE(s_.wait_output("client SSL certificate verify error: certificate revoked"))
      << s_.output();
}

// No answer to be had: the request is refused, as nginx refuses it.
TEST_F(ClientOcsp, AStatusThatCannotBeHadFailsTheRequest) {
  ASSERT_TRUE(start_verify(" ssl_ocsp leaf;")) << s_.output();
  Response r = get_as("end");
  EXPECT_EQ(r.status, 400) << r.head << s_.output();
  EXPECT_EQ(r.header("x-verify"), "FAILED:certificate status request failed");
}

// ssl_ocsp on asks about the intermediate too; its AIA names the responder,
// which answers only for the intermediate's certificates: the request for
// the intermediate (issued by the root) gets no usable answer.
TEST_F(ClientOcsp, OnChecksTheWholeChain) {
  start_responder();
  ASSERT_TRUE(start_verify(" ssl_ocsp on;")) << s_.output();
  Response r = get_as("end");
  EXPECT_EQ(r.status, 400) << r.head << s_.output();
  EXPECT_EQ(r.header("x-verify").rfind("FAILED:certificate status", 0), 0u) << r.head;
}

// ssl_ocsp_responder replaces the AIA's; ssl_ocsp_cache keeps the answer,
// so the responder is not needed again while it is valid.
TEST_F(ClientOcsp, TheCacheAnswersWhileTheResponderIsGone) {
  start_responder();
  ASSERT_TRUE(
      start_verify(" ssl_ocsp leaf;\n ssl_ocsp_cache shared:OCSP:1m;\n"
                   " ssl_ocsp_responder http://127.0.0.1:" +
                   std::to_string(ocsp_port_) + ";"))
      << s_.output();
  Response first = get_as("dead");
  EXPECT_EQ(first.status, 200) << first.head << s_.output();
  responder_.reset();
  Response second = get_as("dead");
  EXPECT_EQ(second.status, 200) << second.head << s_.output();
  EXPECT_EQ(second.header("x-verify"), "SUCCESS");
  // Another certificate is not in the cache: its request fails.
  Response other = get_as("ec-end");
  EXPECT_EQ(other.status, 400) << other.head;
}

TEST_F(ClientOcsp, DirectivesAreChecked) {
  auto [rc, out] = test::check_http_conf(
      s_, server_block(test::free_port(),
                       " ssl_certificate ../end-int.crt;\n ssl_certificate_key ../end.key;\n"
                       " ssl_verify_client optional_no_ca;\n ssl_ocsp on;"));
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("\"ssl_ocsp\" is incompatible with \"ssl_verify_client optional_no_ca\""),
            std::string::npos)
      << out;
  std::tie(rc, out) = test::check_http_conf(s_, "ssl_ocsp_cache shared:OCSP:1k;");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("OCSP cache \"shared:OCSP:1k\" is too small"), std::string::npos) << out;
  std::tie(rc, out) = test::check_http_conf(s_, "ssl_ocsp_cache OCSP;");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("invalid OCSP cache \"OCSP\""), std::string::npos) << out;
  std::tie(rc, out) = test::check_http_conf(
      s_, server_block(test::free_port(),
                       " ssl_certificate ../end-int.crt;\n ssl_certificate_key ../end.key;\n"
                       " ssl_verify_client on;\n ssl_client_certificate ../trusted.crt;\n"
                       " ssl_ocsp on;\n ssl_ocsp_responder ftp://127.0.0.1;"));
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("invalid URL prefix in OCSP responder \"ftp://127.0.0.1\" in "
                     "\"ssl_ocsp_responder\""),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace vigil
