#include "stream/stream_conf.h"

#include <utility>

#include "core/conf/values.h"
#include "core/error_logs.h"
#include "stream/access.h"
#include "stream/geo.h"
#include "stream/limit_conn.h"
#include "stream/map.h"
#include "stream/split_clients.h"
#include "stream/ssl_certificate.h"
#include "vigil/event/listening.h"
#include "vigil/event/peer.h"

namespace vigil::stream {

namespace {

constexpr int kSrvSpec = 0;
// add_directives' specs come next (the upstream blocks and their GroupSet),
// then the final conf, so the groups are built before proxy_pass is resolved.
upstream::UpstreamSpecs g_ups;
int g_final_spec = -1;

Status set_listen(const DirectiveCall& call, StreamSrvConf& srv) {
  if (srv.where.empty()) srv.where = call.where();
  const std::size_t first = srv.listens.size();
  if (Status s = parse_listen(call, srv.listens, /*allow_default_server=*/false,
                              /*allow_udp=*/true);
      !s) {
    return s;
  }
  // What a datagram socket cannot do (nginx's words).
  for (std::size_t i = first; i < srv.listens.size(); ++i) {
    const StreamListen& l = srv.listens[i];
    if (!l.udp) continue;
    const char* bad = l.backlog_set      ? "backlog"
                      : l.ssl            ? "ssl"
                      : l.so_keepalive   ? "so_keepalive"
                      : l.proxy_protocol ? "proxy_protocol"
                                         : nullptr;
    if (bad != nullptr) {
      return call.error(std::string("\"") + bad + "\" parameter is incompatible with \"udp\"");
    }
    if (l.text.starts_with("unix:")) {
      return call.error("\"udp\" is not supported for the unix domain socket \"" + l.text + "\"");
    }
  }
  return Status::ok();
}

// TLS contexts at load time, so -t and a reload check certificates.
Status build_tls(StreamSrvConf& srv) {
  for (const StreamListen& l : srv.listens) srv.ssl_listen = srv.ssl_listen || l.ssl;
  if (srv.ssl_listen) {
    if (srv.ssl.where.empty()) srv.ssl.where = srv.where;
    auto ctx = TlsContext::server(srv.ssl, srv.ssl_alpn);
    if (!ctx) return ctx.status();
    if (srv.ssl.certificate_variables()) {
      auto names = certificate_names(srv.ssl.certificates, srv.ssl.keys, srv.ssl.where);
      if (!names) return names.status();
      ctx.value()->set_certificate_names(std::move(names.value()));
    }
    srv.tls = std::move(ctx.value());
  }
  if (srv.proxy_ssl.enable) {
    if (srv.proxy_ssl.where.empty()) srv.proxy_ssl.where = srv.where;
    auto ctx = TlsContext::client(srv.proxy_ssl);
    if (!ctx) return ctx.status();
    if (srv.proxy_ssl.certificate_variables()) {
      auto names = certificate_names({srv.proxy_ssl.certificate}, {srv.proxy_ssl.certificate_key},
                                     srv.proxy_ssl.where);
      if (!names) return names.status();
      ctx.value()->set_certificate_names(std::move(names.value()));
    }
    srv.upstream_tls = std::move(ctx.value());
  }
  return Status::ok();
}

// Once the whole stream block is read: collect the servers, build the named
// groups, and resolve each proxy_pass to a group (a bare address becomes a
// group of one).
Status init_final(const ConfInit& ctx, StreamFinalConf& fin) {
  const std::size_t module = ctx.module();
  auto nvariables = close_declarations();
  if (!nvariables) return nvariables.status();
  fin.nvariables = nvariables.value();
  fin.upstreams = &upstream::group_set(ctx, g_ups);
  // The `hash` keys, with the stream variables.
  for (const auto& g : fin.upstreams->groups) {
    if (g->method != upstream::Method::kHash && g->method != upstream::Method::kConsistentHash) {
      continue;
    }
    auto key = VarTemplate::compile(g->hash_key);
    if (!key) return Status::error(key.status().message() + g->where);
    fin.hash_keys.emplace_back(g.get(), std::move(key.value()));
  }
  // The stream block's own access_log files are opened (created) even when
  // every server has its own, as nginx opens every file it is given.
  if (auto* main = static_cast<StreamSrvConf*>(ctx.scope().conf(module, kSrvSpec))) {
    if (Status s = resolve_access_logs(main->access_logs, fin.log_formats, fin.access_logs); !s) {
      return s;
    }
  }
  for (const auto& child : ctx.scope().children()) {
    if (child->context() != kStreamSrvConf) continue;
    auto* srv = static_cast<StreamSrvConf*>(child->conf(module, kSrvSpec));
    if (srv == nullptr) return Status::error("internal error: stream server without conf");
    if (srv->where.empty()) srv->where = child->where();
    if (srv->listens.empty()) return Status::error("no \"listen\" is defined for server" + child->where());
    if (srv->has_return && !srv->proxy_pass.empty()) {
      return Status::error("\"return\" and \"proxy_pass\" in one server" + child->where());
    }
    srv->fin = &fin;
    if (Status s = resolve_access_logs(srv->access_logs, fin.log_formats, fin.access_logs); !s) {
      return s;
    }
    if (srv->proxy_ssl.name.find('$') != std::string::npos) {
      auto name = VarTemplate::compile(srv->proxy_ssl.name);
      if (!name) return Status::error(name.status().message() + srv->where);
      srv->proxy_ssl_name_var = std::make_shared<const VarTemplate>(std::move(name.value()));
    }
    if (!srv->has_return) {
      if (srv->proxy_pass.empty()) {
        return Status::error("no handler for server: \"proxy_pass\" is missing" + child->where());
      }
      const auto* set = child->find_set("proxy_pass");
      if (srv->proxy_pass.find('$') != std::string::npos) {
        // Which group is known per session (proxy.cc).
        auto t = VarTemplate::compile(srv->proxy_pass);
        if (!t) return Status::error(t.status().message() + (set ? set->where : srv->where));
        srv->proxy_pass_var = std::make_shared<const VarTemplate>(std::move(t.value()));
      }
    }
    if (!srv->has_return && srv->proxy_pass_var == nullptr) {
      const auto* set = child->find_set("proxy_pass");
      auto group = fin.upstreams->find_or_add(srv->proxy_pass, 0, set ? set->where : srv->where);
      if (!group) return group.status();
      srv->upstream = group.value();
    }
    for (const StreamListen& l : srv->listens) {
      for (const StreamSrvConf* other : fin.servers) {
        for (const StreamListen& o : other->listens) {
          // Port 0 (the kernel picks one per socket) never collides.
          if (o.addr_text == l.addr_text && o.udp == l.udp && !l.addr_text.ends_with(":0")) {
            return Status::error("duplicate \"" + l.addr_text + "\" address and port pair" +
                                 srv->where);
          }
        }
      }
    }
    if (Status s = build_tls(*srv); !s) return s;
    fin.servers.push_back(srv);
  }
  return Status::ok();
}

// proxy_bind address [transparent] | off
Status set_proxy_bind(const DirectiveCall& call, StreamSrvConf& srv) {
  srv.bind_len = 0;
  srv.bind_transparent = false;
  if (call.arg(0) == "off") {
    if (call.arg_count() != 1) return call.invalid_value(1);
    return Status::ok();
  }
  if (call.arg(0).find('$') != std::string::npos) {
    return call.error("variables in the stream \"proxy_bind\" are not supported");
  }
  if (!parse_local_address(call.arg(0), srv.bind_addr, srv.bind_len)) {
    return call.error("invalid address \"" + call.arg(0) + "\"");
  }
  if (call.arg_count() == 2) {
    if (call.arg(1) != "transparent") return call.invalid_value(1);
    srv.bind_transparent = true;
  }
  return Status::ok();
}

// proxy_upload_rate / proxy_download_rate: a size, or variables whose value
// is one.
Status set_rate(const DirectiveCall& call, std::size_t& rate,
                std::shared_ptr<const VarTemplate>& var) {
  rate = 0;
  var.reset();
  if (call.arg(0).find('$') != std::string::npos) {
    auto t = VarTemplate::compile(call.arg(0));
    if (!t) return call.error(t.status().message());
    var = std::make_shared<const VarTemplate>(std::move(t.value()));
    return Status::ok();
  }
  const auto v = parse_size(call.arg(0));
  if (!v) return call.invalid_value(0);
  rate = static_cast<std::size_t>(*v);
  return Status::ok();
}

Status merge_srv(const ConfInit& ctx, const StreamSrvConf& parent, StreamSrvConf& child) {
  if (!ctx.is_set("proxy_upload_rate")) {
    child.proxy_upload_rate = parent.proxy_upload_rate;
    child.proxy_upload_rate_var = parent.proxy_upload_rate_var;
  }
  if (!ctx.is_set("proxy_download_rate")) {
    child.proxy_download_rate = parent.proxy_download_rate;
    child.proxy_download_rate_var = parent.proxy_download_rate_var;
  }
  if (!ctx.is_set("proxy_bind")) {
    child.bind_addr = parent.bind_addr;
    child.bind_len = parent.bind_len;
    child.bind_transparent = parent.bind_transparent;
  }
  merge_tls_server_conf(ctx, parent.ssl, child.ssl);
  merge_tls_client_conf(ctx, parent.proxy_ssl, child.proxy_ssl, "proxy");
  if (!ctx.is_set("error_log")) child.error_log = parent.error_log;
  if (!ctx.is_set("resolver")) child.resolver = parent.resolver;
  if (!ctx.is_set("set_real_ip_from")) child.realip_from = parent.realip_from;
  if (!ctx.is_set("access_log")) child.access_logs = parent.access_logs;
  if (!ctx.is_set("ssl_alpn")) child.ssl_alpn = parent.ssl_alpn;
  if (!ctx.is_set("allow") && !ctx.is_set("deny")) child.access_rules = parent.access_rules;
  if (!ctx.is_set("limit_conn")) child.limit_conns = parent.limit_conns;
  return Status::ok();
}

Module* make_stream_module() {
  auto* m = new Module("stream");
  // Slot directives set in "stream" are inherited by its servers by the loader.
  auto srv = m->add_conf<StreamSrvConf>(kStreamMainConf | kStreamSrvConf, {}, merge_srv);
  g_ups = upstream::add_directives(*m, kStreamMainConf, kStreamUpsConf, upstream::Protocol::kStream);
  auto fin = m->add_conf<StreamFinalConf>(kStreamMainConf, init_final);
  g_final_spec = fin.index();

  m->add_block("stream", kMainConf, Arity::none(), kStreamMainConf);
  m->add_block("server", kStreamMainConf, Arity::none(), kStreamSrvConf).multiple = true;

  m->add("listen", kStreamSrvConf, Arity::one_or_more(), srv.custom(set_listen)).multiple = true;
  m->add("proxy_pass", kStreamSrvConf, Arity::exactly(1),
         srv.string(&StreamSrvConf::proxy_pass, "", false));
  constexpr ConfContextMask kAny = kStreamMainConf | kStreamSrvConf;
  m->add("proxy_connect_timeout", kAny, Arity::exactly(1),
         srv.msec(&StreamSrvConf::proxy_connect_timeout, 60000));
  m->add("proxy_timeout", kAny, Arity::exactly(1), srv.msec(&StreamSrvConf::proxy_timeout, 600000));
  m->add("proxy_buffer_size", kAny, Arity::exactly(1),
         srv.size(&StreamSrvConf::proxy_buffer_size, 16384, 1));
  m->add("proxy_bind", kAny, Arity::between(1, 2), srv.custom(set_proxy_bind));
  m->add("tcp_nodelay", kAny, Arity::on_off(), srv.flag(&StreamSrvConf::tcp_nodelay, true));
  m->add("proxy_upload_rate", kAny, Arity::exactly(1),
         srv.custom([](const DirectiveCall& call, StreamSrvConf& conf) {
           return set_rate(call, conf.proxy_upload_rate, conf.proxy_upload_rate_var);
         }));
  m->add("proxy_download_rate", kAny, Arity::exactly(1),
         srv.custom([](const DirectiveCall& call, StreamSrvConf& conf) {
           return set_rate(call, conf.proxy_download_rate, conf.proxy_download_rate_var);
         }));
  m->add("proxy_half_close", kAny, Arity::on_off(),
         srv.flag(&StreamSrvConf::proxy_half_close, false));
  m->add("return", kStreamSrvConf, Arity::exactly(1),
         srv.custom([](const DirectiveCall& call, StreamSrvConf& conf) {
           auto t = VarTemplate::compile(call.arg(0));
           if (!t) return call.error(t.status().message());
           conf.return_value = std::move(t.value());
           conf.has_return = true;
           return Status::ok();
         }));
  m->add("resolver", kAny, Arity::one_or_more(),
         srv.custom([](const DirectiveCall& call, StreamSrvConf& conf) {
           auto r = std::make_shared<ResolverConf>();
           if (Status st = parse_resolver(call.args(), *r); !st) return call.error(st.message());
           conf.resolver = std::move(r);
           return Status::ok();
         }));
  m->add("resolver_timeout", kAny, Arity::exactly(1),
         srv.msec(&StreamSrvConf::resolver_timeout, 30000));
  m->add("set", kStreamSrvConf, Arity::exactly(2),
         srv.custom([](const DirectiveCall& call, StreamSrvConf& conf) {
           return set_set(call, conf.sets);
         }))
      .multiple = true;
  m->add("log_format", kStreamMainConf, Arity::at_least(2),
         fin.custom([](const DirectiveCall& call, StreamFinalConf& conf) {
           return set_log_format(call, conf.log_formats);
         }))
      .multiple = true;
  m->add("access_log", kAny, Arity::between(1, 6),
         srv.custom([](const DirectiveCall& call, StreamSrvConf& conf) {
           return set_access_log(call, conf.access_logs);
         }))
      .multiple = true;
  m->add_block("map", kStreamMainConf, Arity::exactly(2), 0,
               fin.custom([](const DirectiveCall& call, StreamFinalConf&) { return set_map(call); }))
      .multiple = true;
  m->add_block(
       "geo", kStreamMainConf, Arity::between(1, 2), 0,
       fin.custom([](const DirectiveCall& call, StreamFinalConf&) { return set_geo(call); }))
      .multiple = true;
  m->add_block("split_clients", kStreamMainConf, Arity::exactly(2), 0,
               fin.custom([](const DirectiveCall& call, StreamFinalConf&) {
                 return set_split_clients(call);
               }))
      .multiple = true;
  m->add("ssl_alpn", kAny, Arity::one_or_more(),
         srv.custom([](const DirectiveCall& call, StreamSrvConf& conf) {
           conf.ssl_alpn.clear();
           for (std::size_t i = 0; i < call.arg_count(); ++i) {
             if (call.arg(i).empty() || call.arg(i).size() > 255) return call.invalid_value(i);
             conf.ssl_alpn.push_back(call.arg(i));
           }
           return Status::ok();
         }));
  m->add("set_real_ip_from", kAny, Arity::exactly(1),
         srv.custom([](const DirectiveCall& call, StreamSrvConf& conf) {
           std::string error;
           if (!parse_cidr_or_host(call.arg(0), conf.realip_from, error)) return call.error(error);
           return Status::ok();
         }))
      .multiple = true;
  m->add("proxy_protocol", kAny, Arity::on_off(),
         srv.flag(&StreamSrvConf::proxy_protocol, false));
  m->add("proxy_protocol_timeout", kAny, Arity::exactly(1),
         srv.msec(&StreamSrvConf::proxy_protocol_timeout, 30000));
  m->add("ssl_preread", kAny, Arity::on_off(), srv.flag(&StreamSrvConf::ssl_preread, false));
  m->add("preread_buffer_size", kAny, Arity::exactly(1),
         srv.size(&StreamSrvConf::preread_buffer_size, 16384, 1));
  m->add("preread_timeout", kAny, Arity::exactly(1),
         srv.msec(&StreamSrvConf::preread_timeout, 30000));
  m->add("proxy_requests", kAny, Arity::exactly(1),
         srv.number<unsigned>(&StreamSrvConf::proxy_requests, 0));
  m->add("proxy_responses", kAny, Arity::exactly(1),
         srv.number<unsigned>(&StreamSrvConf::proxy_responses, kNoResponseLimit, 0,
                                  kNoResponseLimit - 1));
  m->add("proxy_next_upstream", kAny, Arity::on_off(),
         srv.flag(&StreamSrvConf::proxy_next_upstream, true));
  m->add("proxy_next_upstream_tries", kAny, Arity::exactly(1),
         srv.number<unsigned>(&StreamSrvConf::proxy_next_upstream_tries, 0));
  m->add("error_log", kAny, Arity::between(1, 2),
         srv.custom([](const DirectiveCall& call, StreamSrvConf& conf) {
           return set_error_log(call, conf.error_log);
         }))
      .multiple = true;
  // allow / deny (access.h).
  for (const char* name : {"allow", "deny"}) {
    m->add(name, kAny, Arity::exactly(1),
           srv.custom([](const DirectiveCall& call, StreamSrvConf& conf) {
             return set_access_rule(call, conf.access_rules);
           }))
        .multiple = true;
  }
  // limit_conn (limit_conn.h).
  m->add("limit_conn_zone", kStreamMainConf, Arity::exactly(2),
         fin.custom([](const DirectiveCall& call, StreamFinalConf& conf) {
           return set_limit_conn_zone(call, conf.limit_conn_zones);
         }))
      .multiple = true;
  m->add("limit_conn", kAny, Arity::exactly(2),
         srv.custom([](const DirectiveCall& call, StreamSrvConf& conf) {
           return set_limit_conn(call, conf.limit_conns);
         }))
      .multiple = true;
  m->add("limit_conn_log_level", kAny, Arity::exactly(1),
         srv.one_of(&StreamSrvConf::limit_conn_log_level, LogLevel::kError,
                    {{"info", LogLevel::kInfo},
                     {"notice", LogLevel::kNotice},
                     {"warn", LogLevel::kWarn},
                     {"error", LogLevel::kError}}));
  m->add("limit_conn_dry_run", kAny, Arity::on_off(),
         srv.flag(&StreamSrvConf::limit_conn_dry_run, false));
  add_tls_server_directives(*m, kAny, srv.index(), typeid(StreamSrvConf),
                            tls_server_member<StreamSrvConf, &StreamSrvConf::ssl>);
  add_tls_client_directives(*m, kAny, srv.index(), typeid(StreamSrvConf),
                            tls_client_member<StreamSrvConf, &StreamSrvConf::proxy_ssl>,
                            /*with_enable_flag=*/true, "proxy");
  // A variable may be used before the directive declaring it; where it was
  // first used is named if nothing does (variables.h).
  auto& directives = const_cast<std::vector<Directive>&>(m->directives());  // m is ours
  for (Directive& d : directives) {
    if (!d.body.set) continue;
    d.body.set = [inner = std::move(d.body.set)](const DirectiveCall& call, void* conf) {
      set_directive_where(call.where());
      return inner(call, conf);
    };
  }
  return m;
}

}  // namespace

const Module& stream_module() {
  static const Module* module = make_stream_module();  // never destroyed: used until exit
  return *module;
}

const StreamFinalConf* stream_final(const Configuration& conf) {
  const Module& m = stream_module();  // sets g_final_spec
  return conf.find<StreamFinalConf>(m, g_final_spec);
}

}  // namespace vigil::stream
