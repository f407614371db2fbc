#include "event/listen_conf.h"

#include "core/conf/values.h"
#include "vigil/event/listening.h"

namespace vigil {

namespace {

// "host:first-last" (a port range): the two ports and the text before them;
// false when `text` names one port.
bool split_range(std::string_view text, std::string_view& host, int& first, int& last) {
  if (text.starts_with("unix:")) return false;  // a path: any '-' is its own
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || text.find(']', colon) != std::string_view::npos) {
    return false;
  }
  const std::string_view ports = text.substr(colon + 1);
  const std::size_t dash = ports.find('-');
  if (dash == std::string_view::npos) return false;
  auto a = parse_number(ports.substr(0, dash));
  auto b = parse_number(ports.substr(dash + 1));
  first = a ? static_cast<int>(*a) : -1;
  last = b ? static_cast<int>(*b) : -1;
  host = text.substr(0, colon);
  return true;
}

}  // namespace

Status parse_listen(const DirectiveCall& call, std::vector<ListenArgs>& out,
                    bool allow_default_server, bool allow_udp) {
  ListenArgs l;
  l.text = call.arg(0);
  l.where = call.where();
  for (std::size_t i = 1; i < call.arg_count(); ++i) {
    const std::string& a = call.arg(i);
    const std::string_view v = std::string_view(a).substr(a.find('=') + 1);
    if (allow_default_server && (a == "default_server" || a == "default")) {
      l.default_server = true;
    } else if (a == "ssl") {
      l.ssl = true;  // an address property: any listen of the address may say it
    } else if (allow_default_server && a == "http2") {  // layer-names-ok: a listen flag
      l.http2 = true;                                   // layer-names-ok: a listen flag
    } else if (allow_udp && a == "udp") {
      l.udp = true;
    } else if (a == "proxy_protocol") {
      l.proxy_protocol = true;  // an address property, as "ssl"
    } else if (a == "reuseport") {
      l.reuseport = true;
      l.has_options = true;
    } else if (a == "deferred") {
      l.deferred = true;
      l.has_options = true;
    } else if (a == "bind") {
      // Every address gets a socket of its own already.
      l.has_options = true;
    } else if (a.starts_with("backlog=")) {
      auto n = parse_number(v);
      if (!n || *n < 1 || *n > 65535) return call.error("invalid backlog \"" + std::string(v) + "\"");
      l.backlog = static_cast<int>(*n);
      l.backlog_set = true;
      l.has_options = true;
    } else if (a.starts_with("rcvbuf=") || a.starts_with("sndbuf=")) {
      const bool rcv = a[0] == 'r';
      auto n = parse_size(v);
      if (!n || *n == 0 || *n > (1u << 30)) {
        return call.error(std::string("invalid ") + (rcv ? "rcvbuf" : "sndbuf") + " \"" +
                          std::string(v) + "\"");
      }
      (rcv ? l.rcvbuf : l.sndbuf) = static_cast<int>(*n);
      l.has_options = true;
    } else if (a.starts_with("ipv6only=")) {
      if (v != "on" && v != "off") {
        return call.error("invalid ipv6only flags \"" + std::string(v) + "\"");
      }
      l.ipv6only = v == "on";
      l.has_options = true;
    } else if (a.starts_with("so_keepalive=")) {
      // nginx also takes "keepidle:keepintvl:keepcnt", which Vigil does not set.
      if (v != "on" && v != "off") {
        return call.error("invalid so_keepalive value: \"" + a + "\"");
      }
      l.so_keepalive = v == "on";
      l.has_options = true;
    } else {
      return call.error("invalid parameter \"" + a + "\"");
    }
  }
  if (l.reuseport && l.text.starts_with("unix:")) {
    // One path is one socket: the workers cannot each bind a copy.
    return call.error("reuseport is not supported for the unix domain socket \"" + l.text + "\"");
  }
  std::string_view host;
  int first = 0;
  int last = 0;
  const bool range = split_range(l.text, host, first, last);
  if (range && (first < 1 || last > 65535 || first > last)) {
    return call.error("invalid port range in \"" + l.text + "\" of the \"listen\" directive");
  }
  if (!range) first = last = 0;
  for (int port = first; port <= last; ++port) {
    const std::string text = range ? std::string(host) + ":" + std::to_string(port) : l.text;
    Listening probe;
    if (Status s = probe.set_address(text); !s) {
      return call.error(s.message() + " in \"listen\" directive");
    }
    ListenArgs one = l;
    one.addr = probe.addr;
    one.addrlen = probe.addrlen;
    one.addr_text = probe.addr_text;
    out.push_back(std::move(one));
  }
  return Status::ok();
}

void apply_listen_options(const ListenArgs& l, Listening& ls) {
  ls.backlog = l.backlog;
  ls.reuseport = l.reuseport;
  ls.deferred_accept = l.deferred;
  ls.rcvbuf = l.rcvbuf;
  ls.sndbuf = l.sndbuf;
  ls.ipv6only = l.ipv6only;
  ls.keepalive = l.so_keepalive;
  ls.proxy_protocol = l.proxy_protocol;
  ls.type = l.udp ? SOCK_DGRAM : SOCK_STREAM;
}

}  // namespace vigil
