// The `upstream { }` block and its directives: one implementation that http
// and stream register in their own contexts (nginx has two copies,
// ngx_http_upstream_module and ngx_stream_upstream_module).
#include <algorithm>
#include <memory>
#include <utility>

#include "core/conf/values.h"
#include "core/shm_zone.h"
#include "upstream/group.h"

namespace vigil::upstream {

namespace {

// The upstream module's tag for its shared zones (core/shm_zone.h).
const char kZoneTag = 0;

// What one `upstream` block holds while it is read.
struct BlockConf {
  std::vector<ServerLine> servers;
  Method method = Method::kRoundRobin;
  std::string method_name;  // "least_conn", "hash", "ip_hash" ("" = round-robin)
  std::string hash_key;
  unsigned keepalive = 0;
  std::uint64_t keepalive_requests = 1000;
  Msec keepalive_timeout = 60000;
  Msec keepalive_time = 3600000;
  std::string zone;
  std::size_t zone_size = 0;
  std::string zone_where;
  ShmZone* shm = nullptr;  // registered with the configuration's zones
  std::unique_ptr<Group> built;  // at the block's close
};

// The GroupSet lives in the protocol's main scope.
struct SetConf {
  GroupSet set;
};

Status parse_server(const DirectiveCall& call, BlockConf& b) {
  ServerLine line;
  line.address = call.arg(0);
  line.where = call.where();
  for (std::size_t i = 1; i < call.arg_count(); ++i) {
    const std::string& a = call.arg(i);
    auto bad = [&] { return call.error("invalid parameter \"" + a + "\""); };
    if (a.starts_with("weight=")) {
      auto v = parse_number(std::string_view(a).substr(7));
      if (!v || *v < 1 || *v > 1000000) return bad();
      line.weight = static_cast<int>(*v);
    } else if (a.starts_with("max_fails=")) {
      auto v = parse_number(std::string_view(a).substr(10));
      if (!v || *v > 1000000) return bad();
      line.max_fails = static_cast<unsigned>(*v);
    } else if (a.starts_with("max_conns=")) {
      auto v = parse_number(std::string_view(a).substr(10));
      if (!v || *v < 0 || *v > 1000000000) return bad();
      line.max_conns = *v;
    } else if (a.starts_with("fail_timeout=")) {
      auto v = parse_sec(std::string_view(a).substr(13));
      if (!v) return bad();
      line.fail_timeout = static_cast<Msec>(*v) * 1000;
    } else if (a == "backup") {
      line.backup = true;
    } else if (a == "down") {
      line.down = true;
    } else {
      return bad();
    }
  }
  b.servers.push_back(std::move(line));
  return Status::ok();
}

Status set_method(const DirectiveCall& call, BlockConf& b, Method m) {
  // nginx warns "load balancing method redefined" and takes the last; a
  // configuration that names two methods is a mistake, so it is an error here.
  if (!b.method_name.empty()) return call.error("load balancing method redefined");
  b.method = m;
  b.method_name = call.name();
  return Status::ok();
}

Status parse_hash(const DirectiveCall& call, BlockConf& b) {
  if (call.arg(0).empty()) return call.invalid_value(0);
  Method m = Method::kHash;
  if (call.arg_count() == 2) {
    if (call.arg(1) != "consistent") return call.error("invalid parameter \"" + call.arg(1) + "\"");
    m = Method::kConsistentHash;
  }
  if (Status s = set_method(call, b, m); !s) return s;
  b.hash_key = call.arg(0);
  return Status::ok();
}

Status parse_zone(const DirectiveCall& call, BlockConf& b) {
  if (call.arg(0).empty()) return call.invalid_value(0);
  b.zone = call.arg(0);
  b.zone_where = call.where();
  if (call.arg_count() == 2) {
    auto v = parse_size(call.arg(1));
    if (!v || *v == 0) return call.error("invalid zone size \"" + call.arg(1) + "\"");
    b.zone_size = static_cast<std::size_t>(*v);
  }
  // Registered now, mapped by the runtime before it forks the workers; a
  // zone without a size refers to one another `zone` line sizes.
  auto z = call.zones().add(b.zone, b.zone_size, &kZoneTag, call.where());
  if (!z) return z.status();
  b.shm = z.value();
  return Status::ok();
}

// When the block closes: check it as nginx does and build its peers.
Status init_block(const ConfInit& ctx, BlockConf& b, Protocol protocol) {
  const std::string& name = ctx.scope().args().at(0);
  if (b.servers.empty()) return Status::error("no servers are inside upstream" + ctx.scope().where());
  auto group = std::make_unique<Group>();
  group->name = name;
  group->where = ctx.scope().where();
  group->protocol = protocol;
  group->method = b.method;
  group->hash_key = b.hash_key;
  group->keepalive = b.keepalive;
  group->keepalive_requests = b.keepalive_requests;
  group->keepalive_timeout = b.keepalive_timeout;
  group->keepalive_time = b.keepalive_time;
  group->zone = b.zone;
  group->zone_size = b.zone_size;
  const bool hashed = b.method == Method::kHash || b.method == Method::kConsistentHash ||
                      b.method == Method::kIpHash;
  // http: a port defaults to 80 (ngx_http_upstream_server); stream: required.
  const unsigned default_port = protocol == Protocol::kHttp ? 80 : 0;
  for (const ServerLine& line : b.servers) {
    if (line.backup && hashed) {
      return Status::error("balancing method does not support parameter \"backup\"" + line.where);
    }
    if (Status s = add_server(*group, line, default_port); !s) return s;
  }
  finish_peers(*group);
  b.built = std::move(group);
  return Status::ok();
}

}  // namespace

UpstreamSpecs add_directives(Module& m, ConfContextMask main_context, ConfContextMask ups_context,
                             Protocol protocol) {
  UpstreamSpecs specs;
  const std::size_t block_index = m.confs().size();
  auto block = m.add_conf<BlockConf>(ups_context, [protocol](const ConfInit& ctx, BlockConf& b) {
    return init_block(ctx, b, protocol);
  });
  // The set is finished when the main block closes, before the confs the
  // module adds after this call (they can then resolve their proxy_pass).
  auto set = m.add_conf<SetConf>(
      main_context, [protocol, block_index, ups_context](const ConfInit& ctx, SetConf& sc) {
        GroupSet& gs = sc.set;
        gs.protocol = protocol;
        const ConfScope* root = &ctx.scope();
        while (root->parent() != nullptr) root = root->parent();
        gs.root = root;
        for (const auto& child : ctx.scope().children()) {
          if (child->context() != ups_context) continue;
          auto* b = static_cast<BlockConf*>(child->conf(ctx.module(), static_cast<int>(block_index)));
          if (b == nullptr || b->built == nullptr) continue;
          std::unique_ptr<Group> g = std::move(b->built);
          if (gs.find(g->name) != nullptr) {
            return Status::error("duplicate upstream \"" + g->name + "\"" + child->where());
          }
          gs.groups.push_back(std::move(g));
        }
        // Health starts in each group's private memory (a configuration
        // that is only tested, never run, needs nothing more); each zone's
        // init moves its groups' health into the zone when it is mapped.
        std::vector<std::pair<ShmZone*, std::vector<Group*>>> by_zone;
        for (const auto& child : ctx.scope().children()) {
          if (child->context() != ups_context) continue;
          auto* b = static_cast<BlockConf*>(child->conf(ctx.module(), static_cast<int>(block_index)));
          if (b == nullptr || b->shm == nullptr) continue;
          Group* g = gs.find(child->args().at(0));
          auto it = std::find_if(by_zone.begin(), by_zone.end(),
                                 [&](const auto& e) { return e.first == b->shm; });
          if (it == by_zone.end()) {
            by_zone.push_back({b->shm, {}});
            it = by_zone.end() - 1;
          }
          it->second.push_back(g);
        }
        for (auto& g : gs.groups) {
          if (Status s = place_state(*g); !s) return s;
        }
        for (auto& [zone, groups] : by_zone) {
          zone->set_init([groups = groups](ShmZone& z, void* old_data) {
            return place_zone_health(z, old_data, groups);
          });
        }
        return Status::ok();
      });
  specs.block_spec = block.index();
  specs.set_spec = set.index();

  m.add_block("upstream", main_context, Arity::exactly(1), ups_context).multiple = true;
  m.add("server", ups_context, Arity::at_least(1), block.custom(parse_server)).multiple = true;
  m.add("least_conn", ups_context, Arity::none(), block.custom([](const DirectiveCall& call, BlockConf& b) {
    return set_method(call, b, Method::kLeastConn);
  }));
  m.add("hash", ups_context, Arity::between(1, 2), block.custom(parse_hash));
  m.add("zone", ups_context, Arity::between(1, 2), block.custom(parse_zone));
  if (protocol == Protocol::kHttp) {
    m.add("ip_hash", ups_context, Arity::none(), block.custom([](const DirectiveCall& call, BlockConf& b) {
      return set_method(call, b, Method::kIpHash);
    }));
    m.add("keepalive", ups_context, Arity::exactly(1),
          block.number<unsigned>(&BlockConf::keepalive, 0, 1, 65535));
    m.add("keepalive_requests", ups_context, Arity::exactly(1),
          block.number<std::uint64_t>(&BlockConf::keepalive_requests, 1000, 1));
    m.add("keepalive_timeout", ups_context, Arity::exactly(1),
          block.msec(&BlockConf::keepalive_timeout, 60000));
    m.add("keepalive_time", ups_context, Arity::exactly(1),
          block.msec(&BlockConf::keepalive_time, 3600000));
  }
  return specs;
}

GroupSet& group_set(const ConfInit& ctx, UpstreamSpecs specs) {
  GroupSet* set = find_group_set(ctx.scope(), ctx.module(), specs);
  return *set;  // the spec is created in the main context: always there
}

GroupSet* find_group_set(const ConfScope& scope, std::size_t module, UpstreamSpecs specs) {
  for (const ConfScope* s = &scope; s != nullptr; s = s->parent()) {
    if (auto* sc = static_cast<SetConf*>(s->conf(module, specs.set_spec))) return &sc->set;
  }
  return nullptr;
}

}  // namespace vigil::upstream
