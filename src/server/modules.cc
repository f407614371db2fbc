#include "server/modules.h"

#include <vector>

#include "core/core_module.h"
#include "event/event_conf.h"
#include "event/resolver.h"
#include "event/tls/counters.h"
#include "event/tls/ocsp_fetch.h"
#include "event/tls/tls.h"
#include "http/core/conf.h"
#include "http/core/counters.h"
#include "http/core/module.h"
#include "http/core/protocol.h"
#include "mail/counters.h"
#include "mail/mail_conf.h"
#include "mail/protocol.h"
#include "mail/session.h"
#include "stream/log.h"
#include "stream/protocol.h"
#include "stream/stream_conf.h"
#include "upstream/upstream.h"

namespace vigil {

namespace {

// One line per module, in load order: core first (the main context), then
// events (its block is required), then the protocols.
std::vector<ServerModule> builtin_modules() {
  std::vector<ServerModule> list = {
      {"core", &core_module()},
      {"events", &event_module()},
      {"http", &http::http_module(), http::create_listeners, http::init_worker,
       http::exit_worker, http::reopen_logs, http::begin_shutdown},
  };
  // The HTTP modules with confs of their own (http/core/modules.cc).
  for (const http::HttpModule* m : http::http_modules()) {
    list.push_back({m->conf().name().c_str(), &m->conf()});
  }
  list.insert(list.end(), {
      {"stream", &stream::stream_module(), stream::create_listeners, stream::init_worker,
       stream::exit_worker, stream::reopen_logs},
      {"mail", &mail::mail_module(), mail::create_listeners, nullptr, mail::exit_worker},
      // The per-worker keepalive caches of upstream groups, closed at exit
      // (the upstream directives belong to the http and stream modules).
      {"upstream", nullptr, nullptr, nullptr, upstream::close_keepalive},
      // OCSP requests still running (stapling, ssl_ocsp), cancelled before
      // the resolvers they may wait on go.
      {"ocsp", nullptr, nullptr, nullptr, ocsp_exit_loop},
      // The per-worker resolvers: their sockets closed at exit, after the
      // protocols ended the requests that waited on them.
      {"resolver", nullptr, nullptr, nullptr, resolver_exit_loop},
      // The per-worker TLS file buffer (http and stream listeners share it).
      {"tls", nullptr, nullptr, nullptr, tls_exit_loop},
  });
  return list;
}

std::vector<ServerModule>& registered() {
  static std::vector<ServerModule> list = builtin_modules();
  return list;
}

ModuleRegistry& conf_registry() {
  static ModuleRegistry registry = [] {
    ModuleRegistry r;
    for (const ServerModule& m : registered()) {
      if (m.conf != nullptr) r.add(*m.conf);
    }
    return r;
  }();
  return registry;
}

}  // namespace

std::span<const ServerModule> server_modules() { return registered(); }

void add_server_module(const ServerModule& module) {
  ModuleRegistry& conf = conf_registry();  // built from the list before this one
  registered().push_back(module);
  if (module.conf != nullptr) conf.add(*module.conf);
}

const ModuleRegistry& server_conf_modules() { return conf_registry(); }

std::span<CounterBlock* const> server_counter_blocks() {
  // The order /metrics has always shown them in (when one core list held
  // them all): connections, HTTP requests, TLS, open_file_cache, mail.
  static CounterBlock* const blocks[] = {
      &shared_counter_block(),                 // vigil_connections_{active,accepted,handled}
      &http::http_counter_block(),             // vigil_http_requests_total, reading, writing...
      &tls_counter_block(),                    // vigil_tls_*
      &http::open_file_cache_counter_block(),  // vigil_http_open_file_cache_*
      &mail::mail_counter_block(),             // vigil_mail_*
  };
  return blocks;
}

ConfLoadOptions server_load_options() {
  ConfLoadOptions o;
  o.modules = &server_conf_modules();
  o.embedded_text = kEmbeddedConf;
  o.embedded_includes = {{"mime.types", kEmbeddedMimeTypes}};
  return o;
}

}  // namespace vigil
