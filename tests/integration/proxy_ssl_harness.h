#pragma once
// "proxy_pass https://" against a real nginx (/usr/sbin/nginx) with TLS: a
// throwaway PKI made by the test (ca signs "localhost" and "other.test",
// wrongca signs nothing we use, clientca signs the client certificate
// "client"), nginx started in its own prefix with
//
//   tls_   : "listen ssl", server "localhost" (server.crt) and, chosen by SNI,
//            "other.test" (other.crt, answers "other\n"); /echo and /ws go to
//            the test's Backend (bodies and the WebSocket echo)
//   mtls_  : "listen ssl" with ssl_verify_client on (clientca)
//   plain_ : plain HTTP, for "https to a plain port"
//
// and an access log that tells which connection served each request, the
// SNI name, whether the session was resumed and the client certificate.
// The Vigil under test (v_) is the TLS client; its prefix holds the PKI.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "integration/proxy_backend.h"
#include "integration/tls_harness.h"

namespace vigil::test {

inline const std::string kNginx = "/usr/sbin/nginx";

// One access log line of the nginx upstream, split into its fields.
struct NginxHit {
  std::string port, connection, requests, sni, reused, protocol, dn, request, status;
};

// An upgrade-aware echo for /ws, the request body back for anything else.
inline bool echo_backend(BackendConn& c, const BackendRequest& r) {
  if (r.header("upgrade") != "websocket") {
    return c.send(
        backend_response(200, r.method + " " + std::to_string(r.body.size()) + "\n" + r.body));
  }
  return upgrade_and_echo(c);
}

class ProxySsl : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string d = v_.dir();
    ASSERT_TRUE(v_.pki_ok());
    ASSERT_TRUE(make_cert(d, "other", "other.test", "ca"));
    ASSERT_TRUE(make_ca(d, "wrongca"));
    ASSERT_TRUE(make_ca(d, "clientca"));
    ASSERT_TRUE(make_cert(d, "client", "client", "clientca"));
    ASSERT_TRUE(start_nginx()) << nginx_.log();
  }

  // The Vigil under test exits cleanly (and, under the asan preset, without
  // a sanitizer report: sessions, contexts and cached connections freed).
  void TearDown() override {
    if (v_.running()) {
      EXPECT_EQ(v_.stop(), 0);
    }
  }

  std::string pki(const std::string& file) const { return v_.path(file); }

  bool start_nginx() {
    const std::string d = v_.dir() + "/";
    nginx_.write("html/index.html", "nginx tls\n");
    std::string big(16 << 20, 'x');
    for (std::size_t i = 0; i < big.size(); i += 4096) {
      big[i] = static_cast<char>('a' + i / 4096 % 26);  // a shifted block shows up
    }
    nginx_.write("html/big.bin", big);
    const std::string be = "127.0.0.1:" + std::to_string(backend_.port());
    nginx_.write_conf(
        "daemon off;\nmaster_process off;\nerror_log stderr notice;\npid logs/nginx.pid;\n"
        "events { worker_connections 256; }\n"
        "http {\n"
        "  log_format t '$server_port|$connection|$connection_requests|$ssl_server_name|"
        "$ssl_session_reused|$ssl_protocol|$ssl_client_s_dn|$request|$status';\n"
        "  access_log logs/access.log t;\n"
        "  ssl_session_cache shared:S:1m;\n"
        "  ssl_protocols TLSv1.2 TLSv1.3;\n"
        "  server { listen 127.0.0.1:" +
        std::to_string(tls_) + " ssl; server_name localhost; root html;\n" +
        "    ssl_certificate " + d + "server.crt; ssl_certificate_key " + d + "server.key;\n" +
        "    location /echo { proxy_pass http://" + be +
        "; proxy_request_buffering off; }\n"
        "    location /ws { proxy_pass http://" +
        be +
        "; proxy_http_version 1.1; proxy_set_header Upgrade $http_upgrade;"
        " proxy_set_header Connection upgrade; }\n"
        "  }\n"
        "  server { listen 127.0.0.1:" +
        std::to_string(tls_) + " ssl; server_name other.test;\n" + "    ssl_certificate " + d +
        "other.crt; ssl_certificate_key " + d + "other.key;\n" +
        "    location / { return 200 \"other\\n\"; }\n  }\n"
        "  server { listen 127.0.0.1:" +
        std::to_string(mtls_) + " ssl; server_name localhost;\n" + "    ssl_certificate " + d +
        "server.crt; ssl_certificate_key " + d + "server.key;\n" +
        "    ssl_verify_client on; ssl_client_certificate " + d + "clientca.crt;\n" +
        "    location / { return 200 \"client $ssl_client_s_dn\\n\"; }\n  }\n"
        "  server { listen 127.0.0.1:" +
        std::to_string(plain_) + "; location / { return 200 \"plain\\n\"; } }\n}\n");
    nginx_.launch("", 0);
    // nginx writes its pid file once its sockets are bound: before that a
    // connection could reach whoever else holds the port.
    const std::string pid = std::to_string(nginx_.master());
    return wait_for(
        [&] {
          if (nginx_.read("logs/nginx.pid") != pid + "\n") return false;
          for (int port : {tls_, mtls_, plain_}) {
            int fd = connect_loopback(port);
            if (fd == -1) return false;
            ::close(fd);
          }
          return true;
        },
        10000);
  }

  // Starts the Vigil under test with `body` inside its server block (which
  // listens on a port of its own) and `http` at the http level.
  bool start_vigil(const std::string& body, const std::string& http = "") {
    if (!v_.start(http + "\nserver { listen 127.0.0.1:0; access_log off;\n" + body + "\n}")) {
      return false;
    }
    front_ = v_.port();
    return front_ > 0;
  }

  Response get(const std::string& target, const std::string& extra = "") {
    Client c(front_);
    if (!c.ok() || !c.send(simple_get(target, "localhost", extra))) return {};
    return c.read_response();
  }

  // The upstream's access log once it has `n` lines (empty if it never does).
  std::vector<NginxHit> hits(std::size_t n) {
    std::vector<NginxHit> out;
    wait_for(
        [&] {
          out.clear();
          std::istringstream in(nginx_.read("logs/access.log"));
          std::string line;
          while (std::getline(in, line)) {
            std::vector<std::string> f;
            std::size_t pos = 0;
            for (;;) {
              std::size_t bar = line.find('|', pos);
              f.push_back(line.substr(pos, bar - pos));
              if (bar == std::string::npos) break;
              pos = bar + 1;
            }
            if (f.size() != 9) continue;
            out.push_back({f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8]});
          }
          return out.size() >= n;
        },
        5000);
    if (out.size() < n) out.clear();
    return out;
  }

  Backend backend_{echo_backend};
  TlsServer v_;
  ServerProcess nginx_{kNginx, "nginx.conf"};
  int tls_ = free_port();
  int mtls_ = free_port();
  int plain_ = free_port();
  int front_ = 0;
};

}  // namespace vigil::test
