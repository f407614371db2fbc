#pragma once
// split_clients $source $variable { percent value; ... * value; } (split_clients.cc).

#include <cstddef>
#include <cstdint>

namespace vigil::http {

class HttpModule;
const HttpModule& split_clients_module();

// MurmurHash2 with seed 0, the hash split_clients spreads sources by (so
// the same source lands in the same part as with nginx).
std::uint32_t murmur_hash2(const unsigned char* data, std::size_t len);

}  // namespace vigil::http
