#include "event/tls/tls_conf.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <functional>

#include "core/conf/values.h"
#include "event/tls/certificate.h"
#include "event/tls/ocsp_cache.h"
#include "event/tls/session_cache.h"

namespace vigil {
namespace {

using ServerSetter = Status (*)(const DirectiveCall&, TlsServerConf&);
using ClientSetter = Status (*)(const DirectiveCall&, TlsClientConf&);

Status parse_protocols(const DirectiveCall& call, unsigned& out) {
  unsigned bits = 0;
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    const std::string& p = call.arg(i);
    if (p == "TLSv1") {
      bits |= kTlsV1;
    } else if (p == "TLSv1.1") {
      bits |= kTlsV1_1;
    } else if (p == "TLSv1.2") {
      bits |= kTlsV1_2;
    } else if (p == "TLSv1.3") {
      bits |= kTlsV1_3;
    } else if (p == "SSLv2" || p == "SSLv3") {
      return call.error("\"" + p + "\" is not supported by this OpenSSL");
    } else {
      return call.invalid_value(i);
    }
  }
  out = bits;
  return Status::ok();
}

Status parse_flag_into(const DirectiveCall& call, bool& out) {
  auto v = parse_flag(call.arg(0));
  if (!v) return call.invalid_value(0, ", it must be \"on\" or \"off\"");
  out = *v;
  return Status::ok();
}

// ssl_password_file, proxy_ssl_password_file: the passphrases, one per line,
// read now as nginx does (ngx_ssl_read_password_file), once however many
// servers inherit them; the file may be a FIFO whose writer waits for us.
Status read_password_file(const DirectiveCall& call, std::vector<std::string>& out) {
  constexpr std::size_t kMaxSize = 65536;
  const std::string path = call.env().conf_prefixed(call.arg(0));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd == -1) return Status::error("cannot open \"" + path + "\"" + call.where(), errno);
  std::string data;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == -1 && errno == EINTR) continue;
    if (n == -1) {
      const int err = errno;
      (void)::close(fd);
      return Status::error("cannot read \"" + path + "\"" + call.where(), err);
    }
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
    if (data.size() > kMaxSize) {
      (void)::close(fd);
      return call.error("\"" + path + "\" is too long for a password file");
    }
  }
  if (::close(fd) == -1)
    return Status::error("cannot close \"" + path + "\"" + call.where(), errno);
  std::vector<std::string> list;
  std::size_t start = 0;
  while (start < data.size()) {
    std::size_t end = data.find('\n', start);
    if (end == std::string::npos) end = data.size();
    std::string line = data.substr(start, end - start);
    while (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) list.push_back(std::move(line));
    start = end + 1;
  }
  if (list.empty()) return call.error("no passwords in \"" + path + "\"");
  out = std::move(list);
  return Status::ok();
}

// A certificate or key name: with variables kept as written (resolved per
// handshake, certificate.h), "" kept empty (no client certificate), else
// resolved against the configuration's directory now.
std::string certificate_name(const DirectiveCall& call, bool& variables) {
  const std::string& a = call.arg(0);
  if (tls_name_has_variables(a)) {
    variables = true;
    return a;
  }
  if (a.empty()) return a;
  return call.env().conf_prefixed(a);
}

Status parse_depth(const DirectiveCall& call, int& out) {
  auto v = parse_number(call.arg(0));
  if (!v || *v < 0 || *v > 100) return call.invalid_value(0);
  out = static_cast<int>(*v);
  return Status::ok();
}

// ssl_session_cache off | none | [builtin[:size]] [shared:name:size]
Status set_session_cache(const DirectiveCall& call, TlsServerConf& t) {
  t.builtin_cache = false;
  t.shared_name.clear();
  t.shared_zone = nullptr;
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    const std::string& a = call.arg(i);
    if (a == "off" || a == "none") {
      if (call.arg_count() != 1) return call.invalid_value(i);
      t.cache = a == "off" ? TlsServerConf::Cache::kOff : TlsServerConf::Cache::kNone;
      return Status::ok();
    }
    if (a == "builtin") {
      t.builtin_cache = true;
      t.builtin_size = 20480;
    } else if (a.starts_with("builtin:")) {
      auto n = parse_number(std::string_view(a).substr(8));
      if (!n || *n < 1) return call.invalid_value(i);
      t.builtin_cache = true;
      t.builtin_size = static_cast<std::size_t>(*n);
    } else if (a.starts_with("shared:")) {
      const std::size_t colon = a.rfind(':');
      if (colon <= 7) return call.invalid_value(i);
      std::string name = a.substr(7, colon - 7);
      auto size = parse_size(std::string_view(a).substr(colon + 1));
      if (name.empty() || !size) return call.invalid_value(i);
      auto zone = tls_session_zone(call, name, static_cast<std::size_t>(*size));
      if (!zone) return zone.status();
      t.shared_zone = zone.value();
      t.shared_name = std::move(name);
      t.shared_size = static_cast<std::size_t>(*size);
    } else {
      return call.invalid_value(i);
    }
  }
  t.cache = TlsServerConf::Cache::kOn;
  return Status::ok();
}

Status set_verify_client(const DirectiveCall& call, TlsServerConf& t) {
  const std::string& a = call.arg(0);
  if (a == "off") {
    t.verify = TlsVerify::kOff;
  } else if (a == "on") {
    t.verify = TlsVerify::kOn;
  } else if (a == "optional") {
    t.verify = TlsVerify::kOptional;
  } else if (a == "optional_no_ca") {
    t.verify = TlsVerify::kOptionalNoCa;
  } else {
    return call.invalid_value(0,
                              ", it must be \"on\", \"off\", \"optional\" or \"optional_no_ca\"");
  }
  return Status::ok();
}

Status set_conf_command(const DirectiveCall& call,
                        std::vector<std::pair<std::string, std::string>>& out) {
  out.emplace_back(call.arg(0), call.arg(1));
  return Status::ok();
}

struct ServerDirective {
  const char* name;
  Arity arity;
  bool multiple;
  ServerSetter set;
};

const ServerDirective kServerDirectives[] = {
    {"ssl_certificate", Arity::exactly(1), true,
     [](const DirectiveCall& call, TlsServerConf& t) {
       t.certificates.push_back(certificate_name(call, t.certificate_vars));
       t.certificate_where.push_back(call.where());
       return Status::ok();
     }},
    {"ssl_certificate_key", Arity::exactly(1), true,
     [](const DirectiveCall& call, TlsServerConf& t) {
       t.keys.push_back(certificate_name(call, t.key_vars));
       return Status::ok();
     }},
    {"ssl_protocols", Arity::one_or_more(), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       return parse_protocols(call, t.protocols);
     }},
    {"ssl_ciphers", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       t.ciphers = call.arg(0);
       return Status::ok();
     }},
    {"ssl_prefer_server_ciphers", Arity::on_off(), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       return parse_flag_into(call, t.prefer_server_ciphers);
     }},
    {"ssl_ecdh_curve", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       t.ecdh_curve = call.arg(0);
       return Status::ok();
     }},
    {"ssl_dhparam", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       t.dhparam = call.env().conf_prefixed(call.arg(0));
       return Status::ok();
     }},
    {"ssl_password_file", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       return read_password_file(call, t.passwords);
     }},
    {"ssl_conf_command", Arity::exactly(2), true,
     [](const DirectiveCall& call, TlsServerConf& t) {
       return set_conf_command(call, t.conf_commands);
     }},
    {"ssl_handshake_timeout", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       auto v = parse_msec(call.arg(0));
       if (!v || *v == 0) return call.invalid_value(0);
       t.handshake_timeout = *v;
       return Status::ok();
     }},
    {"ssl_session_cache", Arity::between(1, 2), false, set_session_cache},
    {"ssl_session_timeout", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       auto v = parse_msec(call.arg(0));
       if (!v || *v < 1000) return call.invalid_value(0);
       t.session_timeout = *v;
       return Status::ok();
     }},
    {"ssl_session_tickets", Arity::on_off(), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       return parse_flag_into(call, t.session_tickets);
     }},
    {"ssl_session_ticket_key", Arity::exactly(1), true,
     [](const DirectiveCall& call, TlsServerConf& t) {
       t.ticket_key_files.push_back(call.env().conf_prefixed(call.arg(0)));
       return Status::ok();
     }},
    {"ssl_verify_client", Arity::exactly(1), false, set_verify_client},
    {"ssl_client_certificate", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       t.client_certificate = call.env().conf_prefixed(call.arg(0));
       return Status::ok();
     }},
    {"ssl_trusted_certificate", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       t.trusted_certificate = call.env().conf_prefixed(call.arg(0));
       return Status::ok();
     }},
    {"ssl_crl", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       t.crl = call.env().conf_prefixed(call.arg(0));
       return Status::ok();
     }},
    {"ssl_verify_depth", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsServerConf& t) { return parse_depth(call, t.verify_depth); }},
};

// ssl_ocsp_cache off | shared:name:size (nginx's ngx_http_ssl_ocsp_cache).
Status set_ocsp_cache(const DirectiveCall& call, TlsServerConf& t) {
  const std::string& a = call.arg(0);
  if (a == "off") {
    t.ocsp_cache = nullptr;
    return Status::ok();
  }
  const auto invalid = [&] { return call.error("invalid OCSP cache \"" + a + "\""); };
  if (a.size() <= 7 || !a.starts_with("shared:")) return invalid();
  const std::size_t colon = a.find(':', 7);
  if (colon == std::string::npos || colon == 7) return invalid();
  std::string name = a.substr(7, colon - 7);
  auto size = parse_size(std::string_view(a).substr(colon + 1));
  if (!size) return invalid();
  if (*size < 8 * 4096) return call.error("OCSP cache \"" + a + "\" is too small");
  auto zone = tls_ocsp_zone(call, name, static_cast<std::size_t>(*size));
  if (!zone) return zone.status();
  t.ocsp_cache = zone.value();
  return Status::ok();
}

const ServerDirective kOcspDirectives[] = {
    {"ssl_stapling", Arity::on_off(), false,
     [](const DirectiveCall& call, TlsServerConf& t) { return parse_flag_into(call, t.stapling); }},
    {"ssl_stapling_file", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       t.stapling_file = call.env().conf_prefixed(call.arg(0));
       return Status::ok();
     }},
    {"ssl_stapling_responder", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       t.stapling_responder = call.arg(0);
       return Status::ok();
     }},
    {"ssl_stapling_verify", Arity::on_off(), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       return parse_flag_into(call, t.stapling_verify);
     }},
    {"ssl_ocsp", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       const std::string& a = call.arg(0);
       if (a == "off") {
         t.ocsp = TlsServerConf::Ocsp::kOff;
       } else if (a == "on") {
         t.ocsp = TlsServerConf::Ocsp::kOn;
       } else if (a == "leaf") {
         t.ocsp = TlsServerConf::Ocsp::kLeaf;
       } else {
         return call.invalid_value(0, ", it must be \"on\", \"off\" or \"leaf\"");
       }
       return Status::ok();
     }},
    {"ssl_ocsp_responder", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsServerConf& t) {
       t.ocsp_responder = call.arg(0);
       return Status::ok();
     }},
    {"ssl_ocsp_cache", Arity::exactly(1), false, set_ocsp_cache},
};

struct ClientDirective {
  const char* name;
  Arity arity;
  bool multiple;
  ClientSetter set;
};

const ClientDirective kClientDirectives[] = {
    {"ssl_protocols", Arity::one_or_more(), false,
     [](const DirectiveCall& call, TlsClientConf& t) {
       return parse_protocols(call, t.protocols);
     }},
    {"ssl_ciphers", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsClientConf& t) {
       t.ciphers = call.arg(0);
       return Status::ok();
     }},
    {"ssl_verify", Arity::on_off(), false,
     [](const DirectiveCall& call, TlsClientConf& t) { return parse_flag_into(call, t.verify); }},
    {"ssl_trusted_certificate", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsClientConf& t) {
       t.trusted_certificate = call.env().conf_prefixed(call.arg(0));
       return Status::ok();
     }},
    {"ssl_crl", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsClientConf& t) {
       t.crl = call.env().conf_prefixed(call.arg(0));
       return Status::ok();
     }},
    {"ssl_verify_depth", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsClientConf& t) { return parse_depth(call, t.verify_depth); }},
    {"ssl_server_name", Arity::on_off(), false,
     [](const DirectiveCall& call, TlsClientConf& t) {
       return parse_flag_into(call, t.server_name);
     }},
    {"ssl_name", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsClientConf& t) {
       t.name = call.arg(0);
       return Status::ok();
     }},
    {"ssl_session_reuse", Arity::on_off(), false,
     [](const DirectiveCall& call, TlsClientConf& t) {
       return parse_flag_into(call, t.session_reuse);
     }},
    {"ssl_certificate", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsClientConf& t) {
       t.certificate_vars = false;
       t.certificate = certificate_name(call, t.certificate_vars);
       return Status::ok();
     }},
    {"ssl_certificate_key", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsClientConf& t) {
       t.key_vars = false;
       t.certificate_key = certificate_name(call, t.key_vars);
       return Status::ok();
     }},
    {"ssl_password_file", Arity::exactly(1), false,
     [](const DirectiveCall& call, TlsClientConf& t) {
       return read_password_file(call, t.passwords);
     }},
    {"ssl_conf_command", Arity::exactly(2), true,
     [](const DirectiveCall& call, TlsClientConf& t) {
       return set_conf_command(call, t.conf_commands);
     }},
};

}  // namespace

std::vector<TlsCertificate> TlsServerConf::pairs() const {
  std::vector<TlsCertificate> out;
  for (std::size_t i = 0; i < certificates.size(); ++i) {
    out.push_back({certificates[i], i < keys.size() ? keys[i] : std::string(),
                   i < certificate_where.size() ? certificate_where[i] : where});
  }
  return out;
}

void add_tls_server_directives(Module& m, ConfContextMask contexts, int spec,
                               const std::type_info& conf_type, TlsServerConf& (*get)(void*)) {
  for (const auto& d : kServerDirectives) {
    DirectiveBody b;
    b.spec = spec;
    b.conf_type = &conf_type;
    b.set = [get, set = d.set](const DirectiveCall& call, void* conf) {
      TlsServerConf& t = get(conf);
      if (t.where.empty()) t.where = call.where();
      if (t.conf_prefix.empty()) t.conf_prefix = call.env().conf_prefix;
      return set(call, t);
    };
    m.add(d.name, contexts, d.arity, std::move(b)).multiple = d.multiple;
  }
}

void add_tls_ocsp_directives(Module& m, ConfContextMask contexts, int spec,
                             const std::type_info& conf_type, TlsServerConf& (*get)(void*)) {
  for (const auto& d : kOcspDirectives) {
    DirectiveBody b;
    b.spec = spec;
    b.conf_type = &conf_type;
    b.set = [get, set = d.set](const DirectiveCall& call, void* conf) {
      TlsServerConf& t = get(conf);
      if (t.where.empty()) t.where = call.where();
      if (t.conf_prefix.empty()) t.conf_prefix = call.env().conf_prefix;
      if (t.warnings == nullptr) t.warnings = call.env().warnings;
      return set(call, t);
    };
    m.add(d.name, contexts, d.arity, std::move(b)).multiple = d.multiple;
  }
}

void add_tls_client_directives(Module& m, ConfContextMask contexts, int spec,
                               const std::type_info& conf_type, TlsClientConf& (*get)(void*),
                               bool with_enable_flag, std::string_view prefix) {
  auto add = [&](const char* suffix, Arity arity, bool multiple, ClientSetter set) {
    DirectiveBody b;
    b.spec = spec;
    b.conf_type = &conf_type;
    b.set = [get, set](const DirectiveCall& call, void* conf) {
      TlsClientConf& t = get(conf);
      if (t.where.empty()) t.where = call.where();
      if (t.conf_prefix.empty()) t.conf_prefix = call.env().conf_prefix;
      return set(call, t);
    };
    std::string name(prefix);
    name += '_';
    name += suffix;
    m.add(std::move(name), contexts, arity, std::move(b)).multiple = multiple;
  };
  if (with_enable_flag) {
    add("ssl", Arity::on_off(), false, [](const DirectiveCall& call, TlsClientConf& t) {
      return parse_flag_into(call, t.enable);
    });
  }
  for (const auto& d : kClientDirectives) add(d.name, d.arity, d.multiple, d.set);
}

void merge_tls_server_conf(const ConfInit& ctx, const TlsServerConf& p, TlsServerConf& c) {
  if (!ctx.is_set("ssl_certificate")) {
    c.certificates = p.certificates;
    c.certificate_where = p.certificate_where;
    c.certificate_vars = p.certificate_vars;
  }
  if (!ctx.is_set("ssl_certificate_key")) {
    c.keys = p.keys;
    c.key_vars = p.key_vars;
  }
  if (!ctx.is_set("ssl_protocols")) c.protocols = p.protocols;
  if (!ctx.is_set("ssl_ciphers")) c.ciphers = p.ciphers;
  if (!ctx.is_set("ssl_prefer_server_ciphers")) c.prefer_server_ciphers = p.prefer_server_ciphers;
  if (!ctx.is_set("ssl_ecdh_curve")) c.ecdh_curve = p.ecdh_curve;
  if (!ctx.is_set("ssl_dhparam")) c.dhparam = p.dhparam;
  if (!ctx.is_set("ssl_password_file")) c.passwords = p.passwords;
  if (!ctx.is_set("ssl_conf_command")) c.conf_commands = p.conf_commands;
  if (!ctx.is_set("ssl_handshake_timeout")) c.handshake_timeout = p.handshake_timeout;
  if (!ctx.is_set("ssl_reject_handshake")) c.reject_handshake = p.reject_handshake;
  if (!ctx.is_set("ssl_session_cache")) {
    c.cache = p.cache;
    c.builtin_cache = p.builtin_cache;
    c.builtin_size = p.builtin_size;
    c.shared_name = p.shared_name;
    c.shared_size = p.shared_size;
    c.shared_zone = p.shared_zone;
  }
  if (!ctx.is_set("ssl_session_timeout")) c.session_timeout = p.session_timeout;
  if (!ctx.is_set("ssl_session_tickets")) c.session_tickets = p.session_tickets;
  if (!ctx.is_set("ssl_session_ticket_key")) c.ticket_key_files = p.ticket_key_files;
  if (!ctx.is_set("ssl_verify_client")) c.verify = p.verify;
  if (!ctx.is_set("ssl_client_certificate")) c.client_certificate = p.client_certificate;
  if (!ctx.is_set("ssl_trusted_certificate")) c.trusted_certificate = p.trusted_certificate;
  if (!ctx.is_set("ssl_crl")) c.crl = p.crl;
  if (!ctx.is_set("ssl_verify_depth")) c.verify_depth = p.verify_depth;
  if (!ctx.is_set("ssl_stapling")) c.stapling = p.stapling;
  if (!ctx.is_set("ssl_stapling_verify")) c.stapling_verify = p.stapling_verify;
  if (!ctx.is_set("ssl_stapling_file")) c.stapling_file = p.stapling_file;
  if (!ctx.is_set("ssl_stapling_responder")) c.stapling_responder = p.stapling_responder;
  if (!ctx.is_set("ssl_ocsp")) c.ocsp = p.ocsp;
  if (!ctx.is_set("ssl_ocsp_responder")) c.ocsp_responder = p.ocsp_responder;
  if (!ctx.is_set("ssl_ocsp_cache")) c.ocsp_cache = p.ocsp_cache;
  if (c.warnings == nullptr) c.warnings = p.warnings;
  if (c.where.empty()) c.where = p.where;
  if (c.conf_prefix.empty()) c.conf_prefix = p.conf_prefix;
}

void merge_tls_client_conf(const ConfInit& ctx, const TlsClientConf& p, TlsClientConf& c,
                           std::string_view prefix) {
  auto set = [&](const char* suffix) {
    std::string name(prefix);
    name += '_';
    name += suffix;
    return ctx.is_set(name);
  };
  if (!set("ssl")) c.enable = p.enable;
  if (!set("ssl_protocols")) c.protocols = p.protocols;
  if (!set("ssl_ciphers")) c.ciphers = p.ciphers;
  if (!set("ssl_verify")) c.verify = p.verify;
  if (!set("ssl_trusted_certificate")) c.trusted_certificate = p.trusted_certificate;
  if (!set("ssl_crl")) c.crl = p.crl;
  if (!set("ssl_verify_depth")) c.verify_depth = p.verify_depth;
  if (!set("ssl_server_name")) c.server_name = p.server_name;
  if (!set("ssl_name")) c.name = p.name;
  if (!set("ssl_session_reuse")) c.session_reuse = p.session_reuse;
  if (!set("ssl_certificate")) {
    c.certificate = p.certificate;
    c.certificate_vars = p.certificate_vars;
  }
  if (!set("ssl_certificate_key")) {
    c.certificate_key = p.certificate_key;
    c.key_vars = p.key_vars;
  }
  if (!set("ssl_password_file")) c.passwords = p.passwords;
  if (!set("ssl_conf_command")) c.conf_commands = p.conf_commands;
  if (c.where.empty()) c.where = p.where;
  if (c.conf_prefix.empty()) c.conf_prefix = p.conf_prefix;
}

}  // namespace vigil
