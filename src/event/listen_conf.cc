#include "event/listen_conf.h"

#include "core/conf/values.h"
#include "vigil/event/listening.h"

namespace vigil {

Status parse_listen(const DirectiveCall& call, ListenArgs& l, bool allow_default_server) {
  l.text = call.arg(0);
  l.where = call.where();
  Listening probe;
  if (Status s = probe.set_address(l.text); !s) {
    return call.error(s.message() + " in \"listen\" directive");
  }
  l.addr = probe.addr;
  l.addrlen = probe.addrlen;
  l.addr_text = probe.addr_text;
  for (std::size_t i = 1; i < call.arg_count(); ++i) {
    const std::string& a = call.arg(i);
    if (allow_default_server && (a == "default_server" || a == "default")) {
      l.default_server = true;
    } else if (a == "ssl") {
      l.ssl = true;  // an address property: any listen of the address may say it
    } else if (a == "reuseport") {
      l.reuseport = true;
      l.has_options = true;
    } else if (a == "deferred") {
      l.deferred = true;
      l.has_options = true;
    } else if (a.starts_with("backlog=")) {
      auto v = parse_number(std::string_view(a).substr(8));
      if (!v || *v < 1 || *v > 65535) return call.error("invalid backlog \"" + a.substr(8) + "\"");
      l.backlog = static_cast<int>(*v);
      l.has_options = true;
    } else {
      return call.error("invalid parameter \"" + a + "\"");
    }
  }
  return Status::ok();
}

}  // namespace vigil
