// A mail session's backend (nginx's ngx_mail_proxy_module, before the
// relay): the connect to Auth-Server:Auth-Port, the optional PROXY protocol
// header, and the login dialogue of IMAP, POP3 and SMTP.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "core/proxy_protocol.h"
#include "mail/session_internal.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::mail::detail {

void backend_handler(Event& ev);

void backend_fail(Session& s, const char* why, int err) {
  VIGIL_LOG(*s.c->log, kError, err, "%s, client: %s, login: \"%s\", upstream: %s", why,
            s.client_addr.c_str(), s.login.c_str(), s.up_pc.name.c_str());
  if (s.up != nullptr) {
    s.c->loop->pool().close_connection(*s.up);
    s.up = nullptr;
  }
  internal_error(s);
  flush(s);
}

void connect_backend(Session& s, const std::string& host, const std::string& port) {
  Connection& c = *s.c;
  s.state = State::kBackend;
  s.up_pc = PeerConnection{};
  char* end = nullptr;
  unsigned long p = std::strtoul(port.c_str(), &end, 10);
  bool ok = end != port.c_str() && *end == '\0' && p > 0 && p < 65536;
  if (ok) {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&s.up_pc.addr);
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&s.up_pc.addr);
    if (::inet_pton(AF_INET, host.c_str(), &in4->sin_addr) == 1) {
      in4->sin_family = AF_INET;
      in4->sin_port = htons(static_cast<std::uint16_t>(p));
      s.up_pc.addrlen = sizeof(sockaddr_in);
      s.up_pc.name = host + ":" + port;
    } else if (::inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) == 1) {
      in6->sin6_family = AF_INET6;
      in6->sin6_port = htons(static_cast<std::uint16_t>(p));
      s.up_pc.addrlen = sizeof(sockaddr_in6);
      s.up_pc.name = "[" + host + "]:" + port;
    } else {
      ok = false;
    }
  }
  if (!ok) {
    std::string why = "auth http server sent invalid server address:\"" + host + ":" + port + "\"";
    return auth_fail(s, why.c_str(), 0);
  }
  s.up_pc.log = c.log;
  int rc = event_connect_peer(*c.loop, s.up_pc);
  if (rc != kPeerOk && rc != kPeerAgain)
    return backend_fail(s, "connect() to upstream failed", errno);
  s.up = s.up_pc.connection;
  s.up->data = &s;
  s.up->read->handler = backend_handler;
  s.up->write->handler = backend_handler;
  // Its own block, not the arena's: it becomes the relay's buffer towards
  // the client, and an arena would round it to the next power of two.
  std::size_t n = std::max<std::size_t>(s.conf->proxy_buffer, 512);
  s.up_mem.reset(new (std::nothrow) char[n]);
  if (s.up_mem == nullptr) return backend_fail(s, "out of memory for the upstream buffer", 0);
  s.up_in.reset(s.up_mem.get(), n);
  s.bstate = -1;  // connecting
  c.loop->add_timer(*s.up->read, s.conf->timeout);
  if (rc == kPeerOk) c.loop->post(*s.up->write);
}

bool send_backend(Session& s, const std::string& line) {
  // The login lines are short; a full socket buffer here is a broken backend.
  long n = s.up->send(*s.up, line.data(), line.size());
  if (n != static_cast<long>(line.size())) {
    backend_fail(s, "send() to upstream failed", errno);
    return false;
  }
  return true;
}

std::string imap_quote(std::string_view v) {
  std::string out = "\"";
  for (char ch : v) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

// The backend said no: its words (proxy_pass_error_message) or ours.
void backend_refused(Session& s, std::string_view line) {
  VIGIL_LOG(*s.c->log, kError, 0,
            "upstream sent invalid response: \"%.*s\" while reading response from upstream, "
            "client: %s, login: \"%s\", upstream: %s",
            static_cast<int>(line.size()), line.data(), s.client_addr.c_str(), s.login.c_str(),
            s.up_pc.name.c_str());
  s.c->loop->pool().close_connection(*s.up);
  s.up = nullptr;
  if (s.conf->proxy_pass_error_message) {
    if (s.proto == Protocol::kImap) {
      auto sp = line.find(' ');
      reply(s, s.tag);
      reply(s, sp == std::string_view::npos ? std::string_view(" NO") : line.substr(sp));
    } else {
      reply(s, line);
    }
    reply(s, "\r\n");
    s.quit = true;
    flush(s);
    return;
  }
  internal_error(s);
  flush(s);
}

// SMTP's login dialogue (nginx's order): the greeting; HELO/EHLO with our
// server_name; with xclient: XCLIENT, then the client's own HELO/EHLO if it
// sent one; then AUTH PLAIN (proxy_smtp_auth), or for smtp_auth none the
// client's MAIL FROM and RCPT TO lines. The states:
enum SmtpState : int {
  kSmtpStart,
  kSmtpHelo,         // HELO/EHLO sent, then the end of the login
  kSmtpHeloXclient,  // HELO/EHLO sent, then XCLIENT
  kSmtpHeloAuth,     // HELO/EHLO sent, then AUTH PLAIN
  kSmtpHeloFrom,     // HELO/EHLO sent, then MAIL FROM
  kSmtpXclient,      // XCLIENT sent, then the end
  kSmtpXclientHelo,  // XCLIENT sent, then the client's HELO/EHLO
  kSmtpXclientAuth,
  kSmtpXclientFrom,
  kSmtpAuthPlain,  // AUTH PLAIN sent, then the end
  kSmtpFrom,       // MAIL FROM sent, then RCPT TO
  kSmtpTo,         // RCPT TO sent: its answer, whatever it is, is the client's
};

// XCLIENT's xtext (RFC 1891 §5): "+", "=" and bytes outside 33..126 as +XX.
std::string xtext(std::string_view v) {
  std::string out;
  for (unsigned char ch : v) {
    if (ch < 33 || ch > 126 || ch == '+' || ch == '=') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "+%02X", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out;
}

bool smtp_backend_line(Session& s, std::string_view line) {
  const MailSrvConf& cf = *s.conf;
  // Multi-line replies: "250-..." lines go by, "250 ..." ends the reply.
  if (line.size() < 3) return backend_refused(s, line), false;
  if (line.size() > 3 && line[3] == '-') return true;
  const bool none = s.method == "none";
  const std::string_view code = line.substr(0, 3);
  bool ok = false;
  switch (s.bstate) {
    case kSmtpStart:
      ok = code == "220";
      break;
    case kSmtpHelo:
    case kSmtpHeloXclient:
    case kSmtpHeloAuth:
    case kSmtpHeloFrom:
    case kSmtpFrom:
      ok = code == "250";
      break;
    case kSmtpXclient:
    case kSmtpXclientHelo:
    case kSmtpXclientAuth:
    case kSmtpXclientFrom:
      ok = code == "250" || code == "220";
      break;
    case kSmtpAuthPlain:
      ok = code == "235";
      break;
    default:
      ok = true;
      break;  // kSmtpTo
  }
  if (!ok) return backend_refused(s, line), false;
  // What follows a HELO/EHLO (ours or the client's).
  auto next_after_helo = [&](bool xclient_sent) {
    if (none) return xclient_sent ? kSmtpXclientFrom : kSmtpHeloFrom;
    if (cf.proxy_smtp_auth) return xclient_sent ? kSmtpXclientAuth : kSmtpHeloAuth;
    return xclient_sent ? kSmtpXclient : kSmtpHelo;
  };
  switch (s.bstate) {
    case kSmtpStart:
      s.bstate = cf.xclient ? kSmtpHeloXclient : next_after_helo(false);
      return send_backend(s, (s.esmtp || cf.xclient ? "EHLO " : "HELO ") + cf.server_name + "\r\n");
    case kSmtpHeloXclient: {
      std::string x = "XCLIENT ADDR=";
      if (s.c->peer_addr != nullptr && s.c->peer_addr->sa_family == AF_INET6) x += "IPV6:";
      x += s.client_addr;
      if (!s.login.empty() && !cf.proxy_smtp_auth) x += " LOGIN=" + xtext(s.login);
      x += " NAME=" + xtext(s.host) + "\r\n";
      s.bstate = !s.helo.empty() ? kSmtpXclientHelo : next_after_helo(true);
      return send_backend(s, x);
    }
    case kSmtpXclientHelo:
      s.bstate = next_after_helo(false);
      return send_backend(s, (s.esmtp ? "EHLO " : "HELO ") + s.helo + "\r\n");
    case kSmtpHeloAuth:
    case kSmtpXclientAuth: {
      if (!s.passwd_set) {
        VIGIL_LOG(*s.c->log, kError, 0, "no password available, client: %s, login: \"%s\"",
                  s.client_addr.c_str(), s.login.c_str());
        s.c->loop->pool().close_connection(*s.up);
        s.up = nullptr;
        internal_error(s);
        flush(s);
        return false;
      }
      std::string plain = std::string(1, '\0') + s.login + std::string(1, '\0') + s.passwd;
      s.bstate = kSmtpAuthPlain;
      return send_backend(s, "AUTH PLAIN " + b64(plain) + "\r\n");
    }
    case kSmtpHeloFrom:
    case kSmtpXclientFrom:
      s.bstate = kSmtpFrom;
      return send_backend(s, s.smtp_from + "\r\n");
    case kSmtpFrom:
      s.bstate = kSmtpTo;
      return send_backend(s, s.smtp_to + "\r\n");
    case kSmtpTo:
      s.backend_final = std::string(line) + "\r\n";  // the answer to the client's RCPT TO
      start_relay(s);
      return false;
    default:  // kSmtpHelo, kSmtpXclient, kSmtpAuthPlain
      s.backend_final = "235 2.0.0 OK\r\n";
      start_relay(s);
      return false;
  }
}

// One line of the backend during the login; false when the session moved on.
bool backend_line(Session& s, std::string_view line) {
  switch (s.proto) {
    case Protocol::kImap:
      if (s.bstate == 0) {
        if (!line.starts_with("* OK")) return backend_refused(s, line), false;
        s.bstate = 1;
        return send_backend(s,
                            "1 LOGIN " + imap_quote(s.login) + " " + imap_quote(s.passwd) + "\r\n");
      }
      if (line.starts_with("* ")) return true;  // untagged data before the answer
      if (!line.starts_with("1 OK")) return backend_refused(s, line), false;
      s.backend_final = s.tag + std::string(line.substr(1)) + "\r\n";
      start_relay(s);
      return false;
    case Protocol::kPop3:
      if (!line.starts_with("+OK")) return backend_refused(s, line), false;
      if (s.bstate == 0) {
        s.bstate = 1;
        return send_backend(s, "USER " + s.login + "\r\n");
      }
      if (s.bstate == 1) {
        s.bstate = 2;
        return send_backend(s, "PASS " + s.passwd + "\r\n");
      }
      s.backend_final = std::string(line) + "\r\n";
      start_relay(s);
      return false;
    default:
      return smtp_backend_line(s, line);
  }
}

// "PROXY TCP4 <client> <local> <client port> <local port>\r\n" for the
// client's connection (haproxy's proxy-protocol.txt, version 1; the client
// as set_real_ip_from may have set it), "PROXY UNKNOWN" for another family.
std::string proxy_protocol_v1(const Connection& c) {
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (::getsockname(c.fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    return "PROXY UNKNOWN\r\n";
  }
  return proxy_protocol_v1_line(c.peer_addr, reinterpret_cast<const sockaddr*>(&local));
}

void backend_handler(Event& ev) {
  auto* u = ev.owner<Connection>();
  Session& s = *static_cast<Session*>(u->data);
  guarded(s, [&] {
    if (s.c->close || u->close) return finalize(s, "closed by the worker");
    if (ev.timedout) {
      ev.timedout = 0;
      return backend_fail(s, "upstream timed out while reading response from upstream", ETIMEDOUT);
    }
    if (s.bstate == -1) {
      if (ev.write == 0) return;
      if (int err = peer_connect_result(*u); err != 0) {
        return backend_fail(s, "connect() to upstream failed", err);
      }
      if (s.conf->proxy_protocol) {
        // The header goes first, in one piece (the PROXY protocol's rule: the
        // receiver reads it from the first segment).
        const std::string h = proxy_protocol_v1(*s.c);
        long n = u->send(*u, h.data(), h.size());
        if (n != static_cast<long>(h.size())) {
          return backend_fail(s, "could not send PROXY protocol header at once", n < 0 ? errno : 0);
        }
      }
      s.bstate = 0;
    }
    for (;;) {
      // Complete lines first.
      while (s.up_in.pos < s.up_in.last) {
        long n = find_line(s.up_in.pos, static_cast<std::size_t>(s.up_in.last - s.up_in.pos));
        if (n < 0) return backend_refused(s, "invalid line");
        if (n == 0) break;
        std::string_view line(s.up_in.pos, static_cast<std::size_t>(n) - 1);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        s.up_in.pos += n;
        if (!backend_line(s, line)) return;
      }
      if (s.up_in.pos == s.up_in.last) s.up_in.pos = s.up_in.last = s.up_in.start;
      if (s.up_in.last == s.up_in.end) {
        if (s.up_in.pos == s.up_in.start) {
          return backend_fail(s, "upstream sent too long response line", 0);
        }
        std::size_t rest = static_cast<std::size_t>(s.up_in.last - s.up_in.pos);
        std::memmove(s.up_in.start, s.up_in.pos, rest);
        s.up_in.pos = s.up_in.start;
        s.up_in.last = s.up_in.start + rest;
      }
      long n = !u->read->ready ? kIoAgain  // drained by a short read (see process_input)
                               : u->recv(*u, s.up_in.last,
                                         static_cast<std::size_t>(s.up_in.end - s.up_in.last));
      if (n == kIoAgain) {
        if (Status st = u->loop->handle_read_event(*u->read); !st)
          finalize(s, "event registration failed");
        return;
      }
      if (n <= 0)
        return backend_fail(s, "upstream prematurely closed connection", n < 0 ? errno : 0);
      s.up_in.last += n;
    }
  });
}

}  // namespace vigil::mail::detail
