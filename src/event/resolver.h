#pragma once
// The stub resolver (nginx's ngx_resolver): asynchronous DNS on the event
// loop, no thread and no blocking call. The protocols use it for names known
// only at run time (proxy_pass with variables, a mail client's name).
//
//   auto conf = std::make_shared<ResolverConf>();     // the `resolver` directive
//   parse_resolver(args, *conf)                        // at load time
//   Resolver* res = Resolver::of(loop, conf);          // per loop, made once
//   ResolveRequest& q = ...;  q.handler = ...; q.data = ...; q.timeout = ...;
//   if (res->resolve_name(q, "example.net")) { answered now: q.state, q.addrs }
//   else { q.handler(q) runs later, once }             // or res->cancel(q)
//
// One query per name at a time: requests for a name being resolved wait on
// it. Answers are cached by name for their TTL (or `valid=`); errors are
// not (nginx neither). Successive names go to the servers in turn, the
// first to the first. Each question goes out over UDP from a new socket
// (a fresh source port), with a random id; a reply must come from the
// server, carry the id and repeat the question. A truncated reply is asked
// again over TCP. A server that does not answer is asked again after
// kResend (or half the request's timeout, if shorter), the next one in turn.
// CNAMEs are followed (at most kMaxCname).
//
// The resolver's own lines (a bad reply, a server that cannot be reached)
// go to the loop's log, as nginx's go to the cycle's; the caller logs what
// a failed lookup means for it ("... could not be resolved (3: Host not
// found)").
//
// Ownership: the ResolveRequest is the caller's and must stay alive until
// its handler ran or cancel() returned. The Resolver belongs to the loop's
// context and is freed by resolver_exit_loop (a worker's exit hook), which
// closes its sockets; requests still waiting are not called.

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "event/dns.h"
#include "vigil/core/result.h"
#include "vigil/event/event.h"

namespace vigil {

class EventLoop;
class Log;

struct ResolverServer {
  sockaddr_storage addr{};
  socklen_t addrlen = 0;
  std::string name;  // "127.0.0.1:53"
};

// The `resolver` directive: `resolver address ... [valid=time] [ipv4=on|off]
// [ipv6=on|off] [status_zone=zone]`.
struct ResolverConf {
  std::vector<ResolverServer> servers;
  Msec valid = 0;  // 0: the answers' TTLs
  bool ipv4 = true;
  bool ipv6 = true;
};

// Fills `out` from the directive's arguments; the error text is nginx's
// (the caller adds the file and line).
Status parse_resolver(const std::vector<std::string>& args, ResolverConf& out);

// nginx's text of a resolver state ("Host not found", "Operation timed out").
const char* resolver_strerror(int state);

inline constexpr int kResolveTimedOut = 110;  // ETIMEDOUT, as nginx reports it

struct ResolveRequest {
  // Set by the caller.
  void (*handler)(ResolveRequest& q) = nullptr;
  void* data = nullptr;
  Msec timeout = 30000;  // resolver_timeout

  // The result: state 0 with naddrs > 0 (a name) or name_len > 0 (an
  // address); else a DNS rcode (dns::kNxDomain...) or kResolveTimedOut.
  int state = 0;
  std::size_t naddrs = 0;
  dns::Address addrs[dns::kMaxAddrs];
  char name[dns::kMaxName + 1] = {};
  std::size_t name_len = 0;

  // The resolver's.
  void* node = nullptr;
  void* resolver = nullptr;
  ResolveRequest* prev = nullptr;
  ResolveRequest* next = nullptr;
  Event timer;
};

class Resolver {
 public:
  static constexpr Msec kResend = 5000;
  static constexpr unsigned kMaxCname = 8;

  // The loop's resolver for `conf` (made at the first call; null without memory).
  static Resolver* of(EventLoop& loop, const std::shared_ptr<const ResolverConf>& conf);

  Resolver(EventLoop& loop, std::shared_ptr<const ResolverConf> conf);
  ~Resolver();
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  // The addresses of `name` (A, AAAA as the conf says). True: answered now
  // (from the cache, or a failure to start); false: q.handler runs later.
  bool resolve_name(ResolveRequest& q, std::string_view name);
  // The name of an address (PTR).
  bool resolve_addr(ResolveRequest& q, const dns::Address& addr);
  // Forgets a waiting request: its handler is not called. Safe to call
  // twice, or after the handler ran.
  void cancel(ResolveRequest& q);

  const ResolverConf& conf() const { return *conf_; }

  struct Node;
  struct Query;

 private:
  friend struct Query;
  bool start(ResolveRequest& q, const std::string& key, bool ptr);
  void send(Query& qr);
  void start_tcp(Query& qr);
  void query_done(Query& qr, int state, const dns::Reply* reply);
  Query* new_query(Node& n, int slot, const std::string& qname);
  void node_done(Node& n);
  void follow_cname(Node& n);
  void drop_query(Query& qr);
  void expire_some();
  static void on_udp_read(Event& ev);
  static void on_tcp(Event& ev);
  static void on_resend(Event& ev);
  static void on_request_timeout(Event& ev);

  EventLoop& loop_;
  std::shared_ptr<const ResolverConf> conf_;
  std::vector<std::unique_ptr<Node>> nodes_;
  unsigned next_server_ = 0;
  std::uint64_t rng_[2] = {};
  std::uint16_t random16();
};

// Closes every resolver socket of the loop and frees its resolvers (a
// worker's exit hook).
void resolver_exit_loop(EventLoop& loop);

}  // namespace vigil
