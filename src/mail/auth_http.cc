// The auth_http client of a mail session (nginx's ngx_mail_auth_http_module):
// the request nginx sends, over a connection of the worker's loop, and the
// Auth-* answer, read with the codec's response parser.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "codec/response_parser.h"
#include "event/proxy_protocol.h"
#include "event/tls/tls.h"
#include "mail/counters.h"
#include "mail/session_internal.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::mail::detail {

// nginx's escaping of Auth-User / Auth-Pass / Auth-Salt values.
std::string escape(std::string_view v) {
  std::string out;
  for (unsigned char ch : v) {
    if (ch <= 0x20 || ch == '%' || ch >= 0x7f) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out;
}

std::string unescape(std::string_view v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    auto hex = [](char ch) -> int {
      if (ch >= '0' && ch <= '9') return ch - '0';
      if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
      if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
      return -1;
    };
    if (v[i] == '%' && i + 2 < v.size() + 0 && hex(v[i + 1]) >= 0 && hex(v[i + 2]) >= 0) {
      out += static_cast<char>(hex(v[i + 1]) * 16 + hex(v[i + 2]));
      i += 2;
    } else {
      out += v[i];
    }
  }
  return out;
}

namespace {

// What an OpenSSL printer wrote into a memory BIO (nginx's ngx_ssl_get_*
// print the same way); "" when it failed.
template <class Print>
std::string bio_text(Print&& print) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  if (bio == nullptr || !print(bio.get())) return {};
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return len > 0 ? std::string(data, static_cast<std::size_t>(len)) : std::string();
}

// The client certificate's Auth-SSL-* lines, when the server asked for one
// (ssl_verify_client), as nginx's ngx_mail_auth_http_create_request: the
// verification result always, the certificate's facts when one was sent.
void client_cert_headers(const Session& s, std::string& r) {
  SSL* ssl = s.c->ssl->ssl;
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr) {
    r += "Auth-SSL-Verify: NONE\r\n";
    return;
  }
  const long rc = SSL_get_verify_result(ssl);
  r += "Auth-SSL-Verify: ";
  r += rc == X509_V_OK ? std::string("SUCCESS")
                       : std::string("FAILED:") + X509_verify_cert_error_string(rc);
  r += "\r\n";
  // RFC 2253 names ("CN=b,O=a"), as nginx's $ssl_client_s_dn.
  const auto name = [&](X509_NAME* n) {
    return bio_text([n](BIO* b) { return X509_NAME_print_ex(b, n, 0, XN_FLAG_RFC2253) >= 0; });
  };
  const auto line = [&r](const char* field, const std::string& value) {
    if (!value.empty()) r += std::string(field) + ": " + value + "\r\n";
  };
  line("Auth-SSL-Subject", name(X509_get_subject_name(cert)));
  line("Auth-SSL-Issuer", name(X509_get_issuer_name(cert)));
  line("Auth-SSL-Serial",
       bio_text([cert](BIO* b) { return i2a_ASN1_INTEGER(b, X509_get0_serialNumber(cert)) > 0; }));
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  if (X509_digest(cert, EVP_sha1(), md, &mdlen) == 1) {
    std::string hex;
    for (unsigned int i = 0; i < mdlen; ++i) {
      char buf[3];
      std::snprintf(buf, sizeof buf, "%02x", md[i]);
      hex += buf;
    }
    line("Auth-SSL-Fingerprint", hex);
  }
  if (s.conf->auth_http_pass_client_cert) {
    // The PEM, its newlines and spaces %-escaped onto one line.
    line("Auth-SSL-Cert",
         escape(bio_text([cert](BIO* b) { return PEM_write_bio_X509(b, cert) == 1; })));
  }
}

}  // namespace

void build_auth_request(Session& s) {
  const MailSrvConf& cf = *s.conf;
  std::string& r = s.auth_req;
  r.clear();
  r += "GET " + cf.auth_uri + " HTTP/1.0\r\nHost: " + cf.auth_host + "\r\n";
  r += "Auth-Method: " + s.method + "\r\n";
  r += "Auth-User: " + escape(s.login) + "\r\n";
  r += "Auth-Pass: " + escape(s.passwd) + "\r\n";
  if (!s.salt.empty() && (s.method == "apop" || s.method == "cram-md5")) {
    r += "Auth-Salt: " + escape(s.salt) + "\r\n";
  }
  r += std::string("Auth-Protocol: ") + proto_name(s.proto) + "\r\n";
  r += "Auth-Login-Attempt: " + std::to_string(s.attempts + 1) + "\r\n";
  r += "Client-IP: " + s.client_addr + "\r\n";
  r += "Client-Host: " + s.host + "\r\n";
  if (const ProxyProtocolInfo* pp = s.c->proxy_protocol; pp != nullptr && !pp->src_addr.empty()) {
    // What the PROXY protocol header said ("listen ... proxy_protocol").
    r += "Proxy-Protocol-Addr: " + std::string(pp->src_addr) + "\r\n";
    r += "Proxy-Protocol-Port: " + std::string(pp->src_port_text) + "\r\n";
    r += "Proxy-Protocol-Server-Addr: " + std::string(pp->dst_addr) + "\r\n";
    r += "Proxy-Protocol-Server-Port: " + std::string(pp->dst_port_text) + "\r\n";
  }
  if (s.proto == Protocol::kSmtp) r += "Auth-SMTP-Helo: " + escape(s.helo) + "\r\n";
  if (s.method == "none") {
    // The envelope (smtp_auth none); a line has no CR or LF to escape.
    r += "Auth-SMTP-From: " + s.smtp_from + "\r\n";
    r += "Auth-SMTP-To: " + s.smtp_to + "\r\n";
  }
  if (s.tls && s.c->ssl != nullptr && s.c->ssl->ssl != nullptr) {
    r += "Auth-SSL: on\r\n";
    if (std::string_view v = tls_protocol(*s.c); !v.empty())
      r += "Auth-SSL-Protocol: " + std::string(v) + "\r\n";
    if (std::string_view v = tls_cipher(*s.c); !v.empty())
      r += "Auth-SSL-Cipher: " + std::string(v) + "\r\n";
    if (cf.ssl.verify != TlsVerify::kOff) client_cert_headers(s, r);
  }
  for (const auto& [name, value] : cf.auth_http_headers) r += name + ": " + value + "\r\n";
  r += "\r\n";
}

void auth_done(Session& s);
void auth_handler(Event& ev);

void auth_fail(Session& s, const char* why, int err) {
  VIGIL_LOG(*s.c->log, kError, err, "%s while in http auth state, client: %s, server: %s", why,
            s.client_addr.c_str(), s.conf->auth_peer.c_str());
  if (s.auth != nullptr) {
    s.c->loop->pool().close_connection(*s.auth);
    s.auth = nullptr;
  }
  internal_error(s);
  flush(s);
}

void start_auth_http(Session& s) {
  Connection& c = *s.c;
  s.state = State::kAuthHttp;
  s.passwd_set = s.method != "external" && s.method != "none";
  build_auth_request(s);
  s.auth_sent = 0;
  s.auth_resp.clear();
  c.loop->del_timer(*c.read);
  s.auth_pc = PeerConnection{};
  std::memcpy(&s.auth_pc.addr, &s.conf->auth_addr, s.conf->auth_addrlen);
  s.auth_pc.addrlen = s.conf->auth_addrlen;
  s.auth_pc.name = s.conf->auth_peer;
  s.auth_pc.log = c.log;
  int rc = event_connect_peer(*c.loop, s.auth_pc);
  if (rc != kPeerOk && rc != kPeerAgain)
    return auth_fail(s, "connect() to auth http server failed", errno);
  s.auth = s.auth_pc.connection;
  s.auth->data = &s;
  s.auth->read->handler = auth_handler;
  s.auth->write->handler = auth_handler;
  c.loop->add_timer(*s.auth->read, s.conf->auth_http_timeout);
  // The write event says when the connect is done (at once for kPeerOk).
  if (rc == kPeerOk) c.loop->post(*s.auth->write);
}

void auth_handler(Event& ev) {
  auto* a = ev.owner<Connection>();
  Session& s = *static_cast<Session*>(a->data);
  guarded(s, [&] {
    if (s.c->close || a->close) return finalize(s, "closed by the worker");
    if (ev.timedout) {
      ev.timedout = 0;
      return auth_fail(s, "auth http server timed out", ETIMEDOUT);
    }
    if (s.auth_sent < s.auth_req.size()) {
      if (ev.write == 0) return;  // nothing to read before the request is out
      if (s.auth_sent == 0) {
        if (int err = peer_connect_result(*a); err != 0) {
          return auth_fail(s, "connect() to auth http server failed", err);
        }
      }
      while (s.auth_sent < s.auth_req.size()) {
        long n = a->send(*a, s.auth_req.data() + s.auth_sent, s.auth_req.size() - s.auth_sent);
        if (n == kIoAgain) {
          if (Status st = a->loop->handle_write_event(*a->write); !st)
            finalize(s, "event registration failed");
          return;
        }
        if (n < 0) return auth_fail(s, "send() to auth http server failed", errno);
        s.auth_sent += static_cast<std::size_t>(n);
      }
    }
    for (;;) {
      char buf[4096];
      long n = !a->read->ready ? kIoAgain : a->recv(*a, buf, sizeof buf);
      if (n == kIoAgain) {
        if (Status st = a->loop->handle_read_event(*a->read); !st)
          finalize(s, "event registration failed");
        return;
      }
      if (n < 0) return auth_fail(s, "recv() from auth http server failed", errno);
      if (n > 0) {
        s.auth_resp.append(buf, static_cast<std::size_t>(n));
        if (s.auth_resp.size() > kMaxAuthResponse) {
          return auth_fail(s, "auth http server sent too large response", 0);
        }
      }
      if (n == 0 || s.auth_resp.find("\r\n\r\n") != std::string::npos) return auth_done(s);
    }
  });
}

void connect_backend(Session& s, const std::string& host, const std::string& port);

// The answer of the auth_http server is in s.auth_resp.
void auth_done(Session& s) {
  Connection& c = *s.c;
  http::ResponseParser p;
  http::ResponseHead head;
  std::string_view in = s.auth_resp;
  std::size_t used = 0;
  if (p.parse_status_line(in, used, head) != http::ResponseParse::kOk) {
    return auth_fail(s, "auth http server sent invalid response", 0);
  }
  in.remove_prefix(used);
  // The status code is not looked at: the Auth-* headers decide (nginx
  // skips the status line too; auth servers answer 200 or 204).
  std::string status, server, port, wait, user, pass, error_code;
  bool have_status = false, have_wait = false, have_user = false, have_pass = false;
  for (;;) {
    http::HeaderField f;
    used = 0;
    auto r = p.parse_header(in, used, f);
    if (r == http::ResponseParse::kHeadersDone) break;
    if (r != http::ResponseParse::kOk) {
      return auth_fail(s, "auth http server sent invalid header in response", 0);
    }
    if (iequals(f.name, "Auth-Status")) {
      status.assign(f.value);
      have_status = true;
    } else if (iequals(f.name, "Auth-Server")) {
      server.assign(f.value);
    } else if (iequals(f.name, "Auth-Port")) {
      port.assign(f.value);
    } else if (iequals(f.name, "Auth-Wait")) {
      wait.assign(f.value);
      have_wait = true;
    } else if (iequals(f.name, "Auth-User")) {
      user.assign(f.value);
      have_user = true;
    } else if (iequals(f.name, "Auth-Pass")) {
      pass.assign(f.value);
      have_pass = true;
    } else if (iequals(f.name, "Auth-Error-Code")) {
      error_code.assign(f.value);
    }
    in.remove_prefix(used);
  }
  c.loop->pool().close_connection(*s.auth);
  s.auth = nullptr;
  if (!have_status) return auth_fail(s, "auth http server sent no \"Auth-Status\" header", 0);
  if (status != "OK") {
    mail_counters()->auth_failed.add();
    ++s.attempts;
    VIGIL_LOG(*c.log, kInfo, 0,
              "client login failed: \"%s\" while in http auth state, client: %s, login: \"%s\"",
              status.c_str(), s.client_addr.c_str(), s.login.c_str());
    std::string msg;
    switch (s.proto) {
      case Protocol::kImap:
        msg = s.tag + " NO " + status + "\r\n";
        break;
      case Protocol::kPop3:
        msg = "-ERR " + status + "\r\n";
        break;
      default:
        msg = (error_code.empty() ? std::string("535 5.7.0") : error_code) + " " + status + "\r\n";
        break;
    }
    long delay = -1;
    if (have_wait) {
      char* end = nullptr;
      errno = 0;
      long v = std::strtol(wait.c_str(), &end, 10);
      if (end != wait.c_str() && *end == '\0' && errno == 0 && v >= 0 && v < 86400) delay = v;
    }
    if (delay < 0 || s.attempts >= s.conf->max_errors) {
      reply(s, msg);
      s.quit = true;
      flush(s);
      return;
    }
    s.pending_error = std::move(msg);
    s.state = State::kAuthWait;
    c.loop->add_timer(*c.read, static_cast<Msec>(delay) * 1000);
    return;
  }
  if (server.empty() || port.empty()) {
    return auth_fail(s, "auth http server sent no \"Auth-Server\" or \"Auth-Port\" header", 0);
  }
  if (have_user) s.login = unescape(user);
  if (have_pass) {
    s.passwd = unescape(pass);
    s.passwd_set = true;
  }
  if (s.passwd.empty() && s.method != "external" &&
      (s.method == "apop" || s.method == "cram-md5")) {
    return auth_fail(s, "auth http server did not send password", 0);
  }
  mail_counters()->auth_ok.add();
  connect_backend(s, server, port);
}

}  // namespace vigil::mail::detail
