// Certificates and reloads: a new certificate is served after a reload with
// no failed connection meanwhile; a bad key on reload leaves the old workers
// serving with an [emerg]; -t reports unreadable certificates and keys; an
// encrypted key loads with ssl_password_file, also in a server without a
// "listen ... ssl" (read as nginx reads it, when the configuration is); keys
// never reach the log.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

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

// nginx loads the certificate of every server that has one (inherited
// here from the http level), whether or not a "listen ... ssl" reaches it:
// a wrong password for a plain server's key is a configuration error.
std::string conf_plain_server_with_key(int port, int plain_port, const std::string& pw) {
  return "daemon off;\nmaster_process off;\nerror_log stderr notice;\npid logs/vigil.pid;\n"
         "events { }\nhttp {\n  access_log off;\n  ssl_certificate ../enc.crt;\n"
         "  ssl_certificate_key ../enc.key;\n  ssl_password_file ../pw;\n"
         "  server {\n    listen 127.0.0.1:" +
         std::to_string(port) +
         " ssl;\n    root html;\n  }\n"
         "  server {\n    listen 127.0.0.1:" +
         std::to_string(plain_port) + ";\n    server_name plain;\n    ssl_password_file ../" + pw +
         ";\n  }\n}\n";
}

bool make_encrypted_key(TlsServer& s) {
  if (!s.pki_ok() || !test::openssl_cli(s.dir(), {"pkey", "-in", "server.key", "-aes256",
                                                  "-passout", "pass:right", "-out", "enc.key"})) {
    return false;
  }
  s.write("enc.crt", s.read("server.crt"));
  s.write("pw", "right\n");
  s.write("html/index.html", "hi\n");
  return true;
}

TEST(TlsReload, KeyOfAServerWithoutSslListenIsLoadedWithItsPasswordFile) {
  TlsServer s;
  ASSERT_TRUE(make_encrypted_key(s));
  s.write("wrong", "wrong\n");
  const int port = test::free_port();
  const int plain = test::free_port();
  s.write("conf/vigil.conf", conf_plain_server_with_key(port, plain, "wrong"));
  auto [rc, out] = test::run({test::kVigil, "-p", s.dir(), "-c", "conf/vigil.conf", "-t"});
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("cannot load certificate key"), std::string::npos) << out;
  EXPECT_NE(out.find("vigil.conf:"), std::string::npos) << "the message names the line: " << out;

  s.write("conf/vigil.conf", conf_plain_server_with_key(port, plain, "pw"));
  auto [rc2, out2] = test::run({test::kVigil, "-p", s.dir(), "-c", "conf/vigil.conf", "-t"});
  EXPECT_EQ(rc2, 0) << out2;
}

// nginx-tests' ssl_password_file.t: the password file of a plain server is a
// FIFO whose writer blocks until the server opens and reads it.
TEST(TlsReload, PasswordFifoOfAServerWithoutSslListenIsRead) {
  TlsServer s;
  ASSERT_TRUE(make_encrypted_key(s));
  const std::string fifo = s.path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ::signal(SIGPIPE, SIG_IGN);  // a reader that goes away must not end the test
  std::atomic<bool> written{false};
  std::thread writer([&] {
    const int fd = ::open(fifo.c_str(), O_WRONLY);  // blocks until a reader opens it
    if (fd == -1) return;
    written = ::write(fd, "right\n", 6) == 6;
    ::close(fd);
  });
  const int port = test::free_port();
  const int plain = test::free_port();
  const bool started = s.start_raw(conf_plain_server_with_key(port, plain, "fifo"));
  bool read = false;
  for (int i = 0; i < 100 && !(read = written.load()); ++i) ::usleep(50000);
  if (!read) {
    // Release the writer: a reader that comes and goes.
    const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    if (fd != -1) {
      char b[16];
      for (int i = 0; i < 100 && !written.load(); ++i) ::usleep(10000);
      (void)::read(fd, b, sizeof b);
      ::close(fd);
    }
  }
  writer.join();
  EXPECT_TRUE(read) << "the server never read its password FIFO: " << s.output();
  ASSERT_TRUE(started) << s.output();
  EXPECT_EQ(served_cn(port), "localhost");
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
