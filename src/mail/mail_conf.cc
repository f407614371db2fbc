#include "mail/mail_conf.h"

#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "core/error_logs.h"
#include "mail/parse.h"

namespace vigil::mail {

namespace {

constexpr int kSrvSpec = 0;
int g_final_spec = -1;

Status set_listen(const DirectiveCall& call, MailSrvConf& srv) {
  if (srv.where.empty()) srv.where = call.where();
  return parse_listen(call, srv.listens, /*allow_default_server=*/false);
}

Status set_capabilities(const DirectiveCall& call, std::vector<std::string>& caps, bool& set) {
  caps = call.args();
  set = true;
  return Status::ok();
}

// imap_auth / pop3_auth / smtp_auth: the methods the protocol accepts.
Status set_auth(const DirectiveCall& call, unsigned& methods, bool& set, Protocol proto) {
  methods = 0;
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    const std::string& a = call.arg(i);
    unsigned bit = 0;
    // POP3's "plain" is USER/PASS and the SASL PLAIN and LOGIN (nginx).
    if (iequals(a, "plain"))
      bit = proto == Protocol::kPop3 ? kAuthPlain | kAuthLogin : kAuthPlain;
    else if (iequals(a, "login"))
      bit = kAuthLogin;
    else if (iequals(a, "cram-md5"))
      bit = kAuthCramMd5;
    else if (iequals(a, "external"))
      bit = kAuthExternal;
    else if (iequals(a, "apop") && proto == Protocol::kPop3)
      bit = kAuthApop;
    else if (iequals(a, "none") && proto == Protocol::kSmtp)
      bit = kAuthNone;
    if (bit == 0) return call.invalid_value(i);
    methods |= bit;
  }
  set = true;
  return Status::ok();
}

Status set_header(const DirectiveCall& call, MailSrvConf& srv) {
  srv.auth_http_headers.emplace_back(call.arg(0), call.arg(1));
  srv.auth_http_headers_set = true;
  return Status::ok();
}

Protocol protocol_of_port(const ListenArgs& l) {
  std::string_view t = l.addr_text;
  auto colon = t.rfind(':');
  if (colon == std::string_view::npos) return Protocol::kNone;
  t.remove_prefix(colon + 1);
  if (t == "143" || t == "993") return Protocol::kImap;
  if (t == "110" || t == "995") return Protocol::kPop3;
  if (t == "25" || t == "587" || t == "465") return Protocol::kSmtp;
  return Protocol::kNone;
}

std::string join_caps(const char* prefix, const std::vector<std::string>& caps) {
  std::string out = prefix;
  for (const std::string& c : caps) out += " " + c;
  return out;
}

void build_texts(MailSrvConf& s) {
  const bool starttls = s.starttls != Starttls::kOff;
  // IMAP: "* CAPABILITY ..." with AUTH= for the methods beyond LOGIN.
  std::string imap = join_caps("* CAPABILITY", s.imap_capabilities);
  if (s.imap_auth & kAuthPlain) imap += " AUTH=PLAIN";
  if (s.imap_auth & kAuthLogin) imap += " AUTH=LOGIN";
  if (s.imap_auth & kAuthCramMd5) imap += " AUTH=CRAM-MD5";
  if (s.imap_auth & kAuthExternal) imap += " AUTH=EXTERNAL";
  s.imap_caps_line_tls = imap + "\r\n";
  s.imap_caps_line = imap + (starttls ? " STARTTLS" : "") + "\r\n";
  s.imap_caps_line_starttls =
      join_caps("* CAPABILITY", s.imap_capabilities) + " STARTTLS LOGINDISABLED\r\n";
  // POP3: CAPA's list, with the SASL methods.
  std::string pop3 = "+OK Capability list follows\r\n";
  for (const std::string& c : s.pop3_capabilities) pop3 += c + "\r\n";
  std::string sasl;
  if (s.pop3_auth & kAuthPlain) sasl += " PLAIN";
  if (s.pop3_auth & kAuthLogin) sasl += " LOGIN";
  if (s.pop3_auth & kAuthCramMd5) sasl += " CRAM-MD5";
  if (s.pop3_auth & kAuthExternal) sasl += " EXTERNAL";
  if (!sasl.empty()) pop3 += "SASL" + sasl + "\r\n";
  s.pop3_caps_text_tls = pop3 + ".\r\n";
  s.pop3_caps_text = pop3 + (starttls ? "STLS\r\n" : "") + ".\r\n";
  // starttls only: no login before STLS, so neither USER nor SASL (nginx).
  std::string pop3_only = "+OK Capability list follows\r\n";
  for (const std::string& c : s.pop3_capabilities) {
    if (!iequals(c, "USER")) pop3_only += c + "\r\n";
  }
  s.pop3_caps_text_starttls = pop3_only + "STLS\r\n.\r\n";
  // SMTP: the EHLO answer after "250-<server_name>".
  std::vector<std::string> lines = s.smtp_capabilities;
  std::string auth;
  if (s.smtp_auth & kAuthPlain) auth += " PLAIN";
  if (s.smtp_auth & kAuthLogin) auth += " LOGIN";
  if (s.smtp_auth & kAuthCramMd5) auth += " CRAM-MD5";
  if (s.smtp_auth & kAuthExternal) auth += " EXTERNAL";
  auto ehlo = [&s](const std::vector<std::string>& ls) {
    std::string out;
    for (std::size_t i = 0; i < ls.size(); ++i)
      out += "250" + std::string(i + 1 == ls.size() ? " " : "-") + ls[i] + "\r\n";
    if (ls.empty()) return "250 " + s.server_name + "\r\n";
    return "250-" + s.server_name + "\r\n" + out;
  };
  std::vector<std::string> plain_lines = lines;
  if (!auth.empty()) lines.push_back("AUTH" + auth);
  s.smtp_ehlo_text_tls = ehlo(lines);
  std::vector<std::string> with_tls = lines;
  if (starttls) with_tls.push_back("STARTTLS");
  s.smtp_ehlo_text = ehlo(with_tls);
  plain_lines.push_back("STARTTLS");
  s.smtp_ehlo_text_starttls = ehlo(plain_lines);
}

Status init_final(const ConfInit& ctx, MailFinalConf& fin) {
  const std::size_t module = ctx.module();
  for (const auto& child : ctx.scope().children()) {
    if (child->context() != kMailSrvConf) continue;
    auto* srv = static_cast<MailSrvConf*>(child->conf(module, kSrvSpec));
    if (srv == nullptr) return Status::error("internal error: mail server without conf");
    if (srv->where.empty()) srv->where = child->where();
    if (srv->listens.empty())
      return Status::error("no \"listen\" is defined for server" + child->where());
    if (srv->protocol == Protocol::kNone) srv->protocol = protocol_of_port(srv->listens.front());
    if (srv->protocol == Protocol::kNone) {
      return Status::error("unknown mail protocol for server" + srv->where);
    }
    if (srv->auth_http.empty()) {
      return Status::error("no \"auth_http\" is defined for server" + srv->where);
    }
    if (Status st = parse_auth_http(srv->auth_http, *srv); !st) {
      return Status::error(st.message() + srv->where);
    }
    if (srv->server_name.empty()) {
      char host[256] = {};
      if (::gethostname(host, sizeof host - 1) == -1) return Status::sys("gethostname()");
      srv->server_name = host;
    }
    for (const ListenArgs& l : srv->listens) {
      srv->ssl_listen = srv->ssl_listen || l.ssl;
      for (const MailSrvConf* other : fin.servers) {
        for (const ListenArgs& o : other->listens) {
          // Port 0 (the kernel picks one per socket) never collides.
          if (o.addr_text == l.addr_text && !l.addr_text.ends_with(":0")) {
            return Status::error("duplicate \"" + l.addr_text + "\" address and port pair" +
                                 srv->where);
          }
        }
      }
    }
    if (srv->ssl_listen || srv->starttls != Starttls::kOff) {
      if (srv->ssl.where.empty()) srv->ssl.where = srv->where;
      // Mail has no variables to name a certificate per handshake.
      if (srv->ssl.certificate_variables()) {
        return Status::error("variables in \"ssl_certificate\" are not supported in mail" +
                             srv->ssl.where);
      }
      // ALPN: the protocol's own name (nginx's mail ALPN; a client that
      // offers only others is refused, RFC 7301 §3.2).
      auto tls = TlsContext::server(srv->ssl, {srv->protocol == Protocol::kImap   ? "imap"
                                               : srv->protocol == Protocol::kPop3 ? "pop3"
                                                                                  : "smtp"});
      if (!tls) return tls.status();
      srv->tls = std::move(tls.value());
    }
    for (const ListenArgs& l : srv->listens) {
      auto port = std::make_unique<MailPort>();
      port->conf = srv;
      port->ssl = l.ssl;
      srv->ports.push_back(std::move(port));
    }
    build_texts(*srv);
    fin.servers.push_back(srv);
  }
  return Status::ok();
}

Status merge_srv(const ConfInit& ctx, const MailSrvConf& parent, MailSrvConf& child) {
  merge_tls_server_conf(ctx, parent.ssl, child.ssl);
  if (!ctx.is_set("set_real_ip_from")) child.realip_from = parent.realip_from;
  if (!child.imap_caps_set) child.imap_capabilities = parent.imap_capabilities;
  if (!child.pop3_caps_set) child.pop3_capabilities = parent.pop3_capabilities;
  if (!child.smtp_caps_set) child.smtp_capabilities = parent.smtp_capabilities;
  if (!child.imap_auth_set) child.imap_auth = parent.imap_auth;
  if (!child.pop3_auth_set) child.pop3_auth = parent.pop3_auth;
  if (!child.smtp_auth_set) child.smtp_auth = parent.smtp_auth;
  if (!child.auth_http_headers_set) child.auth_http_headers = parent.auth_http_headers;
  if (!ctx.is_set("error_log")) child.error_log = parent.error_log;
  if (!ctx.is_set("resolver")) child.resolver = parent.resolver;
  return Status::ok();
}

Module* make_mail_module() {
  auto* m = new Module("mail");
  auto srv = m->add_conf<MailSrvConf>(kMailMainConf | kMailSrvConf, {}, merge_srv);
  auto fin = m->add_conf<MailFinalConf>(kMailMainConf, init_final);
  g_final_spec = fin.index();

  m->add_block("mail", kMainConf, Arity::none(), kMailMainConf);
  m->add_block("server", kMailMainConf, Arity::none(), kMailSrvConf).multiple = true;
  m->add("listen", kMailSrvConf, Arity::one_or_more(), srv.custom(set_listen)).multiple = true;
  constexpr ConfContextMask kAny = kMailMainConf | kMailSrvConf;
  m->add("protocol", kMailSrvConf, Arity::exactly(1),
         srv.one_of<Protocol>(
             &MailSrvConf::protocol, Protocol::kNone,
             {{"imap", Protocol::kImap}, {"pop3", Protocol::kPop3}, {"smtp", Protocol::kSmtp}}));
  m->add("server_name", kAny, Arity::exactly(1), srv.string(&MailSrvConf::server_name, "", false));
  m->add("timeout", kAny, Arity::exactly(1), srv.msec(&MailSrvConf::timeout, 60000));
  m->add("proxy_timeout", kAny, Arity::exactly(1), srv.msec(&MailSrvConf::proxy_timeout, 86400000));
  m->add("proxy_buffer", kAny, Arity::exactly(1), srv.size(&MailSrvConf::proxy_buffer, 4096, 512));
  m->add("proxy_pass_error_message", kAny, Arity::on_off(),
         srv.flag(&MailSrvConf::proxy_pass_error_message, false));
  m->add("xclient", kAny, Arity::on_off(), srv.flag(&MailSrvConf::xclient, true));
  m->add("proxy_smtp_auth", kAny, Arity::on_off(), srv.flag(&MailSrvConf::proxy_smtp_auth, false));
  m->add("proxy_protocol", kAny, Arity::on_off(), srv.flag(&MailSrvConf::proxy_protocol, false));
  m->add("set_real_ip_from", kAny, Arity::exactly(1),
         srv.custom([](const DirectiveCall& call, MailSrvConf& conf) {
           std::string error;
           if (!parse_cidr_or_host(call.arg(0), conf.realip_from, error)) return call.error(error);
           return Status::ok();
         }))
      .multiple = true;
  m->add("smtp_greeting_delay", kAny, Arity::exactly(1),
         srv.msec(&MailSrvConf::smtp_greeting_delay, 0));
  m->add("resolver", kAny, Arity::one_or_more(),
         srv.custom([](const DirectiveCall& call, MailSrvConf& conf) {
           auto r = std::make_shared<ResolverConf>();
           if (Status st = parse_resolver(call.args(), *r); !st) return call.error(st.message());
           conf.resolver = std::move(r);
           return Status::ok();
         }));
  m->add("resolver_timeout", kAny, Arity::exactly(1),
         srv.msec(&MailSrvConf::resolver_timeout, 30000));
  m->add("imap_client_buffer", kAny, Arity::exactly(1),
         srv.size(&MailSrvConf::imap_client_buffer, 4096, 128));
  m->add("smtp_client_buffer", kAny, Arity::exactly(1),
         srv.size(&MailSrvConf::smtp_client_buffer, 4096, 128));
  m->add("error_log", kAny, Arity::between(1, 2),
         srv.custom([](const DirectiveCall& call, MailSrvConf& conf) {
           return set_error_log(call, conf.error_log);
         }))
      .multiple = true;
  m->add("max_errors", kAny, Arity::exactly(1), srv.number<unsigned>(&MailSrvConf::max_errors, 5));
  m->add("auth_http", kAny, Arity::exactly(1), srv.string(&MailSrvConf::auth_http, "", false));
  m->add("auth_http_timeout", kAny, Arity::exactly(1),
         srv.msec(&MailSrvConf::auth_http_timeout, 60000));
  m->add("auth_http_header", kAny, Arity::exactly(2), srv.custom(set_header)).multiple = true;
  m->add("auth_http_pass_client_cert", kAny, Arity::on_off(),
         srv.flag(&MailSrvConf::auth_http_pass_client_cert, false));
  m->add("mail_limit_conn", kAny, Arity::exactly(1),
         srv.number<unsigned>(&MailSrvConf::limit_conn, 0));
  m->add("starttls", kAny, Arity::exactly(1),
         srv.one_of<Starttls>(
             &MailSrvConf::starttls, Starttls::kOff,
             {{"on", Starttls::kOn}, {"off", Starttls::kOff}, {"only", Starttls::kOnly}}));
  m->add("imap_capabilities", kAny, Arity::one_or_more(),
         srv.custom([](const DirectiveCall& call, MailSrvConf& s) {
           return set_capabilities(call, s.imap_capabilities, s.imap_caps_set);
         }));
  m->add("pop3_capabilities", kAny, Arity::one_or_more(),
         srv.custom([](const DirectiveCall& call, MailSrvConf& s) {
           return set_capabilities(call, s.pop3_capabilities, s.pop3_caps_set);
         }));
  m->add("smtp_capabilities", kAny, Arity::one_or_more(),
         srv.custom([](const DirectiveCall& call, MailSrvConf& s) {
           return set_capabilities(call, s.smtp_capabilities, s.smtp_caps_set);
         }));
  m->add("imap_auth", kAny, Arity::one_or_more(),
         srv.custom([](const DirectiveCall& call, MailSrvConf& s) {
           return set_auth(call, s.imap_auth, s.imap_auth_set, Protocol::kImap);
         }));
  m->add("pop3_auth", kAny, Arity::one_or_more(),
         srv.custom([](const DirectiveCall& call, MailSrvConf& s) {
           return set_auth(call, s.pop3_auth, s.pop3_auth_set, Protocol::kPop3);
         }));
  m->add("smtp_auth", kAny, Arity::one_or_more(),
         srv.custom([](const DirectiveCall& call, MailSrvConf& s) {
           return set_auth(call, s.smtp_auth, s.smtp_auth_set, Protocol::kSmtp);
         }));
  add_tls_server_directives(*m, kAny, srv.index(), typeid(MailSrvConf),
                            tls_server_member<MailSrvConf, &MailSrvConf::ssl>);
  return m;
}

}  // namespace

Status parse_auth_http(const std::string& text, MailSrvConf& conf) {
  std::string rest = text;
  if (rest.starts_with("http://")) rest.erase(0, 7);
  if (rest.starts_with("https://")) return Status::error("https is not supported in \"auth_http\"");
  std::string hostport = rest, uri = "/";
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    hostport = rest.substr(0, slash);
    uri = rest.substr(slash);
  }
  std::string host = hostport, port = "80";
  if (!hostport.empty() && hostport[0] == '[') {
    auto close = hostport.find(']');
    if (close == std::string::npos)
      return Status::error("invalid URL \"" + text + "\" in \"auth_http\"");
    host = hostport.substr(1, close - 1);
    if (close + 1 < hostport.size()) {
      if (hostport[close + 1] != ':')
        return Status::error("invalid URL \"" + text + "\" in \"auth_http\"");
      port = hostport.substr(close + 2);
    }
  } else if (auto colon = hostport.rfind(':'); colon != std::string::npos) {
    host = hostport.substr(0, colon);
    port = hostport.substr(colon + 1);
  }
  if (host.empty() || port.empty())
    return Status::error("invalid URL \"" + text + "\" in \"auth_http\"");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0 || res == nullptr) {
    return Status::error("host not found in \"" + text + "\" of the \"auth_http\" directive");
  }
  std::memcpy(&conf.auth_addr, res->ai_addr, res->ai_addrlen);
  conf.auth_addrlen = res->ai_addrlen;
  ::freeaddrinfo(res);
  conf.auth_host = hostport;
  conf.auth_uri = uri;
  conf.auth_peer = hostport;
  return Status::ok();
}

const Module& mail_module() {
  static const Module* module = make_mail_module();  // never destroyed: used until exit
  return *module;
}

const MailFinalConf* mail_final(const Configuration& conf) {
  const Module& m = mail_module();
  return conf.find<MailFinalConf>(m, g_final_spec);
}

}  // namespace vigil::mail
