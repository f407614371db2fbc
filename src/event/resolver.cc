// The stub resolver (nginx's ngx_resolver.c, the parts a proxy needs): the
// cache of names, one query per name in flight, UDP with TCP after a
// truncated reply, resending to the next server, CNAME chains.
#include "event/resolver.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <unordered_map>

#include "core/conf/values.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/loop.h"

namespace vigil {

// A cached name (or address, for PTR) and the requests waiting for it.
struct Resolver::Node {
  std::string key;
  bool ptr = false;
  bool done = false;
  Msec expire = 0;  // done: when the answer is stale
  int state = 0;
  std::size_t naddrs = 0;
  dns::Address addrs[dns::kMaxAddrs];
  char name[dns::kMaxName + 1] = {};
  std::size_t name_len = 0;
  ResolveRequest* waiting = nullptr;  // a doubly linked list
  Query* queries[2] = {nullptr, nullptr};
  // Results of the finished questions (A then AAAA).
  int qstate[2] = {0, 0};
  std::uint32_t ttl = UINT32_MAX;
  Msec resend = Resolver::kResend;
  std::uint16_t types[2] = {0, 0};  // the questions asked (A, AAAA; or PTR)
  unsigned server = 0;              // the server asked first
  unsigned cnames = 0;              // CNAMEs followed
  std::string cname;                // an alias to follow once both questions are answered
  Log* log = nullptr;
  bool calling = false;  // node_done is calling the waiting requests
};

// One question on the wire.
struct Resolver::Query {
  Resolver* res = nullptr;
  Node* node = nullptr;
  int slot = 0;
  std::uint16_t qtype = 0;
  std::uint16_t id = 0;
  std::string qname;
  unsigned cnames = 0;
  unsigned server = 0;
  Connection* c = nullptr;
  bool tcp = false;
  Event resend;
  std::uint8_t packet[dns::kMaxName + 32];
  std::size_t plen = 0;
  // TCP: the length prefix and query out, then the length and the reply in.
  std::size_t sent = 0;
  std::uint8_t len[2] = {};
  std::unique_ptr<std::uint8_t[]> in;  // the reply, once its length is known
  std::size_t got = 0;                 // of the length, then of the reply
};

namespace {

struct ResolverSet {
  std::vector<std::unique_ptr<Resolver>> list;
};

// The key of the resolvers in a loop's context.
const char kResolverKey = 0;

Status parse_server(const std::string& text, std::vector<ResolverServer>& out) {
  std::string host = text;
  std::string port = "53";
  if (!host.empty() && host[0] == '[') {
    const auto close = host.find(']');
    if (close == std::string::npos) return Status::error("invalid host in resolver \"" + text + "\"");
    if (close + 1 < host.size()) {
      if (host[close + 1] != ':') return Status::error("invalid host in resolver \"" + text + "\"");
      port = host.substr(close + 2);
    }
    host = host.substr(1, close - 1);
  } else if (const auto colon = host.find(':');
             colon != std::string::npos && host.find(':', colon + 1) == std::string::npos) {
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
  }
  auto p = parse_number(port);
  if (!p || *p < 1 || *p > 65535) return Status::error("invalid port in resolver \"" + text + "\"");
  if (host.empty()) return Status::error("no host in resolver \"" + text + "\"");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) {
    return Status::error("host not found in resolver \"" + text + "\"");
  }
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    ResolverServer s;
    std::memcpy(&s.addr, ai->ai_addr, ai->ai_addrlen);
    s.addrlen = ai->ai_addrlen;
    char buf[INET6_ADDRSTRLEN] = "";
    const void* a = ai->ai_family == AF_INET
                        ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr)
                        : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr);
    ::inet_ntop(ai->ai_family, a, buf, sizeof buf);
    s.name = ai->ai_family == AF_INET6 ? "[" + std::string(buf) + "]:" + port
                                       : std::string(buf) + ":" + port;
    out.push_back(std::move(s));
  }
  ::freeaddrinfo(res);
  return Status::ok();
}

Status parse_flag(const std::string& arg, std::size_t skip, bool& out) {
  const std::string v = arg.substr(skip);
  if (v == "on") {
    out = true;
  } else if (v == "off") {
    out = false;
  } else {
    return Status::error("invalid parameter \"" + arg + "\"");
  }
  return Status::ok();
}

void unlink(ResolveRequest& q, ResolveRequest*& head) {
  if (q.prev != nullptr) q.prev->next = q.next;
  if (q.next != nullptr) q.next->prev = q.prev;
  if (head == &q) head = q.next;
  q.prev = q.next = nullptr;
}

void copy_result(const Resolver::Node& n, ResolveRequest& q);

}  // namespace

Status parse_resolver(const std::vector<std::string>& args, ResolverConf& out) {
  for (const std::string& a : args) {
    if (a.starts_with("valid=")) {
      auto t = parse_sec(a.substr(6));
      if (!t || *t < 0) return Status::error("invalid parameter \"" + a + "\"");
      out.valid = static_cast<Msec>(*t) * 1000;
      continue;
    }
    if (a.starts_with("ipv4=")) {
      if (Status s = parse_flag(a, 5, out.ipv4); !s) return s;
      continue;
    }
    if (a.starts_with("ipv6=")) {
      if (Status s = parse_flag(a, 5, out.ipv6); !s) return s;
      continue;
    }
    if (a.starts_with("status_zone=")) continue;  // accepted, no statistics kept
    if (Status s = parse_server(a, out.servers); !s) return s;
  }
  if (!out.ipv4 && !out.ipv6) return Status::error("\"ipv4\" and \"ipv6\" cannot both be \"off\"");
  if (out.servers.empty()) return Status::error("no name servers defined");
  return Status::ok();
}

const char* resolver_strerror(int state) {
  static constexpr const char* kErrors[] = {"Format error", "Server failure", "Host not found",
                                             "Unimplemented", "Operation refused"};
  if (state > 0 && state < 6) return kErrors[state - 1];
  if (state == kResolveTimedOut) return "Operation timed out";
  return "Unknown error";
}

namespace {

void copy_result(const Resolver::Node& n, ResolveRequest& q) {
  q.state = n.state;
  q.naddrs = n.naddrs;
  std::memcpy(q.addrs, n.addrs, sizeof(dns::Address) * n.naddrs);
  q.name_len = n.name_len;
  std::memcpy(q.name, n.name, n.name_len);
  q.name[n.name_len] = '\0';
}

}  // namespace

Resolver* Resolver::of(EventLoop& loop, const std::shared_ptr<const ResolverConf>& conf) {
  auto* set = loop.context_or_make<ResolverSet>(&kResolverKey);
  if (set == nullptr) return nullptr;
  for (auto& r : set->list) {
    if (r->conf_ == conf) return r.get();
  }
  auto r = std::unique_ptr<Resolver>(new (std::nothrow) Resolver(loop, conf));
  if (r == nullptr) return nullptr;
  set->list.push_back(std::move(r));
  return set->list.back().get();
}

Resolver::Resolver(EventLoop& loop, std::shared_ptr<const ResolverConf> conf)
    : loop_(loop), conf_(std::move(conf)) {
  if (::getrandom(rng_, sizeof rng_, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof rng_)) {
    rng_[0] = static_cast<std::uint64_t>(clock::current_msec()) ^ 0x9e3779b97f4a7c15ull;
    rng_[1] = reinterpret_cast<std::uintptr_t>(this) | 1;
  }
}

Resolver::~Resolver() {
  for (auto& n : nodes_) {
    for (Query*& qr : n->queries) {
      if (qr != nullptr) drop_query(*qr);
    }
    for (ResolveRequest* q = n->waiting; q != nullptr;) {
      ResolveRequest* next = q->next;
      loop_.del_timer(q->timer);
      q->node = nullptr;
      q->prev = q->next = nullptr;
      q = next;
    }
  }
}

std::uint16_t Resolver::random16() {
  // xorshift128+: ids that cannot be guessed from the previous ones without
  // the seed (getrandom); not a cryptographic stream, as nginx's ngx_random.
  std::uint64_t s1 = rng_[0];
  const std::uint64_t s0 = rng_[1];
  rng_[0] = s0;
  s1 ^= s1 << 23;
  rng_[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
  return static_cast<std::uint16_t>((rng_[1] + s0) >> 24);
}

bool Resolver::resolve_name(ResolveRequest& q, std::string_view name) {
  std::string key(name);
  while (!key.empty() && key.back() == '.') key.pop_back();
  for (char& c : key) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return start(q, key, false);
}

bool Resolver::resolve_addr(ResolveRequest& q, const dns::Address& addr) {
  char buf[80];
  const std::size_t n = dns::reverse_name(addr, buf, sizeof buf);
  if (n == 0) {
    q.state = dns::kFormErr;
    return true;
  }
  return start(q, std::string(buf, n), true);
}

void Resolver::expire_some() {
  // As nginx's ngx_resolver_expire: a few stale entries per new lookup.
  const Msec now = clock::current_msec();
  unsigned dropped = 0;
  for (std::size_t i = 0; i < nodes_.size() && dropped < 2;) {
    Node& n = *nodes_[i];
    if (n.done && !n.calling && n.waiting == nullptr && msec_diff(now, n.expire) >= 0) {
      nodes_[i] = std::move(nodes_.back());
      nodes_.pop_back();
      ++dropped;
      continue;
    }
    ++i;
  }
}

bool Resolver::start(ResolveRequest& q, const std::string& key, bool ptr) {
  Log& log = loop_.log();
  q.node = nullptr;
  q.resolver = this;
  q.prev = q.next = nullptr;
  q.state = 0;
  q.naddrs = 0;
  q.name_len = 0;
  const Msec now = clock::current_msec();
  Node* node = nullptr;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = *nodes_[i];
    if (n.ptr != ptr || n.key != key) continue;
    if (n.done && !n.calling && msec_diff(now, n.expire) >= 0 && n.waiting == nullptr) {
      nodes_[i] = std::move(nodes_.back());
      nodes_.pop_back();
      break;
    }
    node = &n;
    break;
  }
  if (node != nullptr && node->done) {
    copy_result(*node, q);
    return true;
  }
  if (node == nullptr) {
    std::uint8_t probe[dns::kMaxName + 32];
    if (dns::build_query(probe, sizeof probe, 0, key, dns::kTypeA) == 0) {
      q.state = dns::kFormErr;  // not a domain name
      return true;
    }
    if (conf_->servers.empty()) {
      q.state = dns::kServFail;
      return true;
    }
    expire_some();
    auto n = std::unique_ptr<Node>(new (std::nothrow) Node());
    if (n == nullptr) {
      q.state = dns::kServFail;
      return true;
    }
    n->key = key;
    n->ptr = ptr;
    n->log = &log;
    n->resend = q.timeout / 2 < kResend ? q.timeout / 2 : kResend;
    if (n->resend == 0) n->resend = 1;
    std::uint16_t types[2] = {0, 0};
    if (ptr) {
      types[0] = dns::kTypePtr;
    } else {
      if (conf_->ipv4) types[0] = dns::kTypeA;
      if (conf_->ipv6) types[1] = dns::kTypeAaaa;
    }
    n->types[0] = types[0];
    n->types[1] = types[1];
    n->server = next_server_;
    for (int s = 0; s < 2; ++s) {
      if (types[s] != 0) new_query(*n, s, key);
    }
    if (n->queries[0] == nullptr && n->queries[1] == nullptr) {
      q.state = dns::kServFail;
      return true;
    }
    // A query that could not be made counts as a server failure.
    for (int s = 0; s < 2; ++s) {
      if (types[s] != 0 && n->queries[s] == nullptr) n->qstate[s] = dns::kServFail;
    }
    nodes_.push_back(std::move(n));
    node = nodes_.back().get();
    next_server_ = (next_server_ + 1) % static_cast<unsigned>(conf_->servers.size());
    q.node = node;
    node->waiting = &q;
    q.timer.data = &q;
    q.timer.handler = on_request_timeout;
    q.timer.cancelable = 1;
    q.timer.log = &log;
    loop_.add_timer(q.timer, q.timeout);
    // The name was checked above: send() finishes nothing at once.
    for (Query* qr : node->queries) {
      if (qr != nullptr) send(*qr);
    }
    return false;
  }
  // Being resolved: wait for it.
  q.node = node;
  q.next = node->waiting;
  if (q.next != nullptr) q.next->prev = &q;
  node->waiting = &q;
  q.timer.data = &q;
  q.timer.handler = on_request_timeout;
  q.timer.cancelable = 1;
  q.timer.log = &log;
  loop_.add_timer(q.timer, q.timeout);
  return false;
}

void Resolver::cancel(ResolveRequest& q) {
  loop_.del_timer(q.timer);
  auto* n = static_cast<Node*>(q.node);
  if (n == nullptr) return;
  unlink(q, n->waiting);
  q.node = nullptr;
  // The query goes on: its answer is cached for the next request.
}

void Resolver::on_request_timeout(Event& ev) {
  auto& q = *ev.owner<ResolveRequest>();
  auto* res = static_cast<Resolver*>(q.resolver);
  auto* n = static_cast<Node*>(q.node);
  if (n == nullptr) return;
  unlink(q, n->waiting);
  q.node = nullptr;
  q.state = kResolveTimedOut;
  q.naddrs = 0;
  q.name_len = 0;
  (void)res;
  q.handler(q);
}

void Resolver::drop_query(Query& qr) {
  loop_.del_timer(qr.resend);
  if (qr.c != nullptr) loop_.pool().close_connection(*qr.c);
  qr.c = nullptr;
  if (qr.node != nullptr) qr.node->queries[qr.slot] = nullptr;
  delete &qr;
}

void Resolver::send(Query& qr) {
  Node& n = *qr.node;
  Log& log = *n.log;
  if (qr.c != nullptr) {
    loop_.pool().close_connection(*qr.c);
    qr.c = nullptr;
  }
  qr.tcp = false;
  qr.id = random16();
  qr.plen = dns::build_query(qr.packet, sizeof qr.packet, qr.id, qr.qname, qr.qtype);
  if (qr.plen == 0) {
    query_done(qr, dns::kFormErr, nullptr);
    return;
  }
  const ResolverServer& srv = conf_->servers[qr.server % conf_->servers.size()];
  // A socket of its own per question: the kernel picks a fresh source port,
  // and a connected socket takes datagrams from the server alone.
  const int fd = ::socket(srv.addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd == -1) {
    VIGIL_LOG(log, kAlert, errno, "socket() failed");
    loop_.add_timer(qr.resend, n.resend);
    return;
  }
  Connection* c = loop_.pool().get(fd, log);
  if (c == nullptr) {
    ::close(fd);
    loop_.add_timer(qr.resend, n.resend);
    return;
  }
  c->data = &qr;
  c->log = &log;
  c->read->handler = on_udp_read;
  c->write->handler = on_udp_read;
  c->read->log = c->write->log = &log;
  qr.c = c;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&srv.addr), srv.addrlen) == -1) {
    VIGIL_LOG(log, kError, errno, "connect() to %s failed", srv.name.c_str());
  } else if (::send(fd, qr.packet, qr.plen, 0) != static_cast<ssize_t>(qr.plen)) {
    VIGIL_LOG(log, kError, errno, "send() failed");
  } else if (Status st = loop_.handle_read_event(*c->read); !st) {
    VIGIL_LOG(log, kAlert, st.err(), "%s", st.message().c_str());
  }
  loop_.add_timer(qr.resend, n.resend);
}

void Resolver::on_resend(Event& ev) {
  Query& qr = *ev.owner<Query>();
  Resolver& res = *qr.res;
  Node& n = *qr.node;
  if (n.waiting == nullptr) {
    // Nobody waits any more: forget the name rather than ask forever.
    res.query_done(qr, kResolveTimedOut, nullptr);
    return;
  }
  qr.server = (qr.server + 1) % static_cast<unsigned>(res.conf_->servers.size());
  res.send(qr);
}

void Resolver::on_udp_read(Event& ev) {
  Connection& c = *ev.owner<Connection>();
  Query& qr = *static_cast<Query*>(c.data);
  Resolver& res = *qr.res;
  if (ev.write) return;
  std::uint8_t buf[4096];
  for (;;) {
    const ssize_t got = ::recv(c.fd, buf, sizeof buf, 0);
    if (got == -1) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        ev.ready = 0;
        if (Status st = res.loop_.handle_read_event(ev); !st) {
          VIGIL_LOG(*qr.node->log, kAlert, st.err(), "%s", st.message().c_str());
        }
        return;
      }
      if (errno == EINTR) continue;
      // ECONNREFUSED from an ICMP port unreachable: the resend tries the next one.
      VIGIL_LOG(*qr.node->log, kError, errno, "recv() failed while resolving \"%s\"",
                qr.qname.c_str());
      res.loop_.pool().close_connection(c);
      qr.c = nullptr;
      return;
    }
    dns::Reply reply;
    const dns::Parse p = dns::parse_reply(buf, static_cast<std::size_t>(got), qr.id, qr.qname,
                                          qr.qtype, reply);
    if (p != dns::Parse::kOk) {
      VIGIL_LOG(*qr.node->log, kError, 0, "invalid DNS response %u for \"%s\"",
                static_cast<unsigned>(p), qr.qname.c_str());
      continue;  // not ours (or broken): keep waiting for the real one
    }
    if (reply.truncated) {
      res.start_tcp(qr);
      return;
    }
    res.query_done(qr, reply.rcode, &reply);
    return;
  }
}

void Resolver::start_tcp(Query& qr) {
  Node& n = *qr.node;
  Log& log = *n.log;
  loop_.pool().close_connection(*qr.c);
  qr.c = nullptr;
  qr.tcp = true;
  qr.sent = 0;
  qr.got = 0;
  qr.in.reset();
  const ResolverServer& srv = conf_->servers[qr.server % conf_->servers.size()];
  const int fd = ::socket(srv.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd == -1) {
    VIGIL_LOG(log, kAlert, errno, "socket() failed");
    return;  // the resend timer asks again
  }
  Connection* c = loop_.pool().get(fd, log);
  if (c == nullptr) {
    ::close(fd);
    return;
  }
  c->data = &qr;
  c->log = &log;
  c->read->handler = on_tcp;
  c->write->handler = on_tcp;
  c->read->log = c->write->log = &log;
  qr.c = c;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&srv.addr), srv.addrlen) == -1 &&
      errno != EINPROGRESS) {
    VIGIL_LOG(log, kError, errno, "connect() to %s failed", srv.name.c_str());
    loop_.pool().close_connection(*c);
    qr.c = nullptr;
    return;
  }
  Status st = loop_.handle_write_event(*c->write);
  if (st) st = loop_.handle_read_event(*c->read);
  if (!st) {
    VIGIL_LOG(log, kAlert, st.err(), "%s", st.message().c_str());
    loop_.pool().close_connection(*c);
    qr.c = nullptr;
  }
}

void Resolver::on_tcp(Event& ev) {
  Connection& c = *ev.owner<Connection>();
  Query& qr = *static_cast<Query*>(c.data);
  Resolver& res = *qr.res;
  Log& log = *qr.node->log;
  auto fail = [&](int err, const char* what) {
    VIGIL_LOG(log, kError, err, "%s while resolving \"%s\"", what, qr.qname.c_str());
    res.loop_.pool().close_connection(c);
    qr.c = nullptr;  // the resend timer asks again
  };
  // The query with its length prefix (RFC 1035 §4.2.2).
  std::uint8_t out[sizeof qr.packet + 2];
  out[0] = static_cast<std::uint8_t>(qr.plen >> 8);
  out[1] = static_cast<std::uint8_t>(qr.plen);
  std::memcpy(out + 2, qr.packet, qr.plen);
  while (qr.sent < qr.plen + 2) {
    const ssize_t n = ::send(c.fd, out + qr.sent, qr.plen + 2 - qr.sent, MSG_NOSIGNAL);
    if (n == -1) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        c.write->ready = 0;
        if (Status st = res.loop_.handle_write_event(*c.write); !st) fail(st.err(), "event");
        return;
      }
      fail(errno, "send() failed");
      return;
    }
    qr.sent += static_cast<std::size_t>(n);
  }
  for (;;) {
    std::uint8_t* at = qr.len + qr.got;
    std::size_t want = 2 - qr.got;
    if (qr.got >= 2) {
      const std::size_t total = std::size_t{qr.len[0]} << 8 | qr.len[1];
      if (qr.in == nullptr) {
        qr.in.reset(new (std::nothrow) std::uint8_t[total + 1]);
        if (qr.in == nullptr) {
          fail(ENOMEM, "no memory for the reply");
          return;
        }
      }
      at = qr.in.get() + (qr.got - 2);
      want = total + 2 - qr.got;
    }
    if (want == 0) break;
    const ssize_t n = ::recv(c.fd, at, want, 0);
    if (n == -1) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        c.read->ready = 0;
        if (Status st = res.loop_.handle_read_event(*c.read); !st) fail(st.err(), "event");
        return;
      }
      fail(errno, "recv() failed");
      return;
    }
    if (n == 0) {
      fail(0, "connection closed by DNS server");
      return;
    }
    qr.got += static_cast<std::size_t>(n);
  }
  dns::Reply reply;
  const dns::Parse p = dns::parse_reply(qr.in.get(), qr.got - 2, qr.id, qr.qname, qr.qtype, reply);
  if (p != dns::Parse::kOk) {
    fail(0, "invalid DNS response over TCP");
    return;
  }
  res.query_done(qr, reply.rcode, &reply);
}

Resolver::Query* Resolver::new_query(Node& n, int slot, const std::string& qname) {
  auto* qr = new (std::nothrow) Query();
  if (qr == nullptr) return nullptr;
  qr->res = this;
  qr->node = &n;
  qr->slot = slot;
  qr->qtype = n.types[slot];
  qr->qname = qname;
  qr->server = n.server;
  qr->resend.data = qr;
  qr->resend.handler = on_resend;
  qr->resend.cancelable = 1;
  qr->resend.log = n.log;
  n.queries[slot] = qr;
  return qr;
}

// Both questions are answered and neither gave an address, but one named a
// CNAME: as nginx, the target is resolved afresh for every type.
void Resolver::follow_cname(Node& n) {
  std::uint8_t probe[dns::kMaxName + 32];
  const std::string target = std::move(n.cname);
  n.cname.clear();
  if (++n.cnames > kMaxCname) {
    n.qstate[0] = dns::kServFail;
    return node_done(n);
  }
  if (dns::build_query(probe, sizeof probe, 0, target, dns::kTypeA) == 0) {
    n.qstate[0] = dns::kFormErr;  // a target no query can carry (RFC 1035 §2.3.4)
    return node_done(n);
  }
  for (int s = 0; s < 2; ++s) {
    n.qstate[s] = 0;
    if (n.types[s] != 0 && new_query(n, s, target) == nullptr) n.qstate[s] = dns::kServFail;
  }
  if (n.queries[0] == nullptr && n.queries[1] == nullptr) return node_done(n);
  for (Query* q : n.queries) {
    if (q != nullptr) send(*q);
  }
}

void Resolver::query_done(Query& qr, int state, const dns::Reply* reply) {
  Node& n = *qr.node;
  if (state == 0 && reply != nullptr && qr.qtype == dns::kTypePtr && reply->ptr_len == 0 &&
      reply->cname_len == 0 && reply->other_types) {
    // Records of other types only: no answer to the question, and no
    // "no such name" either (RFC 1034 §3.6.2, RFC 6672 §2.3: a DNAME does not
    // rename its own owner). A failure of the server, as nginx ends it (its
    // resolver drops the reply and times out).
    VIGIL_LOG(*n.log, kError, 0, "no PTR type in DNS response for \"%s\"", qr.qname.c_str());
    state = dns::kServFail;
  }
  if (state == 0 && reply != nullptr) {
    if (reply->naddrs > 0 || reply->ptr_len > 0) {
      if (reply->ttl < n.ttl) n.ttl = reply->ttl;
      for (std::size_t i = 0; i < reply->naddrs && n.naddrs < dns::kMaxAddrs; ++i) {
        n.addrs[n.naddrs++] = reply->addrs[i];
      }
      if (reply->ptr_len > 0 && n.name_len == 0) {
        std::memcpy(n.name, reply->ptr, reply->ptr_len);
        n.name_len = reply->ptr_len;
        n.name[n.name_len] = '\0';
      }
    } else if (reply->cname_len > 0 && n.cname.empty() &&
               n.queries[qr.slot == 0 ? 1 : 0] == nullptr) {
      // An alias in the answer that completes the pair: followed unless the
      // other answer brought addresses of its own (nginx keeps those). As
      // nginx's resolver, an alias arriving while the other question is
      // still out is dropped: A's CNAME before an empty AAAA answer is "Host
      // not found" (nginx-tests' http_resolver_aaaa.t, "CNAME zero").
      if (reply->ttl < n.ttl) n.ttl = reply->ttl;
      n.cname.assign(reply->cname, reply->cname_len);
    }
    // No record of the type asked is no error unless the other type has
    // none either (node_done).
  }
  n.qstate[qr.slot] = state;
  const int slot = qr.slot;
  qr.node = nullptr;
  n.queries[slot] = nullptr;
  loop_.del_timer(qr.resend);
  if (qr.c != nullptr) loop_.pool().close_connection(*qr.c);
  qr.c = nullptr;
  delete &qr;
  if (n.queries[0] != nullptr || n.queries[1] != nullptr) return;
  if (n.naddrs == 0 && n.name_len == 0 && !n.cname.empty() && n.qstate[0] == 0 &&
      n.qstate[1] == 0) {
    return follow_cname(n);
  }
  node_done(n);
}

void Resolver::node_done(Node& n) {
  n.done = true;
  // An error of either question is the name's (nginx: A's first); no
  // address of any type asked is "Host not found".
  n.state = n.qstate[0] != 0 ? n.qstate[0] : n.qstate[1];
  if (n.state == 0 && n.naddrs == 0 && n.name_len == 0) n.state = dns::kNxDomain;
  if (n.state != 0) {
    n.naddrs = 0;
    n.name_len = 0;
  }
  const Msec now = clock::current_msec();
  if (n.state != 0) {
    n.expire = now;  // errors are not cached (nginx neither): the next request asks again
  } else if (conf_->valid != 0) {
    n.expire = now + conf_->valid;
  } else {
    const std::uint32_t ttl = n.ttl == UINT32_MAX ? 0 : n.ttl;
    n.expire = now + static_cast<Msec>(ttl) * 1000;
  }
  // Each handler may cancel others or start new lookups: take one at a time.
  n.calling = true;
  while (n.waiting != nullptr) {
    ResolveRequest& q = *n.waiting;
    unlink(q, n.waiting);
    q.node = nullptr;
    loop_.del_timer(q.timer);
    copy_result(n, q);
    q.handler(q);
  }
  n.calling = false;
}

void resolver_exit_loop(EventLoop& loop) {
  loop.drop_context<ResolverSet>(&kResolverKey);
}

}  // namespace vigil
