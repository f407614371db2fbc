#include "mail/protocol.h"

#include <cstring>

#include "mail/mail_conf.h"
#include "mail/session.h"

namespace vigil::mail {

Status create_listeners(const Configuration& conf, std::vector<std::unique_ptr<Listening>>& out) {
  const MailFinalConf* fin = mail_final(conf);
  if (fin == nullptr) return Status::ok();
  for (MailSrvConf* srv : fin->servers) {
    for (std::size_t i = 0; i < srv->listens.size(); ++i) {
      const ListenArgs& l = srv->listens[i];
      auto ls = std::make_unique<Listening>();
      std::memcpy(&ls->addr, &l.addr, sizeof l.addr);
      ls->addrlen = l.addrlen;
      ls->addr_text = l.addr_text;
      apply_listen_options(l, *ls);
      // No TCP_NODELAY (nginx's mail proxy sets none either): the dialogue
      // answers each command in one write, and in the relay Nagle lets the
      // proxy_buffer-sized writes of a large FETCH leave as fewer, larger
      // segments, which on loopback costs about a tenth less CPU per session
      // (docs/benchmarks.md).
      ls->tcp_nodelay = false;
      // The arena holds only the peer's address and its text: the session's
      // buffers are blocks of their own (session.cc).
      ls->pool_size = 128;
      ls->handler = init_connection;
      ls->proxy_protocol_timeout = srv->timeout;  // nginx's mail reads the header within "timeout"
      ls->servers = srv->ports[i].get();
      out.push_back(std::move(ls));
    }
  }
  return Status::ok();
}

}  // namespace vigil::mail
