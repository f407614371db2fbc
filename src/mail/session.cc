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
#include <new>
#include <random>
#include <string>
#include <unordered_map>

#include "codec/response_parser.h"
#include "event/tls/tls.h"
#include "mail/counters.h"
#include "mail/mail_conf.h"
#include "mail/parse.h"
#include "upstream/relay.h"
#include "vigil/core/log.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"
#include "vigil/event/peer.h"

namespace vigil::mail {

namespace {

constexpr std::size_t kPop3Buffer = 512;        // RFC 1939: commands are at most 255 bytes
constexpr std::size_t kMaxAuthResponse = 16384;  // the auth_http answer's head
constexpr std::size_t kMaxPendingOutput = 65536;

enum class State : std::uint8_t {
  kGreetingDelay,
  kCommand,
  kAuthPlain,
  kAuthLoginUser,
  kAuthLoginPass,
  kAuthCram,
  kAuthExternal,
  kAuthHttp,
  kAuthWait,
  kBackend,
  kRelay,
};

struct Session;

// Per worker (the loop's context): open sessions per client address
// (mail_limit_conn), and the live sessions, which the worker's exit frees
// (the pool closes the connections at exit without running their handlers).
struct Limits {
  std::unordered_map<std::string, unsigned> per_addr;
  Session* live = nullptr;  // intrusive list through Session::prev/next
};
const char kLimitsKey = 0;


struct Session {
  Connection* c = nullptr;
  const MailSrvConf* conf = nullptr;
  Protocol proto = Protocol::kNone;
  State state = State::kCommand;
  Buf in;
  std::string out;
  std::size_t out_sent = 0;
  bool quit = false;  // close once `out` is sent
  bool starttls_pending = false;
  bool tls = false;
  bool done = false;      // finalize() ran: the connections are closed
  unsigned depth = 0;     // handlers of this session on the stack (guarded)
  bool counted = false;  // in Limits::per_addr
  Limits* worker = nullptr;  // in Limits::live while set
  Session* prev = nullptr;
  Session* next = nullptr;
  bool esmtp = false;
  unsigned errors = 0;
  unsigned attempts = 0;
  std::string tag, login, passwd, salt, method, helo, client_addr;
  // auth_http
  Connection* auth = nullptr;
  PeerConnection auth_pc;
  std::string auth_req;
  std::size_t auth_sent = 0;
  std::string auth_resp;
  std::string pending_error;  // sent when Auth-Wait expires
  // backend
  PeerConnection up_pc;
  Connection* up = nullptr;
  Buf up_in;
  int bstate = 0;
  std::string backend_final;  // the backend's answer to pass to the client
  // relay
  Buf to_up, to_client;
  bool client_eof = false, up_eof = false, up_shut = false, client_shut = false;
};

void finalize(Session& s, const char* why);
void process_input(Session& s);
void client_handler(Event& ev);
void start_auth_http(Session& s);
void greet(Session& s);

Session& of(Event& ev) { return *static_cast<Session*>(ev.owner<Connection>()->data); }

const char* proto_name(Protocol p) {
  switch (p) {
    case Protocol::kImap: return "imap";
    case Protocol::kPop3: return "pop3";
    case Protocol::kSmtp: return "smtp";
    default: return "none";
  }
}

void finalize(Session& s, const char* why) {
  if (s.done) return;
  s.done = true;
  Connection& c = *s.c;
  EventLoop& loop = *c.loop;
  VIGIL_LOG(*c.log, kInfo, 0, "mail %s session of %s %s%s%s", proto_name(s.proto),
            std::string(c.addr_text).c_str(), why, s.login.empty() ? "" : ", login: ",
            s.login.c_str());
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

// Runs a handler body of the session: an allocation failure ends the
// session; the session is deleted once it is finalized and no handler of it
// is on the stack any more, so code below a finalize() can still test
// s.done (and must touch nothing else: the connections are closed).
template <class F>
void guarded(Session& s, F&& f) {
  ++s.depth;
  try {
    f();
  } catch (const std::bad_alloc&) {
    if (!s.done) {
      VIGIL_LOG(*s.c->log, kAlert, 0, "out of memory in a mail session");
      finalize(s, "out of memory");
    }
  }
  if (--s.depth == 0 && s.done) {
    if (Limits* w = s.worker; w != nullptr) {
      (s.prev != nullptr ? s.prev->next : w->live) = s.next;
      if (s.next != nullptr) s.next->prev = s.prev;
    }
    delete &s;
  }
}

// ---- output to the client ---------------------------------------------------

void start_tls(Session& s);

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

void reply(Session& s, std::string_view text) { s.out.append(text); }

// The error answer of the protocol (tag for IMAP).
void reply_error(Session& s, std::string_view imap, std::string_view pop3, std::string_view smtp) {
  switch (s.proto) {
    case Protocol::kImap:
      reply(s, s.tag.empty() ? "*" : s.tag);
      reply(s, " ");
      reply(s, imap);
      break;
    case Protocol::kPop3: reply(s, pop3); break;
    default: reply(s, smtp); break;
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
bool login_disabled(const Session& s) { return s.conf->starttls == Starttls::kOnly && !s.tls; }

// ---- the SASL exchange --------------------------------------------------------

unsigned methods(const Session& s) {
  switch (s.proto) {
    case Protocol::kImap: return s.conf->imap_auth;
    case Protocol::kPop3: return s.conf->pop3_auth;
    default: return s.conf->smtp_auth;
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
  if (iequals(mech, "PLAIN") && (allowed & kAuthPlain)) {
    s.method = "plain";
    if (initial.empty()) {
      s.state = State::kAuthPlain;
      return challenge(s, "");
    }
    if (!decode(initial) || !take_plain(s, initial)) return auth_failed_syntax(s);
    return start_auth_http(s);
  }
  if (iequals(mech, "LOGIN") && (allowed & kAuthLogin)) {
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
      return challenge(s, "");
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
  if (cmd.literal) {
    reply(s, s.tag);
    reply(s, " BAD literals are not supported\r\n");
    if (++s.errors >= s.conf->max_errors) s.quit = true;
    return;
  }
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
    reply(s, s.tag);
    reply(s, " NO must issue a STARTTLS command first\r\n");
    return;
  }
  if (iequals(n, "LOGIN")) {
    if (cmd.nargs != 2 || cmd.args[0].empty()) return invalid_command(s);
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
  if (iequals(n, "CAPA")) return reply(s, s.tls ? s.conf->pop3_caps_text_tls : s.conf->pop3_caps_text);
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
  const bool auth_cmd = iequals(n, "USER") || iequals(n, "PASS") || iequals(n, "APOP") ||
                        iequals(n, "AUTH");
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
      if (m & kAuthLogin) reply(s, "LOGIN\r\n");
      if (m & kAuthPlain) reply(s, "PLAIN\r\n");
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
  if (iequals(n, "RSET") || iequals(n, "NOOP")) return reply(s, "250 2.0.0 OK\r\n");
  if (iequals(n, "STARTTLS") && cmd.nargs == 0 && tls_available(s)) {
    reply(s, "220 2.0.0 Start TLS\r\n");
    s.helo.clear();  // RFC 3207: the client starts again with EHLO
    s.starttls_pending = true;
    return;
  }
  if (iequals(n, "AUTH")) {
    if (login_disabled(s)) return reply(s, "530 5.7.0 Must issue a STARTTLS command first\r\n");
    if (s.helo.empty()) return reply(s, "503 5.5.1 Send EHLO first\r\n");
    return sasl_start(s, cmd, 0);
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
  ParseStatus st = s.proto == Protocol::kImap   ? parse_imap(line, len, cmd)
                   : s.proto == Protocol::kPop3 ? parse_pop3(line, len, cmd)
                                                : parse_smtp(line, len, cmd);
  if (st != ParseStatus::kOk) {
    if (s.proto == Protocol::kImap) s.tag.clear();
    return invalid_command(s);
  }
  switch (s.proto) {
    case Protocol::kImap: return imap_command(s, cmd);
    case Protocol::kPop3: return pop3_command(s, cmd);
    default: return smtp_command(s, cmd);
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
      long n = find_line(s.in.pos, static_cast<std::size_t>(s.in.last - s.in.pos));
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
    long n = c.recv(c, s.in.last, static_cast<std::size_t>(s.in.end - s.in.last));
    if (n == kIoAgain) {
      c.loop->add_timer(*c.read, s.conf->timeout);
      if (Status st = c.loop->handle_read_event(*c.read); !st) finalize(s, "event registration failed");
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
        if (Status st = s.c->loop->handle_read_event(*s.c->read); !st) finalize(s, "event registration failed");
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
      if (Status st = s.c->loop->handle_read_event(*s.c->read); !st) finalize(s, "event registration failed");
    }
  });
}

// ---- STARTTLS / ssl ---------------------------------------------------------

void tls_done(Connection& c, TlsHandshake result) {
  Session& s = *static_cast<Session*>(c.data);
  guarded(s, [&] {
    if (result != TlsHandshake::kOk) return finalize(s, "SSL handshake failed");
    c.read->handler = client_handler;
    c.write->handler = client_handler;
    // After STARTTLS: forget everything said in plain text (RFC 3207 §4.2).
    s.tls = true;
    s.in.pos = s.in.last = s.in.start;
    process_input(s);
  });
}

void start_tls(Session& s) {
  Connection& c = *s.c;
  if (Status st = tls_start_server(c, *s.conf->tls, false, s.conf->ssl.handshake_timeout, tls_done); !st) {
    VIGIL_LOG(*c.log, kAlert, 0, "%s", st.message().c_str());
    finalize(s, "TLS failed");
  }
}

// ---- auth_http ------------------------------------------------------------------

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
  r += "Client-Host: [UNAVAILABLE]\r\n";
  if (s.proto == Protocol::kSmtp) r += "Auth-SMTP-Helo: " + escape(s.helo) + "\r\n";
  if (s.tls) r += "Auth-SSL: on\r\n";
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
  if (rc != kPeerOk && rc != kPeerAgain) return auth_fail(s, "connect() to auth http server failed", errno);
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
          if (Status st = a->loop->handle_write_event(*a->write); !st) finalize(s, "event registration failed");
          return;
        }
        if (n < 0) return auth_fail(s, "send() to auth http server failed", errno);
        s.auth_sent += static_cast<std::size_t>(n);
      }
    }
    for (;;) {
      char buf[4096];
      long n = a->recv(*a, buf, sizeof buf);
      if (n == kIoAgain) {
        if (Status st = a->loop->handle_read_event(*a->read); !st) finalize(s, "event registration failed");
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
  if (head.status != 200) {
    char why[96];
    std::snprintf(why, sizeof why, "auth http server sent invalid response status %d", head.status);
    return auth_fail(s, why, 0);
  }
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
    VIGIL_LOG(*c.log, kInfo, 0, "client login failed: \"%s\" while in http auth state, client: %s, login: \"%s\"",
              status.c_str(), s.client_addr.c_str(), s.login.c_str());
    std::string msg;
    switch (s.proto) {
      case Protocol::kImap: msg = s.tag + " NO " + status + "\r\n"; break;
      case Protocol::kPop3: msg = "-ERR " + status + "\r\n"; break;
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
  if (have_pass) s.passwd = unescape(pass);
  if (s.passwd.empty() && s.method != "external" && (s.method == "apop" || s.method == "cram-md5")) {
    return auth_fail(s, "auth http server did not send password", 0);
  }
  mail_counters()->auth_ok.add();
  connect_backend(s, server, port);
}

// ---- the backend ------------------------------------------------------------------

void start_relay(Session& s);
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
  if (rc != kPeerOk && rc != kPeerAgain) return backend_fail(s, "connect() to upstream failed", errno);
  s.up = s.up_pc.connection;
  s.up->data = &s;
  s.up->read->handler = backend_handler;
  s.up->write->handler = backend_handler;
  std::size_t n = std::max<std::size_t>(s.conf->proxy_buffer, 512);
  char* mem = static_cast<char*>(c.arena->alloc(n, 16));
  if (mem == nullptr) return backend_fail(s, "out of memory for the upstream buffer", 0);
  s.up_in.reset(mem, n);
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

// One line of the backend during the login; false when the session moved on.
bool backend_line(Session& s, std::string_view line) {
  const MailSrvConf& cf = *s.conf;
  switch (s.proto) {
    case Protocol::kImap:
      if (s.bstate == 0) {
        if (!line.starts_with("* OK")) return backend_refused(s, line), false;
        s.bstate = 1;
        return send_backend(s, "1 LOGIN " + imap_quote(s.login) + " " + imap_quote(s.passwd) + "\r\n");
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
    default: {
      // Multi-line replies: "250-..." lines go by, "250 ..." ends the reply.
      if (line.size() < 3) return backend_refused(s, line), false;
      if (line.size() > 3 && line[3] == '-') return true;
      std::string_view code = line.substr(0, 3);
      auto expect = [&](std::string_view want) {
        if (code != want) {
          backend_refused(s, line);
          return false;
        }
        return true;
      };
      const std::string helo = (s.esmtp ? "EHLO " : "HELO ") + s.helo + "\r\n";
      auto after_helo = [&]() {
        if (cf.proxy_smtp_auth) {
          std::string plain = std::string(1, '\0') + s.login + std::string(1, '\0') + s.passwd;
          s.bstate = 4;
          return send_backend(s, "AUTH PLAIN " + b64(plain) + "\r\n");
        }
        s.backend_final = "235 2.0.0 OK\r\n";
        start_relay(s);
        return false;
      };
      switch (s.bstate) {
        case 0:
          if (!expect("220")) return false;
          if (cf.xclient) {
            s.bstate = 1;
            return send_backend(s, "EHLO " + cf.server_name + "\r\n");
          }
          s.bstate = 3;
          return send_backend(s, helo);
        case 1: {
          if (!expect("250")) return false;
          s.bstate = 2;
          std::string x = "XCLIENT ADDR=" + s.client_addr + " LOGIN=" + escape(s.login) +
                          " NAME=[UNAVAILABLE]\r\n";
          return send_backend(s, x);
        }
        case 2:
          if (!expect("220")) return false;
          s.bstate = 3;
          return send_backend(s, helo);
        case 3:
          if (!expect("250")) return false;
          return after_helo();
        default:
          if (!expect("235")) return false;
          s.backend_final = "235 2.0.0 OK\r\n";
          start_relay(s);
          return false;
      }
    }
  }
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
      long n = u->recv(*u, s.up_in.last, static_cast<std::size_t>(s.up_in.end - s.up_in.last));
      if (n == kIoAgain) {
        if (Status st = u->loop->handle_read_event(*u->read); !st) finalize(s, "event registration failed");
        return;
      }
      if (n <= 0) return backend_fail(s, "upstream prematurely closed connection", n < 0 ? errno : 0);
      s.up_in.last += n;
    }
  });
}

// ---- the relay --------------------------------------------------------------------

void relay_handler(Event& ev);

void relay(Session& s) {
  Connection& c = *s.c;
  Connection& u = *s.up;
  bool progress = false;
  if (!upstream::relay(c, u, s.to_up, s.client_eof, s.up_shut, progress) ||
      !upstream::relay(u, c, s.to_client, s.up_eof, s.client_shut, progress)) {
    return finalize(s, "connection error");
  }
  // As nginx's mail proxy: either side's end, once delivered, ends the session.
  if (s.client_eof && s.to_up.pos == s.to_up.last) return finalize(s, "client closed");
  if (s.up_eof && s.to_client.pos == s.to_client.last) return finalize(s, "upstream closed");
  if (progress || !c.read->timer_set) c.loop->add_timer(*c.read, s.conf->proxy_timeout);
  Status st = c.loop->handle_read_event(*c.read, s.client_eof ? kEvClose : 0);
  if (st) st = c.loop->handle_read_event(*u.read, s.up_eof ? kEvClose : 0);
  if (st) st = c.loop->handle_write_event(*c.write);
  if (st) st = c.loop->handle_write_event(*u.write);
  if (!st) finalize(s, "event registration failed");
}

void relay_handler(Event& ev) {
  Session& s = of(ev);
  guarded(s, [&] {
    if (ev.timedout || s.c->close || ev.owner<Connection>()->close) {
      bool timedout = ev.timedout;
      ev.timedout = 0;
      if (timedout) {
        VIGIL_LOG(*s.c->log, kInfo, ETIMEDOUT, "upstream timed out while proxying, client: %s",
                  s.client_addr.c_str());
      }
      return finalize(s, timedout ? "proxy timed out" : "closed by the worker");
    }
    relay(s);
  });
}

void start_relay(Session& s) {
  Connection& c = *s.c;
  Connection& u = *s.up;
  s.state = State::kRelay;
  mail_counters()->relayed.add();
  c.loop->del_timer(*u.read);
  c.loop->del_timer(*c.read);
  const std::size_t pending_client = static_cast<std::size_t>(s.in.last - s.in.pos);
  const std::size_t pending_up = static_cast<std::size_t>(s.up_in.last - s.up_in.pos);
  const std::size_t base = std::max<std::size_t>(s.conf->proxy_buffer, 4096);
  const std::size_t up_n = std::max(base, pending_client);
  const std::size_t down_n = std::max(base, pending_up + s.backend_final.size() + s.out.size());
  char* mem = static_cast<char*>(c.arena->alloc(up_n + down_n, 16));
  if (mem == nullptr) return backend_fail(s, "out of memory for the relay buffers", 0);
  s.to_up.reset(mem, up_n);
  s.to_client.reset(mem + up_n, down_n);
  // What the client still has to hear, then the login answer, then whatever
  // the backend already sent after it.
  auto put = [](Buf& b, std::string_view v) {
    std::memcpy(b.last, v.data(), v.size());
    b.last += v.size();
  };
  put(s.to_client, std::string_view(s.out).substr(s.out_sent));
  s.out.clear();
  s.out_sent = 0;
  put(s.to_client, s.backend_final);
  put(s.to_client, std::string_view(s.up_in.pos, pending_up));
  put(s.to_up, std::string_view(s.in.pos, pending_client));
  s.in.pos = s.in.last;
  s.up_in.pos = s.up_in.last;
  int on = 1;
  if (u.peer_addr == nullptr || u.peer_addr->sa_family != AF_UNIX) {
    (void)::setsockopt(u.fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  }
  u.read->handler = relay_handler;
  u.write->handler = relay_handler;
  c.read->handler = relay_handler;
  c.write->handler = relay_handler;
  VIGIL_LOG(*c.log, kInfo, 0, "client logged in, client: %s, login: \"%s\", upstream: %s",
            s.client_addr.c_str(), s.login.c_str(), s.up_pc.name.c_str());
  // The relay reads only sockets marked ready: the client may have sent more already.
  c.read->ready = 1;
  u.read->ready = 1;
  c.write->ready = 1;
  u.write->ready = 1;
  relay(s);
}

// ---- the start ------------------------------------------------------------------------

void greet(Session& s) {
  s.state = State::kCommand;
  switch (s.proto) {
    case Protocol::kImap: reply(s, "* OK IMAP4 ready\r\n"); break;
    case Protocol::kPop3:
      if (s.conf->pop3_auth & (kAuthApop)) {
        s.salt = make_salt(s);
        reply(s, "+OK POP3 ready " + s.salt + "\r\n");
      } else {
        reply(s, "+OK POP3 ready\r\n");
      }
      break;
    default: reply(s, "220 " + s.conf->server_name + " ESMTP ready\r\n"); break;
  }
  process_input(s);
}

void start_session(Session& s) {
  Connection& c = *s.c;
  c.read->handler = client_handler;
  c.write->handler = client_handler;
  if (s.proto == Protocol::kSmtp && s.conf->smtp_greeting_delay > 0) {
    s.state = State::kGreetingDelay;
    c.loop->add_timer(*c.read, s.conf->smtp_greeting_delay);
    if (Status st = c.loop->handle_read_event(*c.read); !st) finalize(s, "event registration failed");
    return;
  }
  greet(s);
}

void ssl_listen_done(Connection& c, TlsHandshake result) {
  Session& s = *static_cast<Session*>(c.data);
  guarded(s, [&] {
    if (result != TlsHandshake::kOk) return finalize(s, "SSL handshake failed");
    s.tls = true;
    start_session(s);
  });
}

}  // namespace

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
  const std::size_t bufsize = conf->protocol == Protocol::kImap   ? conf->imap_client_buffer
                              : conf->protocol == Protocol::kSmtp ? conf->smtp_client_buffer
                                                                  : kPop3Buffer;
  char* mem = static_cast<char*>(c.arena->alloc(bufsize, 16));
  auto* s = mem != nullptr ? new (std::nothrow) Session() : nullptr;  // allocates nothing else
  if (s == nullptr) {
    VIGIL_LOG(*c.log, kAlert, 0, "out of memory for a mail session");
    c.loop->pool().close_connection(c);
    return;
  }
  s->c = &c;
  s->conf = conf;
  s->proto = conf->protocol;
  s->in.reset(mem, bufsize);
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
      if (Status st = tls_start_server(c, *conf->tls, false, conf->ssl.handshake_timeout, ssl_listen_done); !st) {
        VIGIL_LOG(*c.log, kAlert, 0, "%s", st.message().c_str());
        finalize(*s, "TLS failed");
      }
      return;
    }
    start_session(*s);
  });
}

}  // namespace vigil::mail
