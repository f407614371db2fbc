// TLS session resumption: OpenSSL's builtin cache, the shared cache in a
// zone (across two workers, across a reload, eviction when full), session
// tickets (across workers) and ticket key rotation with key files.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "tls_harness.h"

namespace vigil {
namespace {

using test::TlsClient;
using test::TlsOptions;
using test::TlsServer;

// One request on a new connection; the session (to free) when `out` is set.
bool request(int port, const TlsOptions& o, const std::string& path, bool* reused,
             SSL_SESSION** out = nullptr) {
  TlsClient c(port, o);
  if (!c.handshake()) return false;
  if (!c.send(test::simple_get(path))) return false;
  test::Response r = c.read_response();
  if (!r.complete) return false;
  if (reused != nullptr) *reused = c.reused();
  if (out != nullptr) *out = c.session();
  return true;
}

struct Session {
  SSL_SESSION* s = nullptr;
  ~Session() {
    if (s != nullptr) SSL_SESSION_free(s);
  }
};

void start(TlsServer& s, int port, const std::string& extra) {
  ASSERT_TRUE(s.pki_ok());
  s.write("html/index.html", "hello\n");
  ASSERT_TRUE(s.start("access_log off;\n" + test::tls_server_block(port, extra))) << s.output();
}

class TlsVersions : public ::testing::TestWithParam<int> {};

// A key file whose bytes are all `fill` (nginx-tests' '1' x 48).
void write_key_file(const std::string& path, std::size_t size, char fill) {
  std::ofstream(path, std::ios::binary) << std::string(size, fill);
}

TEST_P(TlsVersions, BuiltinCacheResumesAndOffDoesNot) {
  TlsServer s;
  int port = test::free_port();
  start(s, port, "ssl_session_cache builtin:1000;\n  ssl_session_tickets off;");
  const TlsOptions first{.max_version = GetParam()};
  Session sess;
  bool reused = true;
  ASSERT_TRUE(request(port, first, "/", &reused, &sess.s));
  EXPECT_FALSE(reused);
  TlsOptions again{.max_version = GetParam(), .session = sess.s};
  ASSERT_TRUE(request(port, again, "/", &reused));
  EXPECT_TRUE(reused);
  s.stop();

  TlsServer off;
  int port2 = test::free_port();
  start(off, port2, "ssl_session_cache off;\n  ssl_session_tickets off;");
  Session sess2;
  ASSERT_TRUE(request(port2, first, "/", &reused, &sess2.s));
  again.session = sess2.s;
  ASSERT_TRUE(request(port2, again, "/", &reused));
  EXPECT_FALSE(reused) << "no cache and no tickets: nothing to resume";
}

TEST_P(TlsVersions, TicketsResumeWithoutACache) {
  TlsServer s;
  int port = test::free_port();
  start(s, port, "ssl_session_cache off;");
  Session sess;
  bool reused = true;
  ASSERT_TRUE(request(port, {.max_version = GetParam()}, "/", &reused, &sess.s));
  EXPECT_FALSE(reused);
  ASSERT_TRUE(request(port, {.max_version = GetParam(), .session = sess.s}, "/", &reused));
  EXPECT_TRUE(reused);
}

// nginx-tests' ssl_sni_sessions.t: SNI switches the connection to another
// server block with its own session cache or ticket keys. OpenSSL looks a
// session up (or decrypts a ticket) before the SNI callback runs, with the
// callbacks of the context the handshake began with, so sessions must be
// stored and tickets made under that context's cache and keys too (nginx's
// ssl->session_ctx); otherwise nothing made for the SNI server resumes.
TEST_P(TlsVersions, SniSelectedServerWithItsOwnCacheOrTicketKeyResumes) {
  TlsServer s;
  ASSERT_TRUE(s.pki_ok());
  write_key_file(s.path("ticket1.key"), 48, '1');
  write_key_file(s.path("ticket2.key"), 48, '2');
  s.write("html/index.html", "hello\n");
  const int cache_port = test::free_port();
  const int ticket_port = test::free_port();
  ASSERT_TRUE(s.start(
      "access_log off;\n" +
      test::tls_server_block(cache_port,
                             "ssl_session_tickets off;\n  ssl_session_cache shared:cache1:1m;",
                             "default") +
      test::tls_server_block(cache_port,
                             "ssl_session_tickets off;\n  ssl_session_cache shared:cache2:1m;",
                             "nocache") +
      test::tls_server_block(ticket_port, "ssl_session_ticket_key ../ticket1.key;", "default") +
      test::tls_server_block(ticket_port, "ssl_session_ticket_key ../ticket2.key;", "tickets")))
      << s.output();
  for (const auto& [port, name] : {std::pair{cache_port, "default"},
                                   {cache_port, "nocache"},
                                   {ticket_port, "default"},
                                   {ticket_port, "tickets"}}) {
    SCOPED_TRACE(name);
    Session sess;
    bool reused = true;
    const TlsOptions first{.sni = name, .max_version = GetParam()};
    ASSERT_TRUE(request(port, first, "/", &reused, &sess.s));
    EXPECT_FALSE(reused);
    const TlsOptions again{.sni = name, .max_version = GetParam(), .session = sess.s};
    ASSERT_TRUE(request(port, again, "/", &reused));
    EXPECT_TRUE(reused) << "a session made for the SNI-selected server resumes";
  }
}

INSTANTIATE_TEST_SUITE_P(Version, TlsVersions, ::testing::Values(TLS1_2_VERSION, TLS1_3_VERSION),
                         [](const auto& p) {
                           return p.param == TLS1_2_VERSION ? "tls12" : "tls13";
                         });

void write_key(const std::string& path, std::size_t size, char fill) {
  std::string k(size, fill);
  for (std::size_t i = 0; i < size; ++i) k[i] = static_cast<char>(fill + i * 7);
  std::ofstream(path, std::ios::binary) << k;
}

TEST(TlsTickets, KeyRotationFirstEncryptsAllDecrypt) {
  TlsServer s;
  write_key(s.path("a.key"), 48, 'a');
  write_key(s.path("b.key"), 80, 'b');
  int port = test::free_port();
  const std::string no_cache = "ssl_session_cache off;\n  ";
  start(s, port, no_cache + "ssl_session_ticket_key ../a.key;");
  Session under_a;
  bool reused = true;
  ASSERT_TRUE(request(port, {.max_version = TLS1_2_VERSION}, "/", &reused, &under_a.s));
  s.stop();

  // b encrypts now, a still decrypts: the old ticket resumes.
  start(s, port, no_cache + "ssl_session_ticket_key ../b.key;\n  ssl_session_ticket_key ../a.key;");
  Session under_b;
  ASSERT_TRUE(request(port, {.max_version = TLS1_2_VERSION, .session = under_a.s}, "/", &reused,
                      &under_b.s));
  EXPECT_TRUE(reused) << "a ticket under the second key decrypts";
  s.stop();

  // a is gone: its ticket no longer resumes, b's does.
  start(s, port, no_cache + "ssl_session_ticket_key ../b.key;");
  ASSERT_TRUE(request(port, {.max_version = TLS1_2_VERSION, .session = under_a.s}, "/", &reused));
  EXPECT_FALSE(reused);
  ASSERT_TRUE(request(port, {.max_version = TLS1_2_VERSION, .session = under_b.s}, "/", &reused));
  EXPECT_TRUE(reused) << "the renewed ticket was encrypted with the new first key";
}

TEST(TlsTickets, BadKeyFileIsAConfigurationError) {
  TlsServer s;
  write_key(s.path("short.key"), 47, 's');
  s.write("conf/vigil.conf",
          "events {}\nhttp {\n" +
              test::tls_server_block(test::free_port(), "ssl_session_ticket_key ../short.key;") +
              "}\n");
  auto [rc, out] = test::run({test::kVigil, "-p", s.dir(), "-c", "conf/vigil.conf", "-t"});
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("must be 48 or 80 bytes"), std::string::npos) << out;
}

// ---- two workers ----------------------------------------------------------------

// The pid of the worker that logged the 404 for `path` ("" until it shows).
std::string worker_of(TlsServer& h, const std::string& path) {
  std::smatch m;
  const std::string log = h.output();
  std::regex re("\\[error\\] (\\d+)#0: \\*\\d+ open\\(\\) \"[^\"]*" + path + "\" failed");
  return std::regex_search(log, m, re) ? m[1].str() : "";
}

void start_workers(TlsServer& h, int port, const std::string& ssl) {
  ASSERT_TRUE(h.pki_ok());
  ASSERT_TRUE(
      h.start_raw("daemon off;\nerror_log stderr notice;\nworker_processes 2;\nevents { }\n"
                  "http {\n  access_log off;\n  server {\n    listen 127.0.0.1:" +
                      std::to_string(port) +
                      " ssl reuseport;\n    root html;\n    ssl_certificate ../server.crt;\n"
                      "    ssl_certificate_key ../server.key;\n    " +
                      ssl + "\n  }\n}\n",
                  "running:", 2))
      << h.output();
}

// Makes a session in one worker and resumes it until a resumption lands on
// the other worker (reuseport spreads connections by their ports).
void resume_on_the_other_worker(TlsServer& h, int port, int version) {
  Session sess;
  bool reused = true;
  ASSERT_TRUE(request(port, {.max_version = version}, "/first", &reused, &sess.s));
  ASSERT_TRUE(h.wait_output("/first\" failed")) << h.output();
  const std::string origin = worker_of(h, "/first");
  ASSERT_FALSE(origin.empty());
  bool crossed = false;
  for (int i = 0; i < 64 && !crossed; ++i) {
    const std::string path = "/again" + std::to_string(i);
    ASSERT_TRUE(request(port, {.max_version = version, .session = sess.s}, path, &reused));
    EXPECT_TRUE(reused) << path;
    ASSERT_TRUE(h.wait_output(path + "\" failed")) << h.output();
    crossed = worker_of(h, path) != origin;
  }
  EXPECT_TRUE(crossed) << "no connection reached the second worker";
}

TEST(TlsWorkers, SharedCacheResumesOnTheOtherWorker) {
  TlsServer h;
  int port = test::free_port();
  start_workers(h, port, "ssl_session_cache shared:SSL:1m;\n    ssl_session_tickets off;");
  resume_on_the_other_worker(h, port, TLS1_2_VERSION);
  resume_on_the_other_worker(h, port, TLS1_3_VERSION);
}

TEST(TlsWorkers, TicketsResumeOnTheOtherWorker) {
  TlsServer h;
  int port = test::free_port();
  start_workers(h, port, "ssl_session_cache off;");
  resume_on_the_other_worker(h, port, TLS1_3_VERSION);
}

TEST(TlsWorkers, SharedCacheKeepsSessionsAcrossAReload) {
  TlsServer h;
  int port = test::free_port();
  start_workers(h, port, "ssl_session_cache shared:SSL:1m;\n    ssl_session_tickets off;");
  Session sess;
  bool reused = true;
  ASSERT_TRUE(request(port, {.max_version = TLS1_2_VERSION}, "/", &reused, &sess.s));
  h.process().signal(SIGHUP);
  ASSERT_TRUE(h.wait_output("reconfigured:")) << h.output();
  ASSERT_TRUE(h.wait_output_count("running:", 4)) << h.output();
  ASSERT_TRUE(request(port, {.max_version = TLS1_2_VERSION, .session = sess.s}, "/", &reused));
  EXPECT_TRUE(reused) << "the new workers find the session in the kept zone";
}

TEST(TlsWorkers, AFullSharedCacheEvictsTheOldestSessions) {
  TlsServer s;
  int port = test::free_port();
  // The smallest zone (8 pages) holds a few dozen sessions.
  start(s, port, "ssl_session_cache shared:tiny:32k;\n  ssl_session_tickets off;");
  const TlsOptions v12{.max_version = TLS1_2_VERSION};
  Session first, last;
  bool reused = true;
  ASSERT_TRUE(request(port, v12, "/", &reused, &first.s));
  for (int i = 0; i < 150; ++i) ASSERT_TRUE(request(port, v12, "/", &reused));
  ASSERT_TRUE(request(port, v12, "/", &reused, &last.s));
  ASSERT_TRUE(request(port, {.max_version = TLS1_2_VERSION, .session = last.s}, "/", &reused));
  EXPECT_TRUE(reused) << "the newest session is there";
  ASSERT_TRUE(request(port, {.max_version = TLS1_2_VERSION, .session = first.s}, "/", &reused));
  EXPECT_FALSE(reused) << "the oldest was evicted";
}

// Under TLS 1.3 with tickets the ticket is the session: OpenSSL still
// offers every ticket to the cache (two per handshake), but nothing would
// ever look them up, so they must not take the place of TLS 1.2 sessions,
// which resume only through the cache.
TEST(TlsWorkers, Tls13TicketsDoNotCrowdTls12SessionsOutOfTheSharedCache) {
  TlsServer s;
  int port = test::free_port();
  start(s, port, "ssl_session_cache shared:tiny:32k;\n  ssl_session_tickets on;");
  const TlsOptions v12{.max_version = TLS1_2_VERSION, .tickets = false};
  Session first, ticket;
  bool reused = true;
  ASSERT_TRUE(request(port, v12, "/", &reused, &first.s));
  for (int i = 0; i < 150; ++i) {
    ASSERT_TRUE(
        request(port, {.min_version = TLS1_3_VERSION}, "/", &reused, i == 0 ? &ticket.s : nullptr));
  }
  ASSERT_TRUE(request(port, {.max_version = TLS1_2_VERSION, .session = first.s, .tickets = false},
                      "/", &reused));
  EXPECT_TRUE(reused) << "the TLS 1.2 session is still in the cache";
  ASSERT_TRUE(request(port, {.min_version = TLS1_3_VERSION, .session = ticket.s}, "/", &reused));
  EXPECT_TRUE(reused) << "TLS 1.3 resumes by its ticket";
}

}  // namespace
}  // namespace vigil
