#include "http/core/protocol.h"

#include <cstring>

#include "event/proxy_protocol.h"
#include "event/tls/tls.h"
#include "http/core/conf.h"
#include "http/core/request.h"
#include "http/core/servers.h"
#include "http/core/worker.h"
#include "http/v2/shutdown.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {
constexpr std::size_t kConnectionArenaSize = 256;
static_assert(sizeof(HttpConnection) + sizeof(sockaddr_in6) + 48 <= kConnectionArenaSize,
              "an idle connection's state must fit its first arena block");
}  // namespace

Status create_listeners(const Configuration& conf, std::vector<std::unique_ptr<Listening>>& out) {
  const HttpServers* servers = http_servers(conf);
  if (servers == nullptr) return Status::ok();
  for (const auto& addr : servers->addresses) {
    auto ls = std::make_unique<Listening>();
    const ListenConf& l = addr->listen;
    std::memcpy(&ls->addr, &l.addr, sizeof l.addr);
    ls->addrlen = l.addrlen;
    ls->addr_text = l.addr_text;
    apply_listen_options(l, *ls);
    // TCP_NODELAY is set when a connection first goes keep-alive, as nginx
    // does: a connection-per-request client never pays for the setsockopt.
    ls->tcp_nodelay = false;
    ls->handler = init_connection;
    // An idle connection keeps the peer's address and its HttpConnection in
    // its arena, nothing else (buffers and requests come back to the worker).
    ls->pool_size = kConnectionArenaSize + (l.ssl ? sizeof(TlsConnection) : 0) +
                    (l.proxy_protocol ? sizeof(ProxyProtocolInfo) + 64 : 0);
    // The PROXY protocol header is read within the default server's
    // client_header_timeout (nginx's).
    ls->proxy_protocol_timeout = addr->default_server->client_header_timeout;
    ls->servers = addr.get();
    out.push_back(std::move(ls));
  }
  return Status::ok();
}

Status init_worker(const Configuration& conf, EventLoop& loop, int worker_index) {
  const HttpServers* servers = http_servers(conf);
  if (servers == nullptr) return Status::ok();
  auto worker = std::make_unique<HttpWorker>(loop, *servers, worker_index);
  if (Status s = worker->open_logs(); !s) return s;
  if (Status s = worker->init_file_caches(); !s) return s;
  // The loop keeps the worker as its HTTP context until exit_worker.
  if (!attach_worker(loop, worker.get())) {
    return Status::error("no free context slot in the event loop for http");
  }
  worker.release()->publish_stats();
  return Status::ok();
}

void exit_worker(EventLoop& loop) {
  HttpWorker* worker = worker_of(loop);
  if (worker == nullptr) return;
  // Connections still open are closed here, so their requests and buffers go
  // back to the worker before it is destroyed.
  ConnectionPool& pool = loop.pool();
  Connection* cs = pool.connections();
  for (std::size_t i = 0; i < pool.size(); ++i) {
    Connection& c = cs[i];
    if (c.fd == -1 || c.listening == nullptr || c.listening->connection == &c) continue;
    if (c.listening->handler != init_connection || c.data == nullptr) continue;
    close_connection(*static_cast<HttpConnection*>(c.data));
  }
  worker->flush_logs();
  worker->publish_stats();
  h2::exit_worker(loop);
  attach_worker(loop, nullptr);
  delete worker;
}

void begin_shutdown(EventLoop& loop) {
  ConnectionPool& pool = loop.pool();
  Connection* cs = pool.connections();
  for (std::size_t i = 0; i < pool.size(); ++i) {
    Connection& c = cs[i];
    if (c.fd == -1 || c.listening == nullptr || c.listening->connection == &c) continue;
    if (c.listening->handler != init_connection || c.data == nullptr) continue;
    auto& hc = *static_cast<HttpConnection*>(c.data);
    if (hc.h2 != nullptr) h2::begin_shutdown(hc);
  }
}

void reopen_logs(EventLoop& loop) {
  if (HttpWorker* worker = worker_of(loop)) worker->reopen_logs();
}

}  // namespace vigil::http
