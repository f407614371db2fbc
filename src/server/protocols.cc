#include "server/protocols.h"

#include "http/protocol.h"

namespace vigil {

namespace {
// Protocols register here (one line each).
const ProtocolHooks kProtocols[] = {
    {"http", http::create_listeners, http::init_worker, http::exit_worker, http::reopen_logs},
};
}  // namespace

std::span<const ProtocolHooks> protocols() { return std::span<const ProtocolHooks>(kProtocols); }

}  // namespace vigil
