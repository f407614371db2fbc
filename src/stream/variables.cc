#include "stream/variables.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <new>
#include <unordered_map>

#include "core/nginx_version.h"
#include "core/var_syntax.h"
#include "event/local_address.h"
#include "event/proxy_protocol.h"
#include "event/tls/tls.h"
#include "stream/session.h"
#include "stream/stream_conf.h"
#include "vigil/core/clock.h"

namespace vigil::stream {
namespace {

std::uint16_t port_of(const sockaddr* sa) {
  if (sa == nullptr) return 0;
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

// ---- the connection --------------------------------------------------------

bool var_remote_addr(const Session& s, VarSink& out) {
  out.put(s.client->addr_text);
  return true;
}

bool var_remote_port(const Session& s, VarSink& out) {
  // No port (a unix-domain client): empty, as nginx's.
  if (const std::uint16_t port = port_of(s.client->peer_addr); port != 0) out.put_uint(port);
  return true;
}

bool var_binary_remote_addr(const Session& s, VarSink& out) {
  const sockaddr* sa = s.client->peer_addr;
  if (sa != nullptr && sa->sa_family == AF_INET) {
    out.put(
        {reinterpret_cast<const char*>(&reinterpret_cast<const sockaddr_in*>(sa)->sin_addr), 4});
  } else if (sa != nullptr && sa->sa_family == AF_INET6) {
    out.put(
        {reinterpret_cast<const char*>(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr), 16});
  }
  return true;
}

bool var_realip_remote_addr(const Session& s, VarSink& out) {
  out.put(s.realip_addr.empty() ? s.client->addr_text : s.realip_addr);
  return true;
}

bool var_realip_remote_port(const Session& s, VarSink& out) {
  if (!s.realip_addr.empty()) {
    out.put(s.realip_port);
    return true;
  }
  return var_remote_port(s, out);
}

bool var_server_addr(const Session& s, VarSink& out) {
  char text[128];  // an IPv6 address, or "unix:" and a socket path
  std::size_t len = 0;
  if (!connection_local_text(*s.client, text, sizeof text, len)) return false;
  out.put({text, len});
  return true;
}

bool var_server_port(const Session& s, VarSink& out) {
  if (const std::uint16_t port = port_of(s.client->local_addr); port != 0) out.put_uint(port);
  return true;
}

// Empty for a connection that came without a PROXY protocol header, as nginx's.
template <std::string_view ProxyProtocolInfo::*Field>
bool var_proxy_protocol(const Session& s, VarSink& out) {
  if (s.client->proxy_protocol != nullptr) out.put(s.client->proxy_protocol->*Field);
  return true;
}

bool var_protocol(const Session& s, VarSink& out) {
  out.put(s.udp ? "UDP" : "TCP");
  return true;
}

bool var_connection(const Session& s, VarSink& out) {
  out.put_uint(s.client->number);
  return true;
}

bool var_bytes_sent(const Session& s, VarSink& out) {
  out.put_uint(s.client->sent);
  return true;
}

bool var_bytes_received(const Session& s, VarSink& out) {
  out.put_uint(s.from_client);
  return true;
}

bool var_session_time(const Session& s, VarSink& out) {
  const MsecDiff d = msec_diff(clock::current_msec(), s.accepted);
  out.put_msec(d > 0 ? static_cast<Msec>(d) : 0);
  return true;
}

bool var_status(const Session& s, VarSink& out) {
  out.put_uint(static_cast<std::uint64_t>(s.status));
  return true;
}

// limit_conn's verdict (nginx's names); not found when no limit counted.
bool var_limit_conn_status(const Session& s, VarSink& out) {
  switch (s.limit_conn_status) {
    case LimitConnStatus::kNone:
      return false;
    case LimitConnStatus::kPassed:
      out.put("PASSED");
      return true;
    case LimitConnStatus::kRejected:
      out.put("REJECTED");
      return true;
    case LimitConnStatus::kRejectedDryRun:
      out.put("REJECTED_DRY_RUN");
      return true;
  }
  return false;
}

// ---- the process and the clock -----------------------------------------------

bool var_nginx_version(const Session&, VarSink& out) {
  out.put(kNginxCompatibleVersion);
  return true;
}

bool var_hostname(const Session&, VarSink& out) {
  static const std::string name = [] {
    char buf[256] = {};
    return ::gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string("localhost");
  }();
  out.put(name);
  return true;
}

bool var_pid(const Session&, VarSink& out) {
  out.put_uint(static_cast<std::uint64_t>(::getpid()));
  return true;
}

bool var_msec(const Session&, VarSink& out) {
  out.put_msec(static_cast<std::uint64_t>(clock::now_sec()) * 1000 + clock::now_msec_part());
  return true;
}

bool var_time_local(const Session&, VarSink& out) {
  out.put(clock::common_log_time());
  return true;
}

bool var_time_iso8601(const Session&, VarSink& out) {
  out.put(clock::iso8601());
  return true;
}

// ---- the upstream attempts (nginx's ngx_stream_upstream variables) ---------

enum class TryField : std::uint8_t {
  kAddr,
  kBytesSent,
  kBytesReceived,
  kConnectTime,
  kFirstByteTime,
  kSessionTime,
};

void put_time(VarSink& out, Msec t) {
  if (t == kNoTime) {
    out.put_char('-');
  } else {
    out.put_msec(t);
  }
}

// Every attempt, ", "-separated; not found before the first.
template <TryField F>
bool var_upstream(const Session& s, VarSink& out) {
  if (s.ntries == 0) return false;
  for (std::uint32_t i = 0; i < s.ntries; ++i) {
    const UpstreamTry& t = s.tries[i];
    if (i > 0) out.put(", ");
    switch (F) {
      case TryField::kAddr:
        out.put(t.addr);
        break;
      case TryField::kBytesSent:
        out.put_uint(t.bytes_sent);
        break;
      case TryField::kBytesReceived:
        out.put_uint(t.bytes_received);
        break;
      case TryField::kConnectTime:
        put_time(out, t.connect_time);
        break;
      case TryField::kFirstByteTime:
        put_time(out, t.first_byte_time);
        break;
      case TryField::kSessionTime:
        put_time(out, t.session_time);
        break;
    }
  }
  return true;
}

// ---- TLS (event/tls/tls.h does the work, for http's variables too) --------

bool tls_text(const Session& s, std::string_view (*fact)(const Connection&), VarSink& out) {
  if (s.client->ssl == nullptr) return false;
  out.put(fact(*s.client));
  return true;
}

bool var_ssl_protocol(const Session& s, VarSink& out) {
  return tls_text(s, tls_protocol, out);
}

bool var_ssl_cipher(const Session& s, VarSink& out) {
  return tls_text(s, tls_cipher, out);
}

bool var_ssl_server_name(const Session& s, VarSink& out) {
  return tls_text(s, tls_server_name, out);
}

bool var_ssl_alpn_protocol(const Session& s, VarSink& out) {
  return tls_text(s, tls_alpn_protocol, out);
}

bool var_ssl_session_reused(const Session& s, VarSink& out) {
  if (s.client->ssl == nullptr) return false;
  out.put(tls_session_reused(*s.client) ? "r" : ".");
  return true;
}

// ---- ssl_preread (ssl_preread.h): the ClientHello read before proxying ---

// None unless a ClientHello was parsed (not TLS, or malformed: none).
const ClientHelloParser* preread_hello(const Session& s) {
  return s.hello != nullptr && s.hello->result() == ClientHelloParser::Result::kDone ? s.hello
                                                                                   : nullptr;
}

bool var_ssl_preread_protocol(const Session& s, VarSink& out) {
  const ClientHelloParser* h = preread_hello(s);
  if (h == nullptr) return false;
  out.put(ClientHelloParser::version_name(h->version()));
  return true;
}

bool var_ssl_preread_server_name(const Session& s, VarSink& out) {
  const ClientHelloParser* h = preread_hello(s);
  if (h == nullptr) return false;
  out.put(h->server_name());
  return true;
}

bool var_ssl_preread_alpn_protocols(const Session& s, VarSink& out) {
  const ClientHelloParser* h = preread_hello(s);
  if (h == nullptr) return false;
  out.put(h->alpn_protocols());
  return true;
}

template <TlsFact F>
bool var_tls_fact(const Session& s, VarSink& out) {
  if (s.client->ssl == nullptr) return false;
  bool found = false;
  out.advance(tls_fact(*s.client, F, out.at(), found));
  return found;
}

struct VarSpec {
  std::string_view name;
  VarGetter get;
};

constexpr VarSpec kVariables[] = {
    {"remote_addr", var_remote_addr},
    {"remote_port", var_remote_port},
    {"binary_remote_addr", var_binary_remote_addr},
    {"realip_remote_addr", var_realip_remote_addr},
    {"realip_remote_port", var_realip_remote_port},
    {"server_addr", var_server_addr},
    {"server_port", var_server_port},
    {"proxy_protocol_addr", var_proxy_protocol<&ProxyProtocolInfo::src_addr>},
    {"proxy_protocol_port", var_proxy_protocol<&ProxyProtocolInfo::src_port_text>},
    {"proxy_protocol_server_addr", var_proxy_protocol<&ProxyProtocolInfo::dst_addr>},
    {"proxy_protocol_server_port", var_proxy_protocol<&ProxyProtocolInfo::dst_port_text>},
    {"protocol", var_protocol},
    {"connection", var_connection},
    {"bytes_sent", var_bytes_sent},
    {"bytes_received", var_bytes_received},
    {"session_time", var_session_time},
    {"status", var_status},
    {"limit_conn_status", var_limit_conn_status},
    {"nginx_version", var_nginx_version},
    {"hostname", var_hostname},
    {"pid", var_pid},
    {"msec", var_msec},
    {"time_local", var_time_local},
    {"time_iso8601", var_time_iso8601},
    {"upstream_addr", var_upstream<TryField::kAddr>},
    {"upstream_bytes_sent", var_upstream<TryField::kBytesSent>},
    {"upstream_bytes_received", var_upstream<TryField::kBytesReceived>},
    {"upstream_connect_time", var_upstream<TryField::kConnectTime>},
    {"upstream_first_byte_time", var_upstream<TryField::kFirstByteTime>},
    {"upstream_session_time", var_upstream<TryField::kSessionTime>},
    {"ssl_preread_protocol", var_ssl_preread_protocol},
    {"ssl_preread_server_name", var_ssl_preread_server_name},
    {"ssl_preread_alpn_protocols", var_ssl_preread_alpn_protocols},
    {"ssl_protocol", var_ssl_protocol},
    {"ssl_cipher", var_ssl_cipher},
    {"ssl_server_name", var_ssl_server_name},
    {"ssl_alpn_protocol", var_ssl_alpn_protocol},
    {"ssl_session_reused", var_ssl_session_reused},
    {"ssl_session_id", var_tls_fact<TlsFact::kSessionId>},
    {"ssl_curve", var_tls_fact<TlsFact::kCurve>},
    {"ssl_curves", var_tls_fact<TlsFact::kCurves>},
    {"ssl_ciphers", var_tls_fact<TlsFact::kCiphers>},
    {"ssl_client_verify", var_tls_fact<TlsFact::kClientVerify>},
    {"ssl_client_s_dn", var_tls_fact<TlsFact::kClientSubject>},
    {"ssl_client_i_dn", var_tls_fact<TlsFact::kClientIssuer>},
    {"ssl_client_s_dn_legacy", var_tls_fact<TlsFact::kClientSubjectLegacy>},
    {"ssl_client_i_dn_legacy", var_tls_fact<TlsFact::kClientIssuerLegacy>},
    {"ssl_client_serial", var_tls_fact<TlsFact::kClientSerial>},
    {"ssl_client_fingerprint", var_tls_fact<TlsFact::kClientFingerprint>},
    {"ssl_client_raw_cert", var_tls_fact<TlsFact::kClientRawCert>},
    {"ssl_client_cert", var_tls_fact<TlsFact::kClientCert>},
    {"ssl_client_escaped_cert", var_tls_fact<TlsFact::kClientEscapedCert>},
    {"ssl_client_v_start", var_tls_fact<TlsFact::kClientNotBefore>},
    {"ssl_client_v_end", var_tls_fact<TlsFact::kClientNotAfter>},
    {"ssl_client_v_remain", var_tls_fact<TlsFact::kClientDaysLeft>},
};

const VarSpec* find_builtin(std::string_view name) {
  for (const VarSpec& v : kVariables) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

// The names the stream block being read declares (or uses before declaring).
struct Declarations {
  std::unordered_map<std::string, std::shared_ptr<DeclaredVariable>> names;
  bool open = false;
  std::string where;  // of the directive being read
};

Declarations& declarations() {
  static auto* d = new Declarations();  // never destroyed: configurations load until exit
  return *d;
}

DeclaredVariable& declared_entry(const std::string& name) {
  auto& slot = declarations().names[name];
  if (slot == nullptr) {
    slot = std::make_shared<DeclaredVariable>();
    slot->name = name;
    slot->index = static_cast<std::uint32_t>(declarations().names.size() - 1);
  }
  return *slot;
}

}  // namespace

std::uint32_t declare_variable(const std::string& name,
                               std::shared_ptr<const ComputedVariable> computed) {
  DeclaredVariable& v = declared_entry(name);
  v.declared = true;
  if (computed != nullptr) v.computed = std::move(computed);
  return v.index;
}

void open_declarations() {
  Declarations& d = declarations();
  d.names.clear();
  d.open = true;
  d.where.clear();
}

Result<std::uint32_t> close_declarations() {
  Declarations& d = declarations();
  d.open = false;
  const DeclaredVariable* first = nullptr;
  for (const auto& [name, v] : d.names) {
    // The first used (slots are numbered in the order names were met).
    if (!v->declared && (first == nullptr || v->index < first->index)) first = v.get();
  }
  if (first != nullptr) {
    return Status::error("unknown \"" + first->name + "\" variable" + first->first_use);
  }
  return static_cast<std::uint32_t>(d.names.size());
}

void set_directive_where(std::string where) {
  declarations().where = std::move(where);
}

bool session_value(const Session& s, std::uint32_t index, std::string_view& out) {
  if (index >= s.nvalues || s.values[index].data() == nullptr) return false;
  out = s.values[index];
  return true;
}

bool set_session_value(Session& s, std::uint32_t index, std::string_view value) {
  if (s.values == nullptr) {
    const std::uint32_t n = s.conf->fin->nvariables;
    auto* v = static_cast<std::string_view*>(
        s.client->arena->alloc(n * sizeof(std::string_view), alignof(std::string_view)));
    if (v == nullptr) return false;
    for (std::uint32_t i = 0; i < n; ++i) new (&v[i]) std::string_view();
    s.values = v;
    s.nvalues = n;
  }
  if (index >= s.nvalues) return false;
  // An empty value is set too: its data is never null.
  s.values[index] = value.data() != nullptr ? value : std::string_view("", 0);
  return true;
}

Result<std::string> declared_variable_word(std::string_view word) {
  auto name = var_word_name(word);
  if (!name) return name;
  if (find_builtin(*name) != nullptr) {
    return Status::error("the duplicate \"" + *name + "\" variable");
  }
  return name;
}

Result<VarTemplate> VarTemplate::compile(std::string_view text,
                                         const std::vector<Regex::Name>* groups) {
  VarTemplate t;
  t.source_ = std::string(text);
  Status st = scan_var_template(
      text,
      [&t](std::string_view literal) {
        Part p;
        p.text = std::string(literal);
        t.literal_ += p.text;
        t.parts_.push_back(std::move(p));
      },
      [&t](int n) {
        Part p;
        p.capture = n;
        ++t.variables_;
        t.parts_.push_back(std::move(p));
      },
      [&t, groups](std::string_view name, const std::string& lname) {
        Part p;
        const Regex::Name* group = nullptr;
        for (std::size_t g = 0; groups != nullptr && g < groups->size() && group == nullptr; ++g) {
          if ((*groups)[g].name == name) group = &(*groups)[g];
        }
        if (group != nullptr) {
          p.capture = group->group;
        } else if (const VarSpec* spec = find_builtin(lname)) {
          p.get = spec->get;
        } else if (auto it = declarations().names.find(lname);
                   it != declarations().names.end() &&
                   (it->second->declared || declarations().open)) {
          p.declared = it->second;
        } else if (declarations().open) {
          // Declared later in the block, or an error when it is closed.
          DeclaredVariable& v = declared_entry(lname);
          v.first_use = declarations().where;
          p.declared = declarations().names[lname];
        } else {
          return Status::error("unknown \"" + std::string(name) + "\" variable");
        }
        ++t.variables_;
        t.parts_.push_back(std::move(p));
        return Status::ok();
      });
  if (!st) return st;
  if (t.variables_ > 0) t.literal_.clear();
  return t;
}

bool VarTemplate::value_of(const Part& p, const Session& s, VarSink& out) {
  if (p.get != nullptr) return p.get(s, out);
  if (p.capture >= 0) {
    // No such group (or no expression matched): empty, as nginx's.
    const Captures* c = s.captures;
    if (c != nullptr && p.capture < c->pairs && c->offsets[2 * p.capture] >= 0) {
      const int from = c->offsets[2 * p.capture];
      const int to = c->offsets[2 * p.capture + 1];
      out.put(
          c->subject.substr(static_cast<std::size_t>(from), static_cast<std::size_t>(to - from)));
    }
    return true;
  }
  std::string_view v;
  if (session_value(s, p.declared->index, v)) {
    out.put(v);
    return true;
  }
  if (p.declared->computed != nullptr) return p.declared->computed->value(s, out);
  return true;  // never set: empty, as nginx's uninitialized variable
}

std::size_t VarTemplate::length(const Session& s, LogEscape esc, bool missing_dash) const {
  std::size_t n = 0;
  for (const Part& p : parts_) {
    if (is_text(p)) {
      n += p.text.size();
      continue;
    }
    VarSink sink(nullptr);
    if (!value_of(p, s, sink)) {
      n += missing_dash ? 1 : 0;
      continue;
    }
    n += log_escape_bound(sink.size(), esc);
  }
  return n;
}

char* VarTemplate::write(const Session& s, char* out, LogEscape esc, bool missing_dash) const {
  for (const Part& p : parts_) {
    if (is_text(p)) {
      std::memcpy(out, p.text.data(), p.text.size());
      out += p.text.size();
      continue;
    }
    VarSink sink(out);
    if (!value_of(p, s, sink)) {
      if (missing_dash) *out++ = '-';
      continue;
    }
    out += escape_log_in_place(out, sink.size(), esc);
  }
  return out;
}

bool VarTemplate::evaluate(const Session& s, std::string_view& out) const {
  if (is_literal()) {
    out = literal_;
    return true;
  }
  const std::size_t n = length(s);
  char* mem = static_cast<char*>(s.client->arena->alloc(n + 1, 1));
  if (mem == nullptr) return false;
  out = std::string_view(mem, static_cast<std::size_t>(write(s, mem) - mem));
  return true;
}

}  // namespace vigil::stream
