#include "stream/stream_conf.h"

#include <utility>

#include "vigil/event/listening.h"

namespace vigil::stream {

namespace {

constexpr int kSrvSpec = 0;
constexpr int kUpsSpec = 1;
constexpr int kFinalSpec = 2;

Status parse_address(const DirectiveCall& call, std::size_t arg, PeerAddress& out) {
  Listening probe;  // the same address syntax as listen, without wildcards
  if (Status s = probe.set_address(call.arg(arg)); !s) {
    return call.error(s.message() + " in \"" + call.name() + "\" directive");
  }
  if (probe.port() == 0) return call.invalid_value(arg, ", a port is required");
  out.addr = probe.addr;
  out.addrlen = probe.addrlen;
  out.name = probe.addr_text;
  return Status::ok();
}

Status set_listen(const DirectiveCall& call, StreamSrvConf& srv) {
  StreamListen l;
  if (Status st = parse_listen(call, l, /*allow_default_server=*/false); !st) return st;
  if (srv.where.empty()) srv.where = call.where();
  srv.listens.push_back(std::move(l));
  return Status::ok();
}

Status set_upstream_server(const DirectiveCall& call, StreamUpsConf& ups) {
  if (call.arg_count() > 1) return call.error("invalid parameter \"" + call.arg(1) + "\"");
  PeerAddress p;
  if (Status s = parse_address(call, 0, p); !s) return s;
  ups.servers.push_back(std::move(p));
  return Status::ok();
}

// TLS contexts at load time, so -t and a reload check certificates.
Status build_tls(StreamSrvConf& srv) {
  for (const StreamListen& l : srv.listens) srv.ssl_listen = srv.ssl_listen || l.ssl;
  if (srv.ssl_listen) {
    if (srv.ssl.where.empty()) srv.ssl.where = srv.where;
    auto ctx = TlsContext::server(srv.ssl, {});
    if (!ctx) return ctx.status();
    srv.tls = std::move(ctx.value());
  }
  if (srv.proxy_ssl.enable) {
    if (srv.proxy_ssl.where.empty()) srv.proxy_ssl.where = srv.where;
    auto ctx = TlsContext::client(srv.proxy_ssl);
    if (!ctx) return ctx.status();
    srv.upstream_tls = std::move(ctx.value());
  }
  return Status::ok();
}

// Once the whole stream block is read: collect the servers, build the named
// groups, and resolve each proxy_pass to a group (a bare address becomes a
// group of one).
Status init_final(const ConfInit& ctx, StreamFinalConf& fin) {
  const std::size_t module = ctx.module();
  for (const auto& child : ctx.scope().children()) {
    if (child->context() != kStreamUpsConf) continue;
    auto* ups = static_cast<StreamUpsConf*>(child->conf(module, kUpsSpec));
    const std::string& name = child->args().at(0);
    for (const auto& u : fin.upstreams) {
      if (u->name == name) return Status::error("duplicate upstream \"" + name + "\"" + child->where());
    }
    if (ups == nullptr || ups->servers.empty()) {
      return Status::error("no servers are inside upstream" + child->where());
    }
    auto group = std::make_unique<Upstream>();
    group->name = name;
    group->servers = ups->servers;
    fin.upstreams.push_back(std::move(group));
  }
  for (const auto& child : ctx.scope().children()) {
    if (child->context() != kStreamSrvConf) continue;
    auto* srv = static_cast<StreamSrvConf*>(child->conf(module, kSrvSpec));
    if (srv == nullptr) return Status::error("internal error: stream server without conf");
    if (srv->where.empty()) srv->where = child->where();
    if (srv->listens.empty()) return Status::error("no \"listen\" is defined for server" + child->where());
    if (srv->proxy_pass.empty()) {
      return Status::error("no handler for server: \"proxy_pass\" is missing" + child->where());
    }
    for (const auto& u : fin.upstreams) {
      if (u->name == srv->proxy_pass) srv->upstream = u.get();
    }
    if (srv->upstream == nullptr) {
      Listening probe;
      if (!probe.set_address(srv->proxy_pass) || probe.port() == 0) {
        return Status::error("no upstream \"" + srv->proxy_pass + "\" and not an address" +
                             child->where());
      }
      auto group = std::make_unique<Upstream>();
      group->name = srv->proxy_pass;
      group->servers.push_back(PeerAddress{probe.addr, probe.addrlen, probe.addr_text});
      srv->upstream = group.get();
      fin.upstreams.push_back(std::move(group));
    }
    for (const StreamListen& l : srv->listens) {
      for (const StreamSrvConf* other : fin.servers) {
        for (const StreamListen& o : other->listens) {
          if (o.addr_text == l.addr_text) {
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

Status merge_srv(const ConfInit& ctx, const StreamSrvConf& parent, StreamSrvConf& child) {
  merge_tls_server_conf(ctx, parent.ssl, child.ssl);
  merge_tls_client_conf(ctx, parent.proxy_ssl, child.proxy_ssl);
  return Status::ok();
}

Module* make_stream_module() {
  auto* m = new Module("stream");
  // Slot directives set in "stream" are inherited by its servers by the loader.
  auto srv = m->add_conf<StreamSrvConf>(kStreamMainConf | kStreamSrvConf, {}, merge_srv);
  auto ups = m->add_conf<StreamUpsConf>(kStreamUpsConf);
  auto fin = m->add_conf<StreamFinalConf>(kStreamMainConf, init_final);
  (void)fin;

  m->add_block("stream", kMainConf, Arity::none(), kStreamMainConf);
  m->add_block("server", kStreamMainConf, Arity::none(), kStreamSrvConf).multiple = true;
  m->add_block("upstream", kStreamMainConf, Arity::exactly(1), kStreamUpsConf).multiple = true;
  m->add("server", kStreamUpsConf, Arity::between(1, 2), ups.custom(set_upstream_server)).multiple =
      true;

  m->add("listen", kStreamSrvConf, Arity::one_or_more(), srv.custom(set_listen)).multiple = true;
  m->add("proxy_pass", kStreamSrvConf, Arity::exactly(1),
         srv.string(&StreamSrvConf::proxy_pass, "", false));
  constexpr ConfContextMask kAny = kStreamMainConf | kStreamSrvConf;
  m->add("proxy_connect_timeout", kAny, Arity::exactly(1),
         srv.msec(&StreamSrvConf::proxy_connect_timeout, 60000));
  m->add("proxy_timeout", kAny, Arity::exactly(1), srv.msec(&StreamSrvConf::proxy_timeout, 600000));
  m->add("proxy_buffer_size", kAny, Arity::exactly(1),
         srv.size(&StreamSrvConf::proxy_buffer_size, 16384, 512));
  m->add("proxy_next_upstream", kAny, Arity::on_off(),
         srv.flag(&StreamSrvConf::proxy_next_upstream, true));
  m->add("proxy_next_upstream_tries", kAny, Arity::exactly(1),
         srv.number<unsigned>(&StreamSrvConf::proxy_next_upstream_tries, 0));
  add_tls_server_directives(*m, kAny, srv.index(), typeid(StreamSrvConf),
                            tls_server_member<StreamSrvConf, &StreamSrvConf::ssl>);
  add_tls_client_directives(*m, kAny, srv.index(), typeid(StreamSrvConf),
                            tls_client_member<StreamSrvConf, &StreamSrvConf::proxy_ssl>,
                            /*with_enable_flag=*/true);
  return m;
}

}  // namespace

const Module& stream_module() {
  static const Module* module = make_stream_module();  // never destroyed: used until exit
  return *module;
}

const StreamFinalConf* stream_final(const Configuration& conf) {
  return conf.find<StreamFinalConf>(stream_module(), kFinalSpec);
}

}  // namespace vigil::stream
