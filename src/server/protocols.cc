#include "server/protocols.h"

#include <vector>

#include "http/protocol.h"
#include "stream/protocol.h"
#include "upstream/upstream.h"

namespace vigil {

namespace {
// Protocols register here (one line each).
const ProtocolHooks kProtocols[] = {
    {"http", http::create_listeners, http::init_worker, http::exit_worker, http::reopen_logs},
    {"stream", stream::create_listeners},
    // The keepalive caches of upstream groups (per worker): closed at exit.
    {"upstream", nullptr, nullptr, upstream::close_keepalive},
};

// The compiled-in list followed by those added at run time (add_protocol).
std::vector<ProtocolHooks>& registered() {
  static std::vector<ProtocolHooks> list(std::begin(kProtocols), std::end(kProtocols));
  return list;
}
}  // namespace

std::span<const ProtocolHooks> protocols() { return registered(); }

void add_protocol(const ProtocolHooks& hooks) { registered().push_back(hooks); }

}  // namespace vigil
