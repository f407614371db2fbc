#include "event/tls/ocsp_fetch.h"

#include <netinet/in.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "event/tls/ocsp_reply.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"
#include "vigil/event/pool.h"
#include "vigil/event/posted.h"

namespace vigil {
namespace {

// nginx reads the answer into one 16 KiB buffer: a longer one is cut there
// (and then fails to decode).
constexpr std::size_t kMaxAnswer = 16384;

const char kFetchesKey = 0;

struct Fetches {
  OcspFetch* head = nullptr;
};

}  // namespace

OcspFetch::OcspFetch(EventLoop& loop, Params params, Done done, void* data)
    : loop_(loop), p_(std::move(params)), done_(done), data_(data) {
  start_.data = this;
  start_.handler = on_start;
  start_.log = p_.log;
  query_.timer.log = p_.log;
}

OcspFetch* OcspFetch::start(EventLoop& loop, Params params, Done done, void* data) {
  Log& log = params.log != nullptr ? *params.log : loop.log();
  params.log = &log;
  auto* list = loop.context_or_make<Fetches>(&kFetchesKey);
  OcspFetch* f =
      list != nullptr ? new (std::nothrow) OcspFetch(loop, std::move(params), done, data) : nullptr;
  if (f == nullptr) {
    VIGIL_LOG(log, kAlert, 0, "no memory for an OCSP request");
    return nullptr;
  }
  f->next_ = list->head;
  if (list->head != nullptr) list->head->prev_ = f;
  list->head = f;
  // Started from the loop, so done never runs inside the caller.
  loop.post(f->start_);
  return f;
}

OcspFetch::~OcspFetch() {
  if (p_.slot != nullptr) *p_.slot = nullptr;
  PostedQueue::remove(start_);
  if (resolver_ != nullptr) resolver_->cancel(query_);
  close_peer();
  if (auto* list = static_cast<Fetches*>(loop_.context(&kFetchesKey)); list != nullptr) {
    if (prev_ != nullptr) prev_->next_ = next_;
    if (next_ != nullptr) next_->prev_ = prev_;
    if (list->head == this) list->head = next_;
  }
}

void OcspFetch::cancel() {
  delete this;
}

std::string OcspFetch::context() const {
  std::string s = " while requesting certificate status, responder: " + p_.responder->host;
  if (addrs_ != nullptr && naddr_ < addrs_->size()) s += ", peer: " + (*addrs_)[naddr_].text;
  if (!p_.cert_name.empty()) s += ", certificate: \"" + p_.cert_name + "\"";
  return s;
}

void OcspFetch::on_start(Event& ev) {
  ev.owner<OcspFetch>()->begin();
}

// nginx's ngx_ssl_ocsp_request: an address needs no resolver; a name is
// resolved when a resolver is defined, else the addresses it had at load
// time are used (with a warning), and without those the request fails.
void OcspFetch::begin() {
  const OcspResponder& r = *p_.responder;
  if (r.numeric) {
    addrs_ = &r.addrs;
    connect();
    return;
  }
  if (p_.resolver == nullptr || p_.resolver->servers.empty()) {
    if (r.addrs.empty()) {
      VIGIL_LOG(*p_.log, kError, 0, "no resolver defined to resolve %s%s", r.host.c_str(),
                context().c_str());
      fail();
      return;
    }
    VIGIL_LOG(*p_.log, kWarn, 0, "no resolver defined to resolve %s%s", r.host.c_str(),
              context().c_str());
    addrs_ = &r.addrs;
    connect();
    return;
  }
  Resolver* res = Resolver::of(loop_, p_.resolver);
  if (res == nullptr) {
    VIGIL_LOG(*p_.log, kAlert, 0, "no memory for a resolver%s", context().c_str());
    fail();
    return;
  }
  query_.handler = on_resolved;
  query_.data = this;
  query_.timeout = p_.resolver_timeout;
  resolver_ = res;
  if (res->resolve_name(query_, r.host)) on_resolved(query_);
}

void OcspFetch::on_resolved(ResolveRequest& q) {
  auto& f = *static_cast<OcspFetch*>(q.data);
  f.resolver_ = nullptr;
  if (q.state != 0 || q.naddrs == 0) {
    VIGIL_LOG(*f.p_.log, kError, 0, "%s could not be resolved (%d: %s)%s",
              f.p_.responder->host.c_str(), q.state, resolver_strerror(q.state),
              f.context().c_str());
    f.fail();
    return;
  }
  f.resolved_.clear();
  for (std::size_t i = 0; i < q.naddrs; ++i) {
    sockaddr_storage ss;
    const socklen_t len = dns::to_sockaddr(q.addrs[i], 0, ss);
    f.resolved_.push_back(
        ocsp_address(reinterpret_cast<const sockaddr*>(&ss), len, f.p_.responder->port));
  }
  f.addrs_ = &f.resolved_;
  f.connect();
}

void OcspFetch::close_peer() {
  if (pc_.connection != nullptr) {
    loop_.pool().close_connection(*pc_.connection);
    pc_.connection = nullptr;
  }
}

void OcspFetch::connect() {
  if (naddr_ >= addrs_->size()) {
    fail();
    return;
  }
  const OcspAddress& a = (*addrs_)[naddr_];
  pc_ = PeerConnection{};
  std::memcpy(&pc_.addr, &a.addr, a.len);
  pc_.addrlen = a.len;
  pc_.name = a.text;
  pc_.log = p_.log;
  sent_ = 0;
  answer_.clear();
  const int rc = event_connect_peer(loop_, pc_);
  if (rc == kPeerError) {
    fail();
    return;
  }
  if (rc != kPeerOk && rc != kPeerAgain) {
    next();
    return;
  }
  Connection& c = *pc_.connection;
  c.data = this;
  c.log = p_.log;
  c.read->handler = on_read;
  c.write->handler = on_write;
  c.read->log = p_.log;
  c.write->log = p_.log;
  loop_.add_timer(*c.read, p_.timeout);
  loop_.add_timer(*c.write, p_.timeout);
  // The write event says when the connect is done (at once for kPeerOk).
  if (rc == kPeerOk) loop_.post(*c.write);
}

// The next address, or the end (nginx's ngx_ssl_ocsp_next).
void OcspFetch::next() {
  close_peer();
  ++naddr_;
  if (naddr_ >= addrs_->size()) {
    fail();
    return;
  }
  connect();
}

void OcspFetch::fail() {
  finish(false, {});
}

void OcspFetch::finish(bool ok, std::string_view body) {
  close_peer();
  Done done = done_;
  void* data = data_;
  // The answer outlives the fetch until done returns.
  const std::size_t off = ok ? static_cast<std::size_t>(body.data() - answer_.data()) : 0;
  const std::size_t len = ok ? body.size() : 0;
  std::string answer = std::move(answer_);
  delete this;
  done(data, ok, std::string_view(answer).substr(off, len));
}

void OcspFetch::on_write(Event& ev) {
  Connection& c = *ev.owner<Connection>();
  auto& f = *static_cast<OcspFetch*>(c.data);
  if (c.close) {
    f.fail();
    return;
  }
  if (ev.timedout) {
    VIGIL_LOG(*f.p_.log, kError, ETIMEDOUT, "OCSP responder timed out%s", f.context().c_str());
    f.next();
    return;
  }
  if (f.sent_ >= f.p_.request.size()) return;
  if (f.sent_ == 0) {
    if (int err = peer_connect_result(c); err != 0) {
      VIGIL_LOG(*f.p_.log, kError, err, "connect() failed%s", f.context().c_str());
      f.next();
      return;
    }
  }
  while (f.sent_ < f.p_.request.size()) {
    const long n = c.send(c, f.p_.request.data() + f.sent_, f.p_.request.size() - f.sent_);
    if (n == kIoAgain) {
      if (Status st = f.loop_.handle_write_event(*c.write); !st) f.fail();
      return;
    }
    if (n < 0) {
      VIGIL_LOG(*f.p_.log, kError, errno, "send() failed%s", f.context().c_str());
      f.next();
      return;
    }
    f.sent_ += static_cast<std::size_t>(n);
  }
  f.loop_.del_timer(*c.write);
  // Nothing more to write: a level-triggered backend stops reporting it.
  if (Status st = f.loop_.handle_write_event(*c.write); !st) {
    f.fail();
    return;
  }
  if (Status st = f.loop_.handle_read_event(*c.read); !st) {
    f.fail();
    return;
  }
  if (c.read->ready) on_read(*c.read);
}

void OcspFetch::on_read(Event& ev) {
  Connection& c = *ev.owner<Connection>();
  auto& f = *static_cast<OcspFetch*>(c.data);
  if (c.close) {
    f.fail();
    return;
  }
  if (ev.timedout) {
    VIGIL_LOG(*f.p_.log, kError, ETIMEDOUT, "OCSP responder timed out%s", f.context().c_str());
    f.next();
    return;
  }
  if (f.sent_ < f.p_.request.size()) return;  // the request is not out yet
  bool eof = false;
  for (;;) {
    char buf[4096];
    const std::size_t room = kMaxAnswer - f.answer_.size();
    if (room == 0) {
      eof = true;
      break;
    }
    const long n = c.recv(c, buf, room < sizeof buf ? room : sizeof buf);
    if (n == kIoAgain) {
      if (Status st = f.loop_.handle_read_event(*c.read); !st) {
        f.fail();
        return;
      }
      break;
    }
    if (n <= 0) {
      eof = true;
      break;
    }
    f.answer_.append(buf, static_cast<std::size_t>(n));
  }
  OcspReply a;
  const bool whole = ocsp_parse_reply(f.answer_, a);
  if (a.error != nullptr) {
    if (a.content_type.empty()) {
      VIGIL_LOG(*f.p_.log, kError, 0, "%s%s", a.error, f.context().c_str());
    } else {
      VIGIL_LOG(*f.p_.log, kError, 0, "%s: \"%.*s\"%s", a.error,
                static_cast<int>(a.content_type.size()), a.content_type.data(),
                f.context().c_str());
    }
    f.next();
    return;
  }
  if (!eof) return;
  if (!whole) {
    VIGIL_LOG(*f.p_.log, kError, 0, "OCSP responder prematurely closed connection%s",
              f.context().c_str());
    f.next();
    return;
  }
  f.finish(a.status == 200, a.body);
}

void ocsp_exit_loop(EventLoop& loop) {
  auto* list = static_cast<Fetches*>(loop.context(&kFetchesKey));
  if (list == nullptr) return;
  while (list->head != nullptr) list->head->cancel();
  loop.drop_context<Fetches>(&kFetchesKey);
}

}  // namespace vigil
