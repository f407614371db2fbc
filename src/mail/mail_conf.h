#pragma once
// The "mail { }" block (nginx's ngx_mail_core_module, ngx_mail_proxy_module,
// ngx_mail_auth_http_module, ngx_mail_imap/pop3/smtp_module, ngx_mail_ssl_module):
//
//   mail {
//       server_name mail.example.com;
//       auth_http 127.0.0.1:9000/auth;
//       server {
//           listen 127.0.0.1:1143;            # [ssl] [reuseport] [backlog=N]
//           protocol imap;                    # imap | pop3 | smtp
//           imap_auth plain login cram-md5;   # pop3_auth, smtp_auth
//           starttls on;                      # on | off | only
//       }
//   }
//
// Each client logs in through an auth_http request, is connected to the
// server the answer names, logged in there, and then relayed both ways.

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/conf/loader.h"
#include "core/cidr.h"
#include "core/conf/module.h"
#include "event/listen_conf.h"
#include "event/resolver.h"
#include "event/tls/context.h"
#include "event/tls/tls_conf.h"
#include "vigil/core/clock.h"

namespace vigil {
// The mail block's contexts (stream uses bits 8-10).
inline constexpr ConfContextMask kMailMainConf = 1u << 12;
inline constexpr ConfContextMask kMailSrvConf = 1u << 13;
}  // namespace vigil

namespace vigil::mail {

enum class Protocol : std::uint8_t { kNone, kImap, kPop3, kSmtp };
enum class Starttls : std::uint8_t { kOff, kOn, kOnly };

// Authentication methods, as bits (nginx's NGX_MAIL_AUTH_*_ENABLED).
inline constexpr unsigned kAuthPlain = 1u << 0;
inline constexpr unsigned kAuthLogin = 1u << 1;
inline constexpr unsigned kAuthApop = 1u << 2;
inline constexpr unsigned kAuthCramMd5 = 1u << 3;
inline constexpr unsigned kAuthExternal = 1u << 4;
inline constexpr unsigned kAuthNone = 1u << 5;

struct MailSrvConf;
// What a mail listener points at (Listening::servers): its server, and
// whether the address says "ssl".
struct MailPort {
  MailSrvConf* conf = nullptr;
  bool ssl = false;
};

struct MailSrvConf {
  std::vector<ListenArgs> listens;
  Protocol protocol = Protocol::kNone;
  std::string server_name;  // default: the host name
  Msec timeout = 60000;
  Msec proxy_timeout = 86400000;  // 24h, nginx's default
  Msec smtp_greeting_delay = 0;
  // resolver / resolver_timeout: SMTP looks the client's name up (PTR,
  // then the name's addresses must include the client's) for Client-Host.
  std::shared_ptr<const ResolverConf> resolver;  // null: "[UNAVAILABLE]"
  Msec resolver_timeout = 30000;
  Msec auth_http_timeout = 60000;
  std::size_t imap_client_buffer = 4096;
  std::size_t smtp_client_buffer = 4096;
  std::size_t proxy_buffer = 4096;  // nginx's proxy_buffer: the backend's login answers
  unsigned max_errors = 5;
  bool proxy_pass_error_message = false;
  bool xclient = true;
  bool smtp_auth_set = false, imap_auth_set = false, pop3_auth_set = false;
  bool imap_caps_set = false, pop3_caps_set = false, smtp_caps_set = false;
  bool auth_http_pass_client_cert = false;
  bool proxy_smtp_auth = false;
  bool proxy_protocol = false;  // a PROXY protocol v1 header to the backend first
  // set_real_ip_from: the addresses whose PROXY protocol header (on "listen
  // ... proxy_protocol") names the client.
  std::vector<Cidr> realip_from;
  Starttls starttls = Starttls::kOff;
  unsigned imap_auth = kAuthPlain;
  unsigned pop3_auth = kAuthPlain | kAuthLogin;
  unsigned smtp_auth = kAuthPlain | kAuthLogin;
  std::vector<std::string> imap_capabilities{"IMAP4", "IMAP4rev1", "UIDPLUS"};
  std::vector<std::string> pop3_capabilities{"TOP", "USER", "UIDL"};
  std::vector<std::string> smtp_capabilities;
  std::string auth_http;  // as written
  std::vector<std::pair<std::string, std::string>> auth_http_headers;
  bool auth_http_headers_set = false;
  unsigned limit_conn = 0;  // mail_limit_conn: per client address and worker, 0 = no limit
  // error_log of the server or the mail block (core/error_logs.h); null: the
  // main level's. A session writes to its server's.
  Log* error_log = nullptr;
  std::string where;
  TlsServerConf ssl;
  std::shared_ptr<TlsContext> tls;               // built for "listen ... ssl" or starttls
  bool ssl_listen = false;                       // some listen of the server says "ssl"
  std::vector<std::unique_ptr<MailPort>> ports;  // one per listen, in order

  // Resolved when the block closes.
  sockaddr_storage auth_addr{};
  socklen_t auth_addrlen = 0;
  std::string auth_host;  // Host: of the request
  std::string auth_uri;   // "/auth"
  std::string auth_peer;  // "127.0.0.1:9000" for messages
  // The capability lines the server sends, precomputed.
  std::string imap_caps_line;           // "* CAPABILITY ..." before STARTTLS
  std::string imap_caps_line_tls;       // after, or on an ssl port
  std::string imap_caps_line_starttls;  // starttls only: LOGINDISABLED
  std::string pop3_caps_text;           // "+OK Capability list follows\r\n..." lines
  std::string pop3_caps_text_tls;
  std::string pop3_caps_text_starttls;  // starttls only: without USER and SASL
  std::string smtp_ehlo_text;           // "250-name\r\n250-...\r\n250 ..." (after the name)
  std::string smtp_ehlo_text_tls;
  std::string smtp_ehlo_text_starttls;  // starttls only: without AUTH
};

struct MailFinalConf {
  std::vector<MailSrvConf*> servers;
};

const Module& mail_module();
// Null when the configuration has no mail block.
const MailFinalConf* mail_final(const Configuration& conf);

// "host:port[/uri]" or "http://host:port/uri" into the conf's auth_* fields.
Status parse_auth_http(const std::string& text, MailSrvConf& conf);

}  // namespace vigil::mail
