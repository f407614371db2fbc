#include "server/protocols.h"

namespace vigil {

namespace {
// Protocols register here (one line each).
const ProtocolHooks kProtocols[] = {
    {"none"},
};
}  // namespace

std::span<const ProtocolHooks> protocols() { return std::span<const ProtocolHooks>(kProtocols); }

}  // namespace vigil
