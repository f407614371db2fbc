// One mail proxy session (nginx's ngx_mail_handler.c, ngx_mail_imap/pop3/
// smtp_handler.c, ngx_mail_auth_http_module.c, ngx_mail_proxy_module.c):
//
//   greeting -> commands until the client authenticates -> auth_http request
//   -> (error: answer, and with Auth-Wait another try; else close)
//   -> connect to Auth-Server:Auth-Port -> log in there -> relay both ways.
//
// Everything runs on the worker's loop: the client, the auth_http server and
// the backend are three non-blocking connections of the pool, each with its
// timer (timeout, auth_http_timeout, proxy_timeout). The session is a heap
// object (its buffers are in the client connection's arena), deleted once it
// is finalized and its last handler returns; its strings are std::string, and
// an allocation failure inside a handler ends the session (caught at the
// handler's edge, guarded()).

#include "mail/session.h"

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
#include <random>
#include <string>
#include <unordered_map>

#include "core/cidr.h"
#include "event/proxy_protocol.h"
#include "event/tls/tls.h"
#include "mail/counters.h"
#include "mail/mail_conf.h"
#include "mail/parse.h"
#include "mail/session_internal.h"
#include "vigil/core/log.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"
#include "vigil/event/peer.h"

namespace vigil::mail {

namespace detail {

Session& of(Event& ev) {
  return *static_cast<Session*>(ev.owner<Connection>()->data);
}

const char* proto_name(Protocol p) {
  switch (p) {
    case Protocol::kImap:
      return "imap";
    case Protocol::kPop3:
      return "pop3";
    case Protocol::kSmtp:
      return "smtp";
    default:
      return "none";
  }
}

void finalize(Session& s, const char* why) {
  if (s.done) return;
  s.done = true;
  Connection& c = *s.c;
  EventLoop& loop = *c.loop;
  VIGIL_LOG(*c.log, kInfo, 0, "mail %s session of %s %s%s%s", proto_name(s.proto),
            std::string(c.addr_text).c_str(), why,
            s.login.empty() ? "" : ", login: ", s.login.c_str());
  if (s.auth != nullptr) {
    loop.pool().close_connection(*s.auth);
    s.auth = nullptr;
  }
  if (s.up != nullptr) {
    loop.pool().close_connection(*s.up);
    s.up = nullptr;
  }
  if (s.counted) {
    if (auto* l = static_cast<Limits*>(loop.context(&kLimitsKey)); l != nullptr) {
      auto it = l->per_addr.find(s.client_addr);
      if (it != l->per_addr.end() && --it->second == 0) l->per_addr.erase(it);
    }
  }
  loop.pool().close_connection(c);
  // The session itself is deleted when the outermost handler returns (guarded).
}

// ---- output to the client ---------------------------------------------------

void start_tls(Session& s);
void greet(Session& s);

// nginx bounds a mail handshake by the server's `timeout`
// (ngx_mail_ssl_init_connection); ssl_handshake_timeout is Vigil's own.
Msec handshake_timeout(const MailSrvConf& conf) {
  return conf.ssl.handshake_timeout != 0 ? conf.ssl.handshake_timeout : conf.timeout;
}
void client_handler(Event& ev);

// Sends what `out` holds; true when it is all gone (and the session lives).
bool flush(Session& s) {
  if (s.done) return false;
  Connection& c = *s.c;
  while (s.out_sent < s.out.size()) {
    long n = c.send(c, s.out.data() + s.out_sent, s.out.size() - s.out_sent);
    if (n == kIoAgain) {
      if (Status st = c.loop->handle_write_event(*c.write); !st) {
        finalize(s, "event registration failed");
      }
      return false;
    }
    if (n < 0) {
      finalize(s, "client connection error");
      return false;
    }
    s.out_sent += static_cast<std::size_t>(n);
  }
  s.out.clear();
  s.out_sent = 0;
  if (s.quit) {
    finalize(s, "closed");
    return false;
  }
  if (s.starttls_pending) {
    s.starttls_pending = false;
    start_tls(s);
    return false;
  }
  return true;
}

void reply(Session& s, std::string_view text) {
  s.out.append(text);
}

// The error answer of the protocol (tag for IMAP).
void reply_error(Session& s, std::string_view imap, std::string_view pop3, std::string_view smtp) {
  switch (s.proto) {
    case Protocol::kImap:
      reply(s, s.tag.empty() ? "*" : s.tag);
      reply(s, " ");
      reply(s, imap);
      break;
    case Protocol::kPop3:
      reply(s, pop3);
      break;
    default:
      reply(s, smtp);
      break;
  }
  reply(s, "\r\n");
}

void invalid_command(Session& s) {
  reply_error(s, "BAD invalid command", "-ERR invalid command", "500 5.5.1 Invalid command");
  if (++s.errors >= s.conf->max_errors) {
    VIGIL_LOG(*s.c->log, kInfo, 0, "client sent too many invalid commands, client: %s",
              std::string(s.c->addr_text).c_str());
    s.quit = true;
  }
}

void internal_error(Session& s) {
  reply_error(s, "BAD internal server error", "-ERR internal server error",
              "451 4.3.2 Internal server error");
  s.quit = true;
}

void challenge(Session& s, std::string_view text_b64) {
  reply(s, s.proto == Protocol::kSmtp ? "334 " : "+ ");
  reply(s, text_b64);
  reply(s, "\r\n");
}

std::string b64(std::string_view in) {
  std::string out(((in.size() + 2) / 3) * 4, '\0');
  out.resize(encode_base64(in.data(), in.size(), out.data()));
  return out;
}

// "<pid.random.msec@server_name>", the APOP and CRAM-MD5 challenge.
std::string make_salt(const Session& s) {
  static std::mt19937_64 rng(std::random_device{}());
  char buf[96];
  int n = std::snprintf(buf, sizeof buf, "<%d.%llu.%llu@", static_cast<int>(::getpid()),
                        static_cast<unsigned long long>(rng() % 1000000000ULL),
                        static_cast<unsigned long long>(clock::current_msec()));
  return std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0) + s.conf->server_name + ">";
}

bool tls_available(const Session& s) {
  return s.conf->tls != nullptr && s.conf->starttls != Starttls::kOff && !s.tls;
}
bool login_disabled(const Session& s) {
  return s.conf->starttls == Starttls::kOnly && !s.tls;
}

// ---- the SASL exchange --------------------------------------------------------

unsigned methods(const Session& s) {
  switch (s.proto) {
    case Protocol::kImap:
      return s.conf->imap_auth;
    case Protocol::kPop3:
      return s.conf->pop3_auth;
    default:
      return s.conf->smtp_auth;
  }
}

// "\0user\0pass" (RFC 4616); false when malformed.
bool take_plain(Session& s, std::string_view d) {
  auto a = d.find('\0');
  if (a == std::string_view::npos) return false;
  auto b = d.find('\0', a + 1);
  if (b == std::string_view::npos) return false;
  s.login.assign(d.substr(a + 1, b - a - 1));
  s.passwd.assign(d.substr(b + 1));
  return !s.login.empty();
}

void auth_failed_syntax(Session& s) {
  s.state = State::kCommand;
  reply_error(s, "BAD invalid authentication", "-ERR invalid authentication",
              "501 5.5.4 Invalid authentication");
  if (++s.errors >= s.conf->max_errors) s.quit = true;
}

// AUTH/AUTHENTICATE <mech> [initial]: starts the exchange.
void sasl_start(Session& s, const Command& cmd, std::size_t first) {
  if (cmd.nargs <= first || cmd.nargs > first + 2) return invalid_command(s);
  std::string_view mech = cmd.args[first];
  const unsigned allowed = methods(s);
  std::string initial(cmd.nargs == first + 2 ? cmd.args[first + 1] : std::string_view());
  auto decode = [&](std::string& v) {
    std::size_t n = v.size();
    if (!decode_base64_line(v.data(), n)) return false;
    v.resize(n);
    return true;
  };
  // As nginx: PLAIN and LOGIN are always accepted (the *_auth lists say what
  // is advertised); CRAM-MD5 and EXTERNAL only when listed.
  if (iequals(mech, "PLAIN")) {
    s.method = "plain";
    if (initial.empty()) {
      s.state = State::kAuthPlain;
      return challenge(s, "");
    }
    if (!decode(initial) || !take_plain(s, initial)) return auth_failed_syntax(s);
    return start_auth_http(s);
  }
  if (iequals(mech, "LOGIN")) {
    s.method = "login";
    if (initial.empty()) {
      s.state = State::kAuthLoginUser;
      return challenge(s, "VXNlcm5hbWU6");  // "Username:"
    }
    if (!decode(initial) || initial.empty()) return auth_failed_syntax(s);
    s.login = initial;
    s.state = State::kAuthLoginPass;
    return challenge(s, "UGFzc3dvcmQ6");  // "Password:"
  }
  if (iequals(mech, "CRAM-MD5") && (allowed & kAuthCramMd5)) {
    if (!initial.empty()) return invalid_command(s);
    s.method = "cram-md5";
    s.salt = make_salt(s);
    s.state = State::kAuthCram;
    return challenge(s, b64(s.salt));
  }
  if (iequals(mech, "EXTERNAL") && (allowed & kAuthExternal)) {
    s.method = "external";
    if (initial.empty()) {
      s.state = State::kAuthExternal;
      return challenge(s, "VXNlcm5hbWU6");  // "Username:", as nginx
    }
    if (!decode(initial) || initial.empty()) return auth_failed_syntax(s);
    s.login = initial;
    s.passwd.clear();
    return start_auth_http(s);
  }
  reply_error(s, "NO unsupported authentication mechanism",
              "-ERR unsupported authentication mechanism",
              "504 5.7.4 Unrecognized authentication type");
  if (++s.errors >= s.conf->max_errors) s.quit = true;
}

// One line of the client during an exchange.
void sasl_line(Session& s, char* line, std::size_t len) {
  if (len == 1 && line[0] == '*') {  // cancelled (RFC 4954 §4, RFC 3501 §6.2.2)
    s.state = State::kCommand;
    return reply_error(s, "BAD AUTHENTICATE cancelled", "-ERR authentication cancelled",
                       "501 5.0.0 Authentication cancelled");
  }
  if (!decode_base64_line(line, len)) return auth_failed_syntax(s);
  std::string_view d(line, len);
  switch (s.state) {
    case State::kAuthPlain:
      if (!take_plain(s, d)) return auth_failed_syntax(s);
      return start_auth_http(s);
    case State::kAuthLoginUser:
      if (d.empty()) return auth_failed_syntax(s);
      s.login.assign(d);
      s.state = State::kAuthLoginPass;
      return challenge(s, "UGFzc3dvcmQ6");
    case State::kAuthLoginPass:
      s.passwd.assign(d);
      return start_auth_http(s);
    case State::kAuthCram: {
      auto sp = d.rfind(' ');
      if (sp == std::string_view::npos || sp == 0 || sp + 1 == d.size()) {
        return auth_failed_syntax(s);
      }
      s.login.assign(d.substr(0, sp));
      s.passwd.assign(d.substr(sp + 1));
      return start_auth_http(s);
    }
    case State::kAuthExternal:
      if (d.empty()) return auth_failed_syntax(s);
      s.login.assign(d);
      s.passwd.clear();
      return start_auth_http(s);
    default:
      return;
  }
}

// ---- the three front ends -----------------------------------------------------

void imap_command(Session& s, const Command& cmd) {
  s.tag.assign(cmd.tag);
  const std::string_view n = cmd.name;
  auto ok = [&](std::string_view what) {
    reply(s, s.tag);
    reply(s, " OK ");
    reply(s, what);
    reply(s, " completed\r\n");
  };
  if (cmd.literal) return invalid_command(s);  // cut short: not from the framing above
  if (iequals(n, "CAPABILITY")) {
    reply(s, s.tls || s.conf->tls == nullptr || s.conf->starttls == Starttls::kOff
                 ? (s.tls ? s.conf->imap_caps_line_tls : s.conf->imap_caps_line)
                 : (login_disabled(s) ? s.conf->imap_caps_line_starttls : s.conf->imap_caps_line));
    return ok("CAPABILITY");
  }
  if (iequals(n, "NOOP")) return ok("NOOP");
  if (iequals(n, "ID")) {
    reply(s, "* ID NIL\r\n");
    return ok("ID");
  }
  if (iequals(n, "LOGOUT")) {
    reply(s, "* BYE\r\n");
    ok("LOGOUT");
    s.quit = true;
    return;
  }
  if (iequals(n, "STARTTLS") && cmd.nargs == 0 && tls_available(s)) {
    reply(s, s.tag);
    reply(s, " OK begin TLS negotiation now\r\n");
    s.starttls_pending = true;
    return;
  }
  if (login_disabled(s) && (iequals(n, "LOGIN") || iequals(n, "AUTHENTICATE"))) {
    return invalid_command(s);  // nginx's answer; LOGINDISABLED said so (RFC 3501 §6.2.3)
  }
  if (iequals(n, "LOGIN")) {
    if (cmd.nargs != 2 || cmd.args[0].empty()) return invalid_command(s);
    // A literal may carry CR and LF, which the quoted strings
    // of our LOGIN to the backend cannot: refused rather than mangled.
    for (std::string_view a : {cmd.args[0], cmd.args[1]}) {
      if (a.find_first_of("\r\n") != std::string_view::npos) return invalid_command(s);
    }
    s.login.assign(cmd.args[0]);
    s.passwd.assign(cmd.args[1]);
    s.method = "plain";
    return start_auth_http(s);
  }
  if (iequals(n, "AUTHENTICATE")) return sasl_start(s, cmd, 0);
  invalid_command(s);
}

void pop3_command(Session& s, const Command& cmd) {
  const std::string_view n = cmd.name;
  if (iequals(n, "CAPA")) {
    return reply(s, s.tls               ? s.conf->pop3_caps_text_tls
                    : login_disabled(s) ? s.conf->pop3_caps_text_starttls
                                        : s.conf->pop3_caps_text);
  }
  if (iequals(n, "NOOP")) return reply(s, "+OK\r\n");
  if (iequals(n, "QUIT")) {
    reply(s, "+OK\r\n");
    s.quit = true;
    return;
  }
  if (iequals(n, "STLS") && cmd.nargs == 0 && tls_available(s)) {
    reply(s, "+OK\r\n");
    s.starttls_pending = true;
    return;
  }
  const bool auth_cmd =
      iequals(n, "USER") || iequals(n, "PASS") || iequals(n, "APOP") || iequals(n, "AUTH");
  if (auth_cmd && login_disabled(s)) return invalid_command(s);
  if (iequals(n, "USER") && (s.conf->pop3_auth & kAuthPlain)) {
    if (cmd.nargs != 1) return invalid_command(s);
    s.login.assign(cmd.args[0]);
    return reply(s, "+OK\r\n");
  }
  if (iequals(n, "PASS") && (s.conf->pop3_auth & kAuthPlain)) {
    if (cmd.nargs != 1 || s.login.empty()) return invalid_command(s);
    s.passwd.assign(cmd.args[0]);
    s.method = "plain";
    return start_auth_http(s);
  }
  if (iequals(n, "APOP") && (s.conf->pop3_auth & kAuthApop)) {
    if (cmd.nargs != 2 || cmd.args[1].size() != 32) return invalid_command(s);
    s.login.assign(cmd.args[0]);
    s.passwd.assign(cmd.args[1]);
    s.method = "apop";
    return start_auth_http(s);
  }
  if (iequals(n, "AUTH")) {
    if (cmd.nargs == 0) {
      // RFC 1734's list of the SASL mechanisms.
      reply(s, "+OK methods supported:\r\n");
      unsigned m = s.conf->pop3_auth;
      if (m & kAuthPlain) reply(s, "PLAIN\r\n");
      if (m & kAuthLogin) reply(s, "LOGIN\r\n");
      if (m & kAuthCramMd5) reply(s, "CRAM-MD5\r\n");
      if (m & kAuthExternal) reply(s, "EXTERNAL\r\n");
      return reply(s, ".\r\n");
    }
    return sasl_start(s, cmd, 0);
  }
  invalid_command(s);
}

void smtp_command(Session& s, const Command& cmd) {
  const std::string_view n = cmd.name;
  if (iequals(n, "HELO") || iequals(n, "EHLO")) {
    if (cmd.nargs != 1) {
      reply(s, "501 5.0.0 Invalid domain\r\n");
      return;
    }
    s.helo.assign(cmd.args[0]);
    s.esmtp = iequals(n, "EHLO");
    if (!s.esmtp) {
      reply(s, "250 ");
      reply(s, s.conf->server_name);
      return reply(s, "\r\n");
    }
    if (s.tls) return reply(s, s.conf->smtp_ehlo_text_tls);
    return reply(s, login_disabled(s) ? s.conf->smtp_ehlo_text_starttls : s.conf->smtp_ehlo_text);
  }
  if (iequals(n, "QUIT")) {
    reply(s, "221 2.0.0 Bye\r\n");
    s.quit = true;
    return;
  }
  if (iequals(n, "RSET")) {
    s.smtp_from.clear();
    s.smtp_to.clear();
    return reply(s, "250 2.0.0 OK\r\n");
  }
  if (iequals(n, "NOOP")) return reply(s, "250 2.0.0 OK\r\n");
  if (iequals(n, "STARTTLS") && cmd.nargs == 0 && tls_available(s)) {
    reply(s, "220 2.0.0 Start TLS\r\n");
    s.helo.clear();  // RFC 3207: the client starts again with EHLO
    s.starttls_pending = true;
    return;
  }
  if (iequals(n, "AUTH")) {
    if (login_disabled(s)) return reply(s, "530 5.7.0 Must issue a STARTTLS command first\r\n");
    return sasl_start(s, cmd, 0);
  }
  const bool none = (s.conf->smtp_auth & kAuthNone) != 0;
  if (none && iequals(n, "MAIL")) {
    // smtp_auth none: the envelope goes to auth_http and then, as the
    // client sent it, to the backend (nginx's unauthenticated relay).
    if (!s.smtp_from.empty()) return reply(s, "503 5.5.1 Bad sequence of commands\r\n");
    if (cmd.nargs == 0) return reply(s, "501 5.5.4 Invalid argument\r\n");
    s.smtp_from.assign(s.raw_line);
    return reply(s, "250 2.0.0 OK\r\n");
  }
  if (none && iequals(n, "RCPT")) {
    if (s.smtp_from.empty()) return reply(s, "503 5.5.1 Bad sequence of commands\r\n");
    if (cmd.nargs == 0) return reply(s, "501 5.5.4 Invalid argument\r\n");
    s.smtp_to.assign(s.raw_line);
    s.login.clear();
    s.passwd.clear();
    s.method = "none";
    return start_auth_http(s);
  }
  if (iequals(n, "MAIL") || iequals(n, "RCPT") || iequals(n, "DATA")) {
    return reply(s, "530 5.7.0 Authentication required\r\n");
  }
  invalid_command(s);
}

// One complete client line, CRLF removed.
void handle_line(Session& s, char* line, std::size_t len) {
  if (s.state != State::kCommand) return sasl_line(s, line, len);
  Command cmd;
  if (s.proto == Protocol::kSmtp) s.raw_line = std::string_view(line, len);  // before parsing
  ParseStatus st = s.proto == Protocol::kImap   ? parse_imap(line, len, cmd)
                   : s.proto == Protocol::kPop3 ? parse_pop3(line, len, cmd)
                                                : parse_smtp(line, len, cmd);
  if (st != ParseStatus::kOk) {
    if (s.proto == Protocol::kImap) s.tag.clear();
    return invalid_command(s);
  }
  switch (s.proto) {
    case Protocol::kImap:
      return imap_command(s, cmd);
    case Protocol::kPop3:
      return pop3_command(s, cmd);
    default:
      return smtp_command(s, cmd);
  }
}

bool reading_commands(const Session& s) {
  return s.state == State::kCommand || s.state == State::kAuthPlain ||
         s.state == State::kAuthLoginUser || s.state == State::kAuthLoginPass ||
         s.state == State::kAuthCram || s.state == State::kAuthExternal;
}

// Reads and handles lines while the session is in a command state.
void process_input(Session& s) {
  Connection& c = *s.c;
  for (;;) {
    if (s.done) return;
    // Lines already in the buffer first.
    while (!s.done && reading_commands(s) && !s.quit && !s.starttls_pending &&
           s.out.size() < kMaxPendingOutput && s.in.pos < s.in.last) {
      // An IMAP command may go on past its first line with literals: the
      // command so far (cmd_len bytes at in.pos) and the literal's bytes
      // still to come stay in the buffer, bounded by imap_client_buffer.
      const bool imap_cmd = s.proto == Protocol::kImap && s.state == State::kCommand;
      if (imap_cmd && s.literal_left > 0) {
        const auto avail = static_cast<std::size_t>(s.in.last - s.in.pos) - s.cmd_len;
        if (avail < s.literal_left) break;
        s.cmd_len += s.literal_left;
        s.literal_left = 0;
      }
      long n = find_line(s.in.pos + s.cmd_len,
                         static_cast<std::size_t>(s.in.last - s.in.pos) - s.cmd_len);
      if (n > 0 && imap_cmd) {
        const char* part = s.in.pos + s.cmd_len;
        std::size_t plen = static_cast<std::size_t>(n) - 1;
        if (plen > 0 && part[plen - 1] == '\r') --plen;
        std::size_t size = 0;
        bool sync = true;
        if (imap_literal_at_end(part, plen, size, sync)) {
          const std::size_t framed = s.cmd_len + static_cast<std::size_t>(n);
          if (size > static_cast<std::size_t>(s.in.end - s.in.start) - framed) {
            // It cannot fit: as a line too long (nginx: "too long command").
            VIGIL_LOG(*c.log, kInfo, 0, "client sent too long command, client: %s",
                      std::string(c.addr_text).c_str());
            const char* sp = static_cast<const char*>(std::memchr(s.in.pos, ' ', framed));
            s.tag.assign(s.in.pos, sp != nullptr ? static_cast<std::size_t>(sp - s.in.pos) : 0);
            reply_error(s, "BAD line is too long", "", "");
            s.quit = true;
            break;
          }
          s.cmd_len = framed;
          s.literal_left = size;
          if (sync) reply(s, "+ go ahead\r\n");  // RFC 3501 §7.5
          continue;
        }
        n += static_cast<long>(s.cmd_len);  // the whole command
        s.cmd_len = 0;
      }
      if (n < 0) {
        VIGIL_LOG(*c.log, kInfo, 0, "client sent invalid command, client: %s",
                  std::string(c.addr_text).c_str());
        s.tag.clear();
        invalid_command(s);
        s.quit = true;
        break;
      }
      if (n == 0) break;
      char* line = s.in.pos;
      std::size_t len = static_cast<std::size_t>(n) - 1;
      if (len > 0 && line[len - 1] == '\r') --len;
      s.in.pos += n;
      handle_line(s, line, len);
    }
    if (s.done || !flush(s)) return;  // waits for the socket, or the session ended / went TLS
    if (!reading_commands(s)) return;
    if (s.in.pos == s.in.last) s.in.pos = s.in.last = s.in.start;
    if (s.in.last == s.in.end) {
      if (s.in.pos == s.in.start) {
        VIGIL_LOG(*c.log, kInfo, 0, "client sent too long command, client: %s",
                  std::string(c.addr_text).c_str());
        s.tag.clear();
        reply_error(s, "BAD line is too long", "-ERR line is too long",
                    "500 5.5.6 Line is too long");
        s.quit = true;
        flush(s);
        return;
      }
      std::size_t rest = static_cast<std::size_t>(s.in.last - s.in.pos);
      std::memmove(s.in.start, s.in.pos, rest);
      s.in.pos = s.in.start;
      s.in.last = s.in.start + rest;
    }
    // A short read cleared `ready`: the socket is drained, and the next
    // data comes with an event, so no recv() is spent to learn EAGAIN (a
    // TLS connection may hold decrypted bytes whatever the socket says).
    long n = !c.read->ready && c.ssl == nullptr
                 ? kIoAgain
                 : c.recv(c, s.in.last, static_cast<std::size_t>(s.in.end - s.in.last));
    if (n == kIoAgain) {
      c.loop->add_timer(*c.read, s.conf->timeout);
      if (Status st = c.loop->handle_read_event(*c.read); !st)
        finalize(s, "event registration failed");
      return;
    }
    if (n == 0) return finalize(s, "client closed the connection");
    if (n < 0) return finalize(s, "client connection error");
    s.in.last += n;
  }
}

void client_handler(Event& ev) {
  Session& s = of(ev);
  guarded(s, [&] {
    if (s.c->close) return finalize(s, "closed by the worker");
    if (ev.timedout) {
      ev.timedout = 0;
      if (s.state == State::kGreetingDelay) return greet(s);
      if (s.state == State::kAuthWait) {
        // Auth-Wait is over: the error, and the client may try again.
        s.state = State::kCommand;
        reply(s, s.pending_error);
        s.login.clear();
        s.passwd.clear();
        return process_input(s);
      }
      VIGIL_LOG(*s.c->log, kInfo, ETIMEDOUT, "client timed out, client: %s",
                std::string(s.c->addr_text).c_str());
      return finalize(s, "timed out");
    }
    if (s.state == State::kGreetingDelay) {
      // Anything from the client before the delayed greeting is a sign of a
      // spam engine (nginx: "client was rejected before greeting").
      char b;
      long n = s.c->recv(*s.c, &b, 1);
      if (n == kIoAgain) {
        if (Status st = s.c->loop->handle_read_event(*s.c->read); !st)
          finalize(s, "event registration failed");
        return;
      }
      if (n <= 0) return finalize(s, "client closed the connection");
      VIGIL_LOG(*s.c->log, kInfo, 0, "client was rejected before greeting, client: %s",
                std::string(s.c->addr_text).c_str());
      reply(s, "554 5.7.1 Client was rejected before greeting\r\n");
      s.quit = true;
      flush(s);
      return;
    }
    if (!flush(s)) return;
    if (reading_commands(s)) return process_input(s);
    // Waiting for auth_http or the backend: the client waits too.
    if (ev.write == 0) {
      if (Status st = s.c->loop->handle_read_event(*s.c->read); !st)
        finalize(s, "event registration failed");
    }
  });
}

// ---- STARTTLS / ssl ---------------------------------------------------------

// ssl_verify_client after a handshake (nginx's ngx_mail_verify_cert): a
// certificate that failed verification, or none with "on", gets the
// protocol's error and the session is closed. False then.
bool client_cert_ok(Session& s) {
  const int st = tls_client_verify_status(*s.c);  // logs why
  if (st == 0) return true;
  // A session that failed must not be resumed to skip the check.
  SSL* ssl = s.c->ssl->ssl;
  SSL_CTX_remove_session(SSL_get_SSL_CTX(ssl), SSL_get0_session(ssl));
  const bool none = st == 496;
  switch (s.proto) {
    case Protocol::kImap:
      reply(s, none ? "* BYE No required SSL certificate\r\n" : "* BYE SSL certificate error\r\n");
      break;
    case Protocol::kPop3:
      reply(s, none ? "-ERR No required SSL certificate\r\n" : "-ERR SSL certificate error\r\n");
      break;
    default:
      reply(s, none ? "421 4.7.1 No required SSL certificate\r\n"
                    : "421 4.7.1 SSL certificate error\r\n");
      break;
  }
  s.c->read->handler = client_handler;
  s.c->write->handler = client_handler;
  s.quit = true;
  flush(s);
  return false;
}

void tls_done(Connection& c, TlsHandshake result) {
  Session& s = *static_cast<Session*>(c.data);
  guarded(s, [&] {
    if (result != TlsHandshake::kOk) return finalize(s, "SSL handshake failed");
    if (!client_cert_ok(s)) return;
    c.read->handler = client_handler;
    c.write->handler = client_handler;
    // After STARTTLS: forget everything said in plain text (RFC 3207 §4.2).
    s.tls = true;
    s.in.pos = s.in.last = s.in.start;
    s.cmd_len = s.literal_left = 0;
    process_input(s);
  });
}

void start_tls(Session& s) {
  Connection& c = *s.c;
  if (Status st = tls_start_server(c, *s.conf->tls, false, handshake_timeout(*s.conf), tls_done);
      !st) {
    VIGIL_LOG(*c.log, kAlert, 0, "%s", st.message().c_str());
    finalize(s, "TLS failed");
  }
}

// ---- the start ------------------------------------------------------------------------

void greet(Session& s) {
  s.state = State::kCommand;
  switch (s.proto) {
    case Protocol::kImap:
      reply(s, "* OK IMAP4 ready\r\n");
      break;
    case Protocol::kPop3:
      if (s.conf->pop3_auth & (kAuthApop)) {
        s.salt = make_salt(s);
        reply(s, "+OK POP3 ready " + s.salt + "\r\n");
      } else {
        reply(s, "+OK POP3 ready\r\n");
      }
      break;
    default:
      reply(s, "220 " + s.conf->server_name + " ESMTP ready\r\n");
      break;
  }
  process_input(s);
}

// The client's name for Client-Host (nginx's ngx_mail_smtp_resolve_addr_handler
// and _name_handler): the PTR name, kept only when its addresses include the
// client's. NXDOMAIN gives "[UNAVAILABLE]", other failures "[TEMPUNAVAIL]".
void after_lookup(Session& s);

void log_unresolved(Session& s, std::string_view what, int state) {
  VIGIL_LOG(*s.c->log, kError, 0, "%.*s could not be resolved (%d: %s), client: %s",
            static_cast<int>(what.size()), what.data(), state, resolver_strerror(state),
            s.client_addr.c_str());
  s.host = state == dns::kNxDomain ? "[UNAVAILABLE]" : "[TEMPUNAVAIL]";
}

bool same_address(const dns::Address& a, const sockaddr* sa) {
  if (sa == nullptr || a.family != sa->sa_family) return false;
  if (a.family == AF_INET) {
    return std::memcmp(a.bytes, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4) == 0;
  }
  return std::memcmp(a.bytes, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16) == 0;
}

void name_resolved(ResolveRequest& q) {
  Session& s = *static_cast<Session*>(q.data);
  s.resolver = nullptr;
  guarded(s, [&] {
    if (q.state != 0) {
      log_unresolved(s, "\"" + s.host + "\"", q.state);
    } else {
      bool found = false;
      for (std::size_t i = 0; i < q.naddrs && !found; ++i) {
        found = same_address(q.addrs[i], s.c->peer_addr);
      }
      if (!found) s.host = "[UNAVAILABLE]";
    }
    after_lookup(s);
  });
}

void addr_resolved(ResolveRequest& q) {
  Session& s = *static_cast<Session*>(q.data);
  s.resolver = nullptr;
  guarded(s, [&] {
    if (q.state != 0 || q.name_len == 0) {
      log_unresolved(s, s.client_addr, q.state != 0 ? q.state : dns::kNxDomain);
      return after_lookup(s);
    }
    s.host.assign(q.name, q.name_len);
    Resolver* res = Resolver::of(*s.c->loop, s.conf->resolver);
    if (res == nullptr) return finalize(s, "out of memory");
    q.handler = name_resolved;
    s.resolver = res;
    if (res->resolve_name(q, s.host)) name_resolved(q);
  });
}

void start_lookup(Session& s) {
  const sockaddr* sa = s.c->peer_addr;
  dns::Address a;
  if (sa != nullptr && sa->sa_family == AF_INET) {
    a.family = AF_INET;
    std::memcpy(a.bytes, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
  } else if (sa != nullptr && sa->sa_family == AF_INET6) {
    a.family = AF_INET6;
    std::memcpy(a.bytes, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
  } else {
    return after_lookup(s);  // a unix-domain client has no name
  }
  Resolver* res = Resolver::of(*s.c->loop, s.conf->resolver);
  s.rq.reset(new (std::nothrow) ResolveRequest());
  if (res == nullptr || s.rq == nullptr) return finalize(s, "out of memory");
  s.rq->handler = addr_resolved;
  s.rq->data = &s;
  s.rq->timeout = s.conf->resolver_timeout;
  s.state = State::kResolving;
  s.resolver = res;
  if (Status st = s.c->loop->handle_read_event(*s.c->read); !st) {
    return finalize(s, "event registration failed");
  }
  if (res->resolve_addr(*s.rq, a)) addr_resolved(*s.rq);
}

void start_session(Session& s) {
  Connection& c = *s.c;
  c.read->handler = client_handler;
  c.write->handler = client_handler;
  if (s.proto == Protocol::kSmtp && s.conf->resolver != nullptr) return start_lookup(s);
  after_lookup(s);
}

void after_lookup(Session& s) {
  Connection& c = *s.c;
  s.state = State::kCommand;
  if (s.proto == Protocol::kSmtp && s.conf->smtp_greeting_delay > 0) {
    s.state = State::kGreetingDelay;
    c.loop->add_timer(*c.read, s.conf->smtp_greeting_delay);
    if (Status st = c.loop->handle_read_event(*c.read); !st)
      finalize(s, "event registration failed");
    return;
  }
  greet(s);
}

void ssl_listen_done(Connection& c, TlsHandshake result) {
  Session& s = *static_cast<Session*>(c.data);
  guarded(s, [&] {
    if (result != TlsHandshake::kOk) return finalize(s, "SSL handshake failed");
    s.tls = true;
    if (!client_cert_ok(s)) return;
    start_session(s);
  });
}

}  // namespace detail

using namespace detail;  // NOLINT(google-build-using-namespace): this file is the session

void exit_worker(EventLoop& loop) {
  auto* w = static_cast<Limits*>(loop.context(&kLimitsKey));
  if (w == nullptr) return;
  // Sessions still open: their connections are closed by the pool, without
  // handlers; only the session objects are ours to free.
  for (Session* s = w->live; s != nullptr;) {
    Session* next = s->next;
    delete s;
    s = next;
  }
  w->live = nullptr;
  loop.drop_context<Limits>(&kLimitsKey);
}

void init_connection(Connection& c) {
  const auto* port = static_cast<const MailPort*>(c.listening->servers);
  const MailSrvConf* conf = port->conf;
  if (conf->error_log != nullptr) c.log = conf->error_log;
  // set_real_ip_from: a trusted peer's PROXY protocol header names the
  // client for the whole session (Client-IP, the backend's PROXY line,
  // XCLIENT, the logs), as nginx's mail realip.
  const ProxyProtocolInfo* pp = c.proxy_protocol;
  if (pp != nullptr && pp->header.family != AF_UNSPEC && cidr_match(conf->realip_from, c.peer_addr)) {
    auto* sa = static_cast<sockaddr*>(c.arena->alloc(sizeof(sockaddr_storage)));
    if (sa != nullptr) {
      std::memcpy(sa, &pp->header.src, sizeof(sockaddr_storage));
      c.peer_addr = sa;
      c.peer_addrlen = pp->header.addrlen;
      c.addr_text = pp->src_addr;
    }
  }
  VIGIL_LOG(*c.log, kInfo, 0, "*%llu client %.*s connected to %s",
            static_cast<unsigned long long>(c.number), static_cast<int>(c.addr_text.size()),
            c.addr_text.data(), c.listening->addr_text.c_str());
  const std::size_t bufsize = conf->protocol == Protocol::kImap   ? conf->imap_client_buffer
                              : conf->protocol == Protocol::kSmtp ? conf->smtp_client_buffer
                                                                  : kPop3Buffer;
  // The command buffer is a block of its own, not the arena's: it becomes the
  // relay's buffer towards the backend, and an arena would round it up.
  auto* s = new (std::nothrow) Session();  // allocates nothing else
  if (s != nullptr) {
    s->in_mem.reset(new (std::nothrow) char[bufsize]);
    if (s->in_mem == nullptr) {
      delete s;
      s = nullptr;
    }
  }
  if (s == nullptr) {
    VIGIL_LOG(*c.log, kAlert, 0, "out of memory for a mail session");
    c.loop->pool().close_connection(c);
    return;
  }
  s->c = &c;
  s->conf = conf;
  s->proto = conf->protocol;
  s->in.reset(s->in_mem.get(), bufsize);
  c.data = s;
  mail_counters()->sessions.add();
  guarded(*s, [&] {
    auto* l = c.loop->context_or_make<Limits>(&kLimitsKey);
    if (l == nullptr) return finalize(*s, "out of memory");
    s->worker = l;
    s->next = l->live;
    if (l->live != nullptr) l->live->prev = s;
    l->live = s;
    s->client_addr.assign(c.addr_text);
    if (conf->limit_conn > 0) {
      unsigned& n = l->per_addr[s->client_addr];
      if (n >= conf->limit_conn) {
        if (n == 0) l->per_addr.erase(s->client_addr);
        mail_counters()->limited.add();
        VIGIL_LOG(*c.log, kError, 0, "limiting connections by mail_limit_conn %u, client: %s",
                  conf->limit_conn, s->client_addr.c_str());
        // The protocol's "try later" before closing.
        s->quit = true;
        reply(*s, s->proto == Protocol::kImap   ? "* BYE too many connections\r\n"
                  : s->proto == Protocol::kPop3 ? "-ERR too many connections\r\n"
                                                : "421 4.7.0 Too many connections\r\n");
        c.read->handler = client_handler;
        c.write->handler = client_handler;
        flush(*s);
        return;
      }
      ++n;
      s->counted = true;
    }
    if (port->ssl) {
      // "listen ... ssl": the greeting comes after the handshake.
      if (Status st =
              tls_start_server(c, *conf->tls, false, handshake_timeout(*conf), ssl_listen_done);
          !st) {
        VIGIL_LOG(*c.log, kAlert, 0, "%s", st.message().c_str());
        finalize(*s, "TLS failed");
      }
      return;
    }
    start_session(*s);
  });
}

}  // namespace vigil::mail
