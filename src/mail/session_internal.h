#pragma once
// Internal to the mail session (src/mail/session.cc, auth_http.cc,
// backend.cc, relay.cc): the session object and what its files share.
// Nothing outside src/mail includes this.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>

#include "mail/mail_conf.h"
#include "mail/parse.h"
#include "vigil/core/buffer.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/loop.h"
#include "vigil/event/peer.h"

namespace vigil::mail::detail {

constexpr std::size_t kPop3Buffer = 512;         // RFC 1939: commands are at most 255 bytes
constexpr std::size_t kMaxAuthResponse = 16384;  // the auth_http answer's head
constexpr std::size_t kMaxPendingOutput = 65536;

enum class State : std::uint8_t {
  kResolving,  // SMTP: the client's name is being looked up (reading waits)
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
inline constexpr char kLimitsKey = 0;  // the loop context key (its address)

struct Session {
  Session() = default;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() {
    if (resolver != nullptr && rq != nullptr) resolver->cancel(*rq);
  }
  // SMTP's Client-Host (auth_http) and XCLIENT NAME: the client's name once
  // its PTR and the name's addresses agree, else nginx's placeholders.
  std::string host = "[UNAVAILABLE]";
  Resolver* resolver = nullptr;  // set while a lookup is under way
  std::unique_ptr<ResolveRequest> rq;
  Connection* c = nullptr;
  const MailSrvConf* conf = nullptr;
  Protocol proto = Protocol::kNone;
  State state = State::kCommand;
  Buf in;  // the client's commands; then the relay's buffer towards the backend
  std::unique_ptr<char[]> in_mem;
  std::string out;
  std::size_t out_sent = 0;
  bool quit = false;  // close once `out` is sent
  bool starttls_pending = false;
  bool tls = false;
  bool done = false;         // finalize() ran: the connections are closed
  unsigned depth = 0;        // handlers of this session on the stack (guarded)
  bool counted = false;      // in Limits::per_addr
  Limits* worker = nullptr;  // in Limits::live while set
  Session* prev = nullptr;
  Session* next = nullptr;
  bool esmtp = false;
  unsigned errors = 0;
  unsigned attempts = 0;
  std::string tag, login, passwd, salt, method, helo, client_addr;
  bool passwd_set = false;         // EXTERNAL has none unless auth_http sends Auth-Pass
  std::string smtp_from, smtp_to;  // smtp_auth none: the client's MAIL FROM and RCPT TO lines
  std::string_view raw_line;       // SMTP: the command line being handled, as sent
  std::size_t cmd_len = 0;         // IMAP: the command framed so far, literals included
  std::size_t literal_left = 0;    // IMAP: bytes of its last literal still to come
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
  Buf up_in;  // the backend's login answers; then the relay's buffer towards the client
  std::unique_ptr<char[]> up_mem;
  int bstate = 0;
  std::string backend_final;  // the backend's answer to pass to the client
  // relay: to_up starts as `in` (in_mem), to_client as `up_in` (up_mem, or
  // a larger block when the answers pending at the switch do not fit,
  // rare); a direction whose buffer is empty gives it back until it has
  // data to carry again, so an idle session holds no buffer.
  Buf to_up, to_client;
  std::size_t to_up_size = 0, to_client_size = 0;
  bool client_eof = false, up_eof = false, up_shut = false, client_shut = false;
};

// session.cc: the session's life and the client's side.
Session& of(Event& ev);
const char* proto_name(Protocol p);
void finalize(Session& s, const char* why);
bool flush(Session& s);
void reply(Session& s, std::string_view text);
void internal_error(Session& s);
void process_input(Session& s);
std::string b64(std::string_view in);
// auth_http.cc: the request to auth_http and its answer.
void start_auth_http(Session& s);
void auth_fail(Session& s, const char* why, int err);
// backend.cc: the connect to the backend and the login there.
void connect_backend(Session& s, const std::string& host, const std::string& port);
void backend_fail(Session& s, const char* why, int err);
// relay.cc: both ways once logged in.
void start_relay(Session& s);

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

}  // namespace vigil::mail::detail
