// Certificates and reloads: a new certificate is served after a reload with
// no failed connection meanwhile; a bad key on reload leaves the old workers
// serving with an [emerg]; -t reports unreadable certificates and keys; an
// encrypted key loads with ssl_password_file; keys never reach the log.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "tls_harness.h"

namespace vigil {
namespace {

using test::TlsClient;
using test::TlsServer;

std::string conf(int port, const std::string& cert) {
  return "daemon off;\nerror_log stderr notice;\npid logs/vigil.pid;\nworker_processes 2;\n"
         "events { }\nhttp {\n  access_log off;\n  server {\n    listen 127.0.0.1:" +
         std::to_string(port) + " ssl;\n    root html;\n    ssl_certificate ../" + cert +
         ".crt;\n    ssl_certificate_key ../" + cert + ".key;\n  }\n}\n";
}

// The common name of the certificate a fresh connection gets ("" on failure).
std::string served_cn(int port) {
  TlsClient c(port);
  if (!c.handshake()) return "";
  if (!c.send(test::simple_get("/"))) return "";
  test::Response r = c.read_response();
  return r.status == 200 ? c.peer_cn() : "";
}

TEST(TlsReload, NewCertificateWithoutAFailedConnection) {
  TlsServer s;
  ASSERT_TRUE(s.pki_ok());
  ASSERT_TRUE(test::make_cert(s.dir(), "next", "next.example", "ca"));
  s.write("html/index.html", "hi\n");
  int port = test::free_port();
  ASSERT_TRUE(s.start_raw(conf(port, "server"), "running:", 2)) << s.output();
  ASSERT_EQ(served_cn(port), "localhost");

  std::atomic<bool> done{false};
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 3; ++t) {
    clients.emplace_back([&] {
      while (!done) (served_cn(port).empty() ? failed : ok)++;
    });
  }
  ::usleep(200000);
  s.write("conf/vigil.conf", conf(port, "next"));
  s.process().signal(SIGHUP);
  ASSERT_TRUE(s.wait_output("reconfigured:")) << s.output();
  // Poll until the new generation answers with the new certificate.
  std::string cn;
  for (int i = 0; i < 200 && cn != "next.example"; ++i) cn = served_cn(port);
  ::usleep(200000);
  done = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(cn, "next.example");
  EXPECT_EQ(failed.load(), 0) << s.output();
  EXPECT_GT(ok.load(), 10);
}

TEST(TlsReload, ABadKeyKeepsTheOldWorkersWithAnEmerg) {
  TlsServer s;
  ASSERT_TRUE(s.pki_ok());
  ASSERT_TRUE(test::make_cert(s.dir(), "other", "other.example", "ca"));
  s.write("html/index.html", "hi\n");
  int port = test::free_port();
  ASSERT_TRUE(s.start_raw(conf(port, "server"), "running:", 2)) << s.output();
  // A certificate with someone else's key.
  s.write("mixed.crt", s.read("server.crt"));
  s.write("mixed.key", s.read("other.key"));
  s.write("conf/vigil.conf", conf(port, "mixed"));
  s.process().signal(SIGHUP);
  ASSERT_TRUE(s.wait_output("[emerg]")) << s.output();
  EXPECT_NE(s.output().find("does not match certificate"), std::string::npos) << s.output();
  EXPECT_EQ(served_cn(port), "localhost") << "the old workers still serve";
  // The key's contents never reach the log.
  const std::string key = s.read("other.key");
  const std::string body = key.substr(key.find('\n') + 1, 40);
  EXPECT_EQ(s.output().find(body), std::string::npos);
}

TEST(TlsReload, TestModeReportsUnreadableCertificateAndKey) {
  TlsServer s;
  ASSERT_TRUE(s.pki_ok());
  int port = test::free_port();
  s.write("conf/vigil.conf", conf(port, "missing"));
  auto [rc, out] = test::run({test::kVigil, "-p", s.dir(), "-c", "conf/vigil.conf", "-t"});
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("cannot load certificate"), std::string::npos) << out;
  EXPECT_NE(out.find("missing.crt"), std::string::npos) << out;
  EXPECT_NE(out.find("vigil.conf:"), std::string::npos) << "the message names the line: " << out;

  s.write("nokey.crt", s.read("server.crt"));
  s.write("conf/vigil.conf", conf(port, "nokey"));
  auto [rc2, out2] = test::run({test::kVigil, "-p", s.dir(), "-c", "conf/vigil.conf", "-t"});
  EXPECT_NE(rc2, 0);
  EXPECT_NE(out2.find("cannot load certificate key"), std::string::npos) << out2;

  s.write("conf/vigil.conf", conf(port, "server"));
  auto [rc3, out3] = test::run({test::kVigil, "-p", s.dir(), "-c", "conf/vigil.conf", "-t"});
  EXPECT_EQ(rc3, 0) << out3;
}

TEST(TlsReload, EncryptedKeyWithPasswordFile) {
  TlsServer s;
  ASSERT_TRUE(s.pki_ok());
  ASSERT_TRUE(test::openssl_cli(s.dir(), {"pkey", "-in", "server.key", "-aes256", "-passout",
                                          "pass:right", "-out", "enc.key"}));
  s.write("enc.crt", s.read("server.crt"));
  s.write("pw", "wrong\nright\n");
  int port = test::free_port();
  std::string c = conf(port, "enc");
  c.insert(c.find("  }\n}"), "    ssl_password_file ../pw;\n");
  s.write("conf/vigil.conf", c);
  auto [rc, out] = test::run({test::kVigil, "-p", s.dir(), "-c", "conf/vigil.conf", "-t"});
  EXPECT_EQ(rc, 0) << out;
  // Without the file the key cannot be read (and nothing prompts).
  s.write("conf/vigil.conf", conf(port, "enc"));
  auto [rc2, out2] = test::run({test::kVigil, "-p", s.dir(), "-c", "conf/vigil.conf", "-t"});
  EXPECT_NE(rc2, 0);
  EXPECT_NE(out2.find("cannot load certificate key"), std::string::npos) << out2;
}

TEST(TlsReload, ListenSslWithoutCertificateIsRefused) {
  TlsServer s;
  int port = test::free_port();
  s.write("conf/vigil.conf", "events {}\nhttp {\n server {\n  listen 127.0.0.1:" +
                                 std::to_string(port) + " ssl;\n }\n}\n");
  auto [rc, out] = test::run({test::kVigil, "-p", s.dir(), "-c", "conf/vigil.conf", "-t"});
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("no \"ssl_certificate\" is defined"), std::string::npos) << out;
}

}  // namespace
}  // namespace vigil
